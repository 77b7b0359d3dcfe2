package main

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// TestGCStepDeadline: a storage that stops answering at any step of gc
// (the clock probe, the listing, a delete) fails gc within about one
// --timeout, with an error that names the storage, and nothing more is
// deleted after the step that hung.
func TestGCStepDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	stallOn := func(op dstltest.Op, match func(string) bool) dstltest.FaultFunc {
		return func(o dstltest.Op, name string) dstltest.Fault {
			return dstltest.Fault{Stall: o == op && match(name)}
		}
	}
	isProbe := func(name string) bool { return strings.Contains(name, objname.ClockProbePrefix) }
	anything := func(string) bool { return true }
	for _, tc := range []struct {
		name   string
		fault  func(victim string) dstltest.FaultFunc
		dryRun bool
		left   int // objects left of 6
	}{
		{"probe put stalls", func(string) dstltest.FaultFunc { return stallOn(dstltest.OpPut, isProbe) }, false, 6},
		{"probe listing stalls", func(string) dstltest.FaultFunc { return stallOn(dstltest.OpList, isProbe) }, false, 6},
		{"listing stalls", func(string) dstltest.FaultFunc {
			return stallOn(dstltest.OpList, func(p string) bool { return p == "job/" })
		}, false, 6},
		{"every call stalls, dry run", func(string) dstltest.FaultFunc {
			return func(dstltest.Op, string) dstltest.Fault { return dstltest.Fault{Stall: true} }
		}, true, 6},
		{"a delete stalls", func(victim string) dstltest.FaultFunc {
			return stallOn(dstltest.OpDelete, func(n string) bool { return n == victim })
		}, false, 5}, // the one before it deleted; no other started after it hung
		{"every delete stalls", func(string) dstltest.FaultFunc { return stallOn(dstltest.OpDelete, anything) }, false, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := timedBackend{dstltest.NewBackend(), map[string]time.Time{}}
			names := memObjects(t, b, 6, time.Now().Add(-3*time.Hour))
			b.SetFault(tc.fault(names[1]))
			args := []string{"--grace", "1h", "--keep-none", "--concurrency", "1", "--timeout", timeout.String()}
			if tc.dryRun {
				args = append(args, "--dry-run")
			}
			start := time.Now()
			r := runGCOver(t, t.Context(), b, time.Now, args...)
			took := time.Since(start)
			if r.code != exitRuntime || !strings.Contains(r.errOut, "did not answer within --timeout 300ms") || !strings.Contains(r.errOut, "mem://test") {
				t.Fatalf("exit %d after %v\n%s\n%s", r.code, took, r.out, r.errOut)
			}
			if took > 10*timeout {
				t.Errorf("gc failed after %v; want about %v", took, timeout)
			}
			left := 0
			for _, oi := range b.Objects() {
				if !isProbe(oi.Name) {
					left++
				}
			}
			if left != tc.left {
				t.Errorf("%d objects left, want %d; report %+v", left, tc.left, r.rep)
			}
		})
	}
}

// silentEndpoint listens on 127.0.0.1 and accepts connections that it
// never answers, until the test ends. It returns the address.
func silentEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestGCSilentEndpoint: against an S3 endpoint that accepts connections
// and never answers, gc fails within its --timeout (not after the
// backend's retries of 30 s attempts), naming the endpoint, in a real run
// and in a dry run; and the default --timeout keeps every way of failing
// so within 30 s.
func TestGCSilentEndpoint(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	addr := silentEndpoint(t)
	q := url.Values{"endpoint": {"http://" + addr}, "region": {"us-east-1"}, "use_path_style": {"true"}}
	base := "s3://bucket/dstl?" + q.Encode()
	for _, dryRun := range []bool{false, true} {
		args := []string{"gc", "--base-path", base, "--job-id", "job", "--grace", "1h", "--keep-none", "--timeout", "1s"}
		if dryRun {
			args = append(args, "--dry-run")
		}
		start := time.Now()
		code, out, errOut := runCLI(t, args...)
		took := time.Since(start)
		if code != exitRuntime || !strings.Contains(errOut, addr) || !strings.Contains(errOut, "did not answer within --timeout 1s") {
			t.Fatalf("dry run %v: exit %d after %v\n%s\n%s", dryRun, code, took, out, errOut)
		}
		if took > 5*time.Second {
			t.Errorf("dry run %v: gc failed after %v; want within about 2 × --timeout", dryRun, took)
		}
	}
	// Failing takes at most gcWaits steps of --timeout (a dry run's: the
	// probe, its delete, the listing); with the default, within 30 s.
	var o gcOptions
	fs := gcFlags(&o, new(strings.Builder))
	d, err := time.ParseDuration(fs.Lookup("timeout").DefValue)
	if err != nil || d <= 0 || time.Duration(gcWaits)*d > 30*time.Second {
		t.Errorf("default --timeout %q (%v): %d waits of it exceed 30s", fs.Lookup("timeout").DefValue, err, gcWaits)
	}
}
