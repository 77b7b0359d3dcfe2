package main

import (
	"strings"
	"testing"
	"time"
)

// TestInspectSilentEndpoint (silentEndpoint is gc's test's): dstl inspect of an object on an endpoint that
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
