package main

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// silentEndpoint starts a TCP listener on 127.0.0.1 that accepts
// connections, reads what they send and never answers; it returns its
// host:port.
func silentEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestInspectSilentEndpoint: dstl inspect of an object on an endpoint that
// takes connections and never answers fails within 30 s with the default
// deadlines, naming the endpoint, and exits 3.
func TestInspectSilentEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		bound        time.Duration
	}{
		{"short deadlines", "&response_timeout=300ms", 3 * time.Second},
		{"defaults", "", 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.params == "" && testing.Short() {
				t.Skip("takes about 20 s")
			}
			t.Setenv("AWS_ACCESS_KEY_ID", "k")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			addr := silentEndpoint(t)
			start := time.Now()
			code, _, errOut := runCLI(t, "inspect", "s3://bkt/job/x.dstl?use_path_style=true&region=us-east-1&endpoint=http://"+addr+tc.params)
			took := time.Since(start)
			t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), errOut)
			if code != exitRuntime {
				t.Errorf("exit %d, want %d", code, exitRuntime)
			}
			if took > tc.bound {
				t.Errorf("took %v, want at most %v", took, tc.bound)
			}
			if !strings.Contains(errOut, addr) {
				t.Errorf("the error does not name the endpoint %s", addr)
			}
		})
	}
}
