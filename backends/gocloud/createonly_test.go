package gocloud

import (
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
)

// probeName is the probe object of the create-only checks of these tests.
const probeName = ".create-only-probe"

// TestVerifyCreateOnlyPaths: through s3blob on MinIO and gcsblob on
// fake-gcs-server, the create-only check probes the multipart path too
// (a CompleteMultipartUpload, a resumable upload), both stores refuse it,
// and the check passes with the requests that docs/STORES.md counts.
func TestVerifyCreateOnlyPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		// open opens a backend through a recording proxy, or skips.
		open func(t *testing.T) (backends.Backend, *faultproxy.Proxy)
		// multipart reports whether a request is of the multipart path,
		// the last one of which completes it.
		multipart []func(faultproxy.Record) bool
		requests  int // the requests of the check
	}{
		{"S3", openS3Recorded, []func(faultproxy.Record) bool{
			func(r faultproxy.Record) bool { return r.Method == http.MethodPost && r.Query == "uploads=" }, // CreateMultipartUpload
			func(r faultproxy.Record) bool {
				return r.Method == http.MethodPost && strings.HasPrefix(r.Query, "uploadId=")
			},
		}, 11},
		{"GCS", openGCSRecorded, []func(faultproxy.Record) bool{
			func(r faultproxy.Record) bool { return strings.Contains(r.Query, "uploadType=resumable") },
		}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, proxy := tc.open(t)
			defer b.Close()
			if err := backends.VerifyCreateOnly(t.Context(), b, probeName); err != nil {
				t.Fatalf("VerifyCreateOnly: %v", err)
			}
			rs := proxy.Records()
			var sent []string
			for _, r := range rs {
				sent = append(sent, r.Method+" "+r.Path+"?"+r.Query)
			}
			for i, is := range tc.multipart {
				if !slices.ContainsFunc(rs, is) {
					t.Errorf("request %d of the multipart path not sent: %q", i, sent)
				}
			}
			if len(rs) != tc.requests || len(rs) > backends.ProbeRequests {
				t.Errorf("the check sent %d requests, want %d (docs/STORES.md), at most ProbeRequests %d: %q", len(rs), tc.requests, backends.ProbeRequests, sent)
			}
			if _, err := b.Get(t.Context(), probeName, 0, -1); !errors.Is(err, backends.ErrNotFound) {
				t.Errorf("the probe object after the check: %v, want it deleted", err)
			}
		})
	}
}

// TestVerifyCreateOnlyIgnoredOnCompletionS3: a store that honours
// If-None-Match: * on PutObject and ignores it on CompleteMultipartUpload
// (MinIO behind a proxy that takes the header off the completion and signs
// the request anew) fails the check through the gocloud driver, on the
// multipart path. Before the driver had that path, the check passed it.
func TestVerifyCreateOnlyIgnoredOnCompletionS3(t *testing.T) {
	b, proxy := openS3Recorded(t)
	defer b.Close()
	env := s3Env(t)
	creds := aws.Credentials{AccessKeyID: env["DSTL_S3_ACCESS_KEY"], SecretAccessKey: env["DSTL_S3_SECRET_KEY"]}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	stripped := 0
	proxy.SetRule(func(r *http.Request, n int) faultproxy.Action {
		if r.Method != http.MethodPost || !r.URL.Query().Has("uploadId") || r.Header.Get("If-None-Match") == "" {
			return faultproxy.Action{}
		}
		stripped++
		r.Header.Del("If-None-Match")
		r.Header.Del("Authorization")
		if err := signer.SignHTTP(r.Context(), creds, r, r.Header.Get("X-Amz-Content-Sha256"), "s3", env["DSTL_S3_REGION"], time.Now()); err != nil {
			t.Errorf("sign the completion anew: %v", err)
			return faultproxy.Action{Status: http.StatusInternalServerError}
		}
		return faultproxy.Action{}
	})
	err := backends.VerifyCreateOnly(t.Context(), b, probeName)
	if !errors.Is(err, backends.ErrCreateOnlyIgnored) || !strings.Contains(err.Error(), "the completion of a multipart upload") {
		t.Fatalf("VerifyCreateOnly = %v, want ErrCreateOnlyIgnored on the completion of a multipart upload (%d completions stripped of If-None-Match)", err, stripped)
	}
	if stripped != 2 {
		t.Errorf("%d completions stripped of If-None-Match, want 2 (the put that went through is sent once more)", stripped)
	}
}

// openS3Recorded opens a backend on MinIO through s3blob, under a random
// prefix and through a recording proxy, or skips the test. At the end it
// checks that no multipart upload is left and deletes what is.
func openS3Recorded(t *testing.T) (backends.Backend, *faultproxy.Proxy) {
	env := s3Env(t)
	check := s3Check(t, env)
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	prefix := "gocloud-createonly/" + rand.Text() + "/"
	t.Cleanup(func() {
		checkNoUploads(t, check, env["DSTL_S3_BUCKET"], prefix)
		s3Clean(t, check, env["DSTL_S3_BUCKET"], prefix)
	})
	b, err := New(t.Context(), s3URL(env, proxy.URL(), strings.TrimSuffix(prefix, "/"), "part_size=5242880"))
	if err != nil {
		t.Fatal(err)
	}
	return b, proxy
}

// openGCSRecorded opens the GCS harness's backend through a recording
// proxy, or skips the test.
func openGCSRecorded(t *testing.T) (backends.Backend, *faultproxy.Proxy) {
	target := os.Getenv("DSTL_GCS_ENDPOINT")
	if target == "" {
		t.Skip("DSTL_GCS_ENDPOINT unset")
	}
	proxy, err := faultproxy.New(target, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	t.Setenv("DSTL_GCS_ENDPOINT", proxy.URL())
	return gcsHarness(t), proxy
}
