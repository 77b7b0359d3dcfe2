package s3

import (
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	def := DefaultConfig("bkt", "a/b")
	tests := []struct {
		name    string
		url     string
		want    func(*Config) // edits of def, when no error
		wantErr string        // a part of the error
	}{
		{"defaults", "s3://bkt/a/b", func(*Config) {}, ""},
		{"no prefix", "s3://bkt", func(c *Config) { c.Prefix = "" }, ""},
		{"slash only", "s3://bkt/", func(c *Config) { c.Prefix = "" }, ""},
		{"all parameters", "s3://bkt/a/b?endpoint=http://127.0.0.1:9000&region=eu-west-1&use_path_style=true" +
			"&part_size=6291456&concurrency=8&sse=aws:kms&sse_kms_key_id=k1&request_timeout=10s&max_attempts=3",
			func(c *Config) {
				c.Endpoint, c.Region, c.UsePathStyle = "http://127.0.0.1:9000", "eu-west-1", true
				c.PartSize, c.Concurrency = 6<<20, 8
				c.SSE, c.SSEKMSKeyID = SSEKMS, "k1"
				c.Request.Timeout, c.Request.MaxAttempts = 10*time.Second, 3
			}, ""},
		{"sse none", "s3://bkt/a/b?sse=none", func(*Config) {}, ""},
		{"unsigned payload", "s3://bkt/a/b?unsigned_payload=true", func(c *Config) { c.UnsignedPayload = true }, ""},
		{"signed payload", "s3://bkt/a/b?unsigned_payload=false", func(*Config) {}, ""},
		{"bad unsigned payload", "s3://bkt/a/b?unsigned_payload=sometimes", nil, "unsigned_payload"},
		{"sse AES256", "s3://bkt/a/b?sse=AES256", func(c *Config) { c.SSE = SSEAES256 }, ""},
		{"no timeout", "s3://bkt/a/b?request_timeout=0s", func(c *Config) { c.Request.Timeout = 0 }, ""},
		{"deadlines", "s3://bkt/a/b?response_timeout=0&timeout_attempts=1", func(c *Config) { c.Request.ResponseTimeout, c.Request.TimeoutAttempts = 0, 1 }, ""},
		{"unanswered hold", "s3://bkt/a/b?unanswered_hold=1s", func(c *Config) { c.Request.UnansweredHold = time.Second }, ""},
		{"no unanswered hold", "s3://bkt/a/b?unanswered_hold=0", func(c *Config) { c.Request.UnansweredHold = 0 }, ""},
		{"unknown parameter", "s3://bkt/a?region=x&colour=red&size=1", nil, `"colour", "size"`},
		{"repeated parameter", "s3://bkt/a?region=x&region=y", nil, `"region" given 2 times`},
		{"bad bool", "s3://bkt/a?use_path_style=yes", nil, "use_path_style"},
		{"bad part size", "s3://bkt/a?part_size=big", nil, "part_size"},
		{"part size too small", "s3://bkt/a?part_size=1024", nil, "part_size"},
		{"part size too large", "s3://bkt/a?part_size=6000000000", nil, "part_size"},
		{"bad concurrency", "s3://bkt/a?concurrency=0", nil, "concurrency"},
		{"concurrency too large", "s3://bkt/a?concurrency=65", nil, "concurrency"},
		{"bad sse", "s3://bkt/a?sse=rot13", nil, "sse"},
		{"empty sse", "s3://bkt/a?sse=", nil, "sse"},
		{"kms key without kms", "s3://bkt/a?sse=AES256&sse_kms_key_id=k", nil, "sse_kms_key_id"},
		{"bad timeout", "s3://bkt/a?request_timeout=soon", nil, "request_timeout"},
		{"negative timeout", "s3://bkt/a?request_timeout=-1s", nil, "request_timeout"},
		{"bad attempts", "s3://bkt/a?max_attempts=0", nil, "max_attempts"},
		{"negative response timeout", "s3://bkt/a?response_timeout=-1s", nil, "response_timeout"},
		{"bad timeout attempts", "s3://bkt/a?timeout_attempts=x", nil, "timeout_attempts"},
		{"negative unanswered hold", "s3://bkt/a?unanswered_hold=-1s", nil, "unanswered_hold"},
		{"timeout, gcs's name", "s3://bkt/a?timeout=1s", nil, `unknown query parameter(s) "timeout"`},
		{"bad endpoint", "s3://bkt/a?endpoint=127.0.0.1:9000", nil, "endpoint"},
		{"other scheme", "gs://bkt/a", nil, "scheme"},
		{"no bucket", "s3:///a", nil, "s3://bucket/prefix"},
		{"opaque", "s3:bkt/a", nil, "s3://bucket/prefix"},
		{"credentials", "s3://key:secret@bkt/a", nil, "credentials"},
		{"credentials, bad escape", "s3://AKIA:secret@bkt/%zz", nil, "not a URL"},
		{"credentials, bad port", "s3://AKIA:secret@bkt:port/a", nil, "not a URL"},
		{"credentials, no host", "s3://AKIA:secret@/a", nil, "credentials"},
		{"credentials, opaque", "s3:AKIA:secret@bkt/a", nil, "s3://bucket/prefix"},
		{"credentials, other scheme", "gs://AKIA:secret@bkt/a", nil, "credentials"},
		{"credentials in endpoint", "s3://bkt/a?endpoint=http://AKIA:secret@h:9000", nil, "credentials"},
		{"credentials in bad endpoint", "s3://bkt/a?endpoint=http://AKIA:secret@h:port", nil, "endpoint"},
		{"credentials, endpoint without host", "s3://bkt/a?endpoint=ftp://AKIA:secret@h", nil, "endpoint"},
		{"fragment", "s3://bkt/a#x", nil, "fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseURL(tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want an error with %q", tt.url, got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("the error shows the credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.url, err)
			}
			want := def
			tt.want(&want)
			if got != want {
				t.Fatalf("ParseURL(%q) =\n%+v, want\n%+v", tt.url, got, want)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig("bkt", "p")
	if c.PartSize != 8<<20 || c.Concurrency != 4 || c.Request.Timeout != 30*time.Second || c.Request.MaxAttempts != 5 ||
		c.SSE != SSENone || c.UsePathStyle || c.Endpoint != "" || c.Region != "" {
		t.Fatalf("DefaultConfig = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.prefix(); got != "p/" {
		t.Fatalf("prefix = %q, want p/", got)
	}
	if err := (Config{Bucket: "bkt"}).Validate(); err == nil || !strings.Contains(err.Error(), "part_size") {
		t.Fatalf("zero Config: %v, want an error naming part_size", err)
	}
	if err := DefaultConfig("", "p").Validate(); err == nil || !strings.Contains(err.Error(), "bucket") {
		t.Fatalf("no bucket: %v", err)
	}
}

// TestValidateRequest: Validate checks the request policy, naming it.
func TestValidateRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{"negative timeout", func(c *Config) { c.Request.Timeout = -1 }, "s3: Request: request timeout"},
		{"no attempts", func(c *Config) { c.Request.MaxAttempts = 0 }, "s3: Request: max attempts"},
		{"negative response timeout", func(c *Config) { c.Request.ResponseTimeout = -1 }, "s3: Request: response timeout"},
		{"negative timeout attempts", func(c *Config) { c.Request.TimeoutAttempts = -1 }, "s3: Request: timeout attempts"},
		{"backoff", func(c *Config) { c.Request.MaxBackoff = c.Request.InitialBackoff - 1 }, "s3: Request: backoff"},
	} {
		c := DefaultConfig("bkt", "p")
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
