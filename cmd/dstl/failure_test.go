package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// refusedErr is the error of an HTTP request to an endpoint that refuses
// connections, as net/http returns it.
func refusedErr(op, u string) error {
	return &url.Error{Op: op, URL: u, Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

// TestFailureLines: an error is reported as one line per distinct
// failure, its cause first, without the package prefix "dstl: " again.
func TestFailureLines(t *testing.T) {
	const cause = "dial tcp 127.0.0.1:1: connect: connection refused"
	persist := func(log int) error {
		put := fmt.Errorf(`s3 put "x.dstl": s3://b/x.dstl at http://127.0.0.1:1: PutObject: no answer: %w`, refusedErr("Put", "http://127.0.0.1:1/b/x.dstl"))
		return fmt.Errorf("dstl: persist [0, 1) of log %d: dstl: upload of 8 tasks to \"s3\" failed after 3 attempts: %w", log, put)
	}
	var eight []error
	for i := range 8 {
		eight = append(eight, persist(i))
	}
	damaged := errors.New(`catalog: damaged catalog object "a": bad magic`)
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"one", errors.New("dstl: open local backend at \"x\": permission denied"), []string{`open local backend at "x": permission denied`}},
		{"the cause first", fmt.Errorf("catalog: list \"_catalog/\": s3 list: ListObjectsV2: no answer: %w", refusedErr("Get", "http://127.0.0.1:1/b?list-type=2")),
			[]string{cause + ` (catalog: list "_catalog/": s3 list: ListObjectsV2: no answer)`}},
		{"eight of one cause", fmt.Errorf("checkpoint 1: %w", errors.Join(eight...)),
			[]string{cause + ` (checkpoint 1: persist [0, 1) of log 0: upload of 8 tasks to "s3" failed after 3 attempts: s3 put "x.dstl": s3://b/x.dstl at http://127.0.0.1:1: PutObject: no answer), and 7 more failures of this cause`}},
		{"distinct failures", errors.Join(damaged, persist(3), damaged, persist(4)),
			[]string{damaged.Error() + ", and 1 more like it",
				cause + ` (persist [0, 1) of log 3: upload of 8 tasks to "s3" failed after 3 attempts: s3 put "x.dstl": s3://b/x.dstl at http://127.0.0.1:1: PutObject: no answer), and 1 more failure of this cause`}},
		{"a request ended by its context", fmt.Errorf("no answer within 2s: gcs list: %w", &url.Error{Op: "Get", URL: "http://h/b", Err: context.DeadlineExceeded}),
			[]string{`no answer within 2s: gcs list: Get "http://h/b": context deadline exceeded`}},
		{"no gcs credentials", fmt.Errorf(`dstl: open gcs backend at "gs://b/p": gcs: open bucket "b": dialing: %w`,
			errors.New("credentials: could not find default credentials. See https://cloud.google.com/docs/authentication/external/set-up-adc for more information")),
			[]string{`no credentials for gcs: could not find default credentials. See https://cloud.google.com/docs/authentication/external/set-up-adc for more information (open gcs backend at "gs://b/p": gcs: open bucket "b": dialing)`}},
		{"a join wrapped twice", fmt.Errorf("%w: %w", errUsage, errors.Join(errors.New("a"), errors.New("b"))), []string{"bad argument: a", "bad argument: b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failureLines(tc.err); !slices.Equal(got, tc.want) {
				t.Errorf("failureLines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
