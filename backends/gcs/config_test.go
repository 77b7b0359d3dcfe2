package gcs

import (
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
)

func TestParseURL(t *testing.T) {
	def := DefaultConfig("bkt", "jobs/a")
	tests := []struct {
		url     string
		want    func(c *Config) // changes from the defaults
		wantErr string          // substring of the error
	}{
		{url: "gs://bkt/jobs/a", want: func(c *Config) {}},
		{url: "gs://bkt", want: func(c *Config) { c.Prefix = "" }},
		{url: "gs://bkt/jobs/a?endpoint=http://127.0.0.1:4443", want: func(c *Config) { c.Endpoint = "http://127.0.0.1:4443" }},
		{url: "gs://bkt/jobs/a?part_size=512KiB&timeout=2s&max_attempts=2&credentials_file=/x.json",
			want: func(c *Config) {
				c.PartSize, c.Request.Timeout, c.Request.MaxAttempts, c.CredentialsFile = 512<<10, 2*time.Second, 2, "/x.json"
			}},
		{url: "gs://bkt/jobs/a?response_timeout=0&timeout_attempts=1",
			want: func(c *Config) { c.Request.ResponseTimeout, c.Request.TimeoutAttempts = 0, 1 }},
		{url: "gs://bkt/jobs/a?timeout=0", want: func(c *Config) { c.Request.Timeout = 0 }},
		{url: "gs://bkt/jobs/a?unanswered_hold=1s", want: func(c *Config) { c.Request.UnansweredHold = time.Second }},
		{url: "gs://bkt/jobs/a?unanswered_hold=0", want: func(c *Config) { c.Request.UnansweredHold = 0 }},
		{url: "gs://bkt/jobs/a?anonymous=true", want: func(c *Config) { c.Anonymous = true }},
		{url: "gs://bkt/jobs/a?anonymous=false&credentials_file=/x.json", want: func(c *Config) { c.CredentialsFile = "/x.json" }},
		{url: "gs://bkt/jobs/a?endpoint=http://h:1&anonymous=true",
			want: func(c *Config) { c.Endpoint, c.Anonymous = "http://h:1", true }},
		{url: "gs://bkt/jobs/a?endpoint=http://h:1&anonymous=false&credentials_file=/x.json",
			want: func(c *Config) { c.Endpoint, c.CredentialsFile = "http://h:1", "/x.json" }},
		// Conflicting parameters.
		{url: "gs://bkt/jobs/a?anonymous=true&credentials_file=/x.json", wantErr: `"anonymous=true" and "credentials_file" conflict`},
		{url: "gs://bkt/jobs/a?credentials_file=/x.json&anonymous=1", wantErr: `"anonymous=true" and "credentials_file" conflict`},
		{url: "gs://bkt/jobs/a?endpoint=http://h:1&anonymous=false", wantErr: `"anonymous=false" and "endpoint" conflict`},
		{url: "gs://bkt/jobs/a?anonymous=false&endpoint=http://h:1", wantErr: `"anonymous=false" and "endpoint" conflict`},
		// Credentials are never echoed (see the check below).
		{url: "gs://user:SECRET@bkt/a", wantErr: "user information is not allowed"},
		{url: "gs://user:SECRET@bkt/%zz", wantErr: "user information"},
		{url: "gs://user:SECRET@bkt/a?bogus=1", wantErr: "user information"},
		{url: "GS://user:SECRET@bkt/a", wantErr: "user information"},
		{url: "gs://user:SECRET/x@bkt/a", wantErr: "user information"},
		{url: "s3://AKIA:SECRET@bkt/a", wantErr: "user information"},
		{url: "gs://bkt/a?endpoint=http://u:SECRET@h:1", wantErr: `query parameter "endpoint": endpoint "http://h:1": user information is not allowed`},
		{url: "gs://bkt/a?endpoint=http://u:SECRET@h:1/%zz", wantErr: `query: invalid URL escape`},
		{url: "gs://bkt/a?endpoint=http://u:SECRET@h:1/%25zz", wantErr: `"endpoint"`},
		{url: "gs://bkt/a?endpoint=ftp://u:SECRET@h", wantErr: `"endpoint"`},
		{url: "gs://bkt/a?endpoint=http://u:SECRET@h:1&bogus=1", wantErr: `unknown query parameter(s) "bogus"`},
		{url: "gs://bkt/a?timeout=x&endpoint=http://u:SECRET@h:1", wantErr: `"endpoint"`},
		{url: "gs://bkt/a?endpoint=http://u:SECRET@h:1&timeout=1s&timeout=2s", wantErr: `given 2 times`},
		{url: "gs://bkt/a?endpoint=http://u:SECRET@h:1#frag", wantErr: "fragment"},
		{url: "gs://bkt/a?endpoint=http%3A%2F%2Fu%3ASECRET%40h%3A1", wantErr: "user information"},
		{url: "gs://bkt/jobs/a?part_size=8MiB", want: func(c *Config) { c.PartSize = 8 << 20 }},
		{url: "gs://bkt/jobs/a?part_size=262144", want: func(c *Config) { c.PartSize = 262144 }},
		{url: "gs://bkt/jobs/a?bogus=1&other=2", wantErr: `unknown query parameter(s) "bogus", "other"`},
		{url: "gs://bkt/jobs/a?part_size=100", wantErr: `"part_size"`},
		{url: "gs://bkt/jobs/a?part_size=1.5MiB", wantErr: `"part_size"`},
		{url: "gs://bkt/jobs/a?timeout=fast", wantErr: `"timeout"`},
		{url: "gs://bkt/jobs/a?timeout=-1s", wantErr: `"timeout"`},
		{url: "gs://bkt/jobs/a?max_attempts=0", wantErr: `"max_attempts"`},
		{url: "gs://bkt/jobs/a?response_timeout=-1s", wantErr: `"response_timeout"`},
		{url: "gs://bkt/jobs/a?timeout_attempts=-1", wantErr: `"timeout_attempts"`},
		{url: "gs://bkt/jobs/a?unanswered_hold=-1s", wantErr: `"unanswered_hold"`},
		{url: "gs://bkt/jobs/a?request_timeout=1s", want: func(c *Config) { c.Request.Timeout = time.Second }},
		{url: "gs://bkt/jobs/a?request_timeout=fast", wantErr: `"request_timeout"`},
		{url: "gs://bkt/jobs/a?timeout=1s&request_timeout=2s", wantErr: `"timeout" is the deprecated name of "request_timeout": give request_timeout alone`},
		{url: "gs://bkt/jobs/a?anonymous=maybe", wantErr: `"anonymous"`},
		{url: "gs://bkt/jobs/a?endpoint=", wantErr: `"endpoint"`},
		{url: "gs://bkt/jobs/a?endpoint=ftp://x", wantErr: `endpoint "ftp://x"`},
		{url: "gs://bkt/jobs/a?timeout=1s&timeout=2s", wantErr: `"timeout" given 2 times`},
		{url: "s3://bkt/jobs/a", wantErr: `scheme "s3"`},
		{url: "gs:///jobs", wantErr: "want gs://bucket/prefix"},
		{url: "gs://user@bkt/a", wantErr: "user information"},
		{url: "gs://bkt/a#frag", wantErr: "fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := ParseURL(tt.url)
			if err != nil && strings.Contains(err.Error(), "SECRET") {
				t.Errorf("ParseURL(%q): error %q shows the secret", tt.url, err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want an error containing %s", tt.url, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.url, err)
			}
			want := def
			tt.want(&want)
			if got.Bucket != want.Bucket || got.Prefix != want.Prefix || got.Endpoint != want.Endpoint ||
				got.CredentialsFile != want.CredentialsFile || got.Anonymous != want.Anonymous || got.PartSize != want.PartSize ||
				got.Request != want.Request || got.PageSize != want.PageSize {
				t.Fatalf("ParseURL(%q) = %+v, want %+v", tt.url, got, want)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig("b", "")
	if c.PartSize != 16<<20 || c.Request != backends.DefaultPolicy || c.PageSize != 1000 || c.Endpoint != "" || c.Anonymous {
		t.Fatalf("DefaultConfig = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(c *Config)
		wantErr string
	}{
		{"no bucket", func(c *Config) { c.Bucket = "" }, "bucket is required"},
		{"bucket with slash", func(c *Config) { c.Bucket = "a/b" }, "bucket"},
		{"absolute prefix", func(c *Config) { c.Prefix = "/x" }, "prefix"},
		{"part size not a multiple", func(c *Config) { c.PartSize = MinPartSize + 1 }, "part_size"},
		{"part size zero", func(c *Config) { c.PartSize = 0 }, "part_size"},
		{"negative timeout", func(c *Config) { c.Request.Timeout = -1 }, "gcs: Request: request timeout"},
		{"no attempts", func(c *Config) { c.Request.MaxAttempts = 0 }, "gcs: Request: max attempts"},
		{"negative response timeout", func(c *Config) { c.Request.ResponseTimeout = -1 }, "gcs: Request: response timeout"},
		{"negative timeout attempts", func(c *Config) { c.Request.TimeoutAttempts = -1 }, "gcs: Request: timeout attempts"},
		{"backoff", func(c *Config) { c.Request.MaxBackoff = c.Request.InitialBackoff - 1 }, "gcs: Request: backoff"},
		{"endpoint", func(c *Config) { c.Endpoint = "127.0.0.1:4443" }, "endpoint"},
		{"endpoint with user information", func(c *Config) { c.Endpoint = "http://u:SECRET@127.0.0.1:4443" }, "user information"},
		{"endpoint not a URL", func(c *Config) { c.Endpoint = "http://u:SECRET@127.0.0.1:4443/%zz" }, "endpoint"},
		{"anonymous and credentials file", func(c *Config) { c.Anonymous, c.CredentialsFile = true, "/x.json" }, "anonymous and credentials_file conflict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig("b", "p/")
			tt.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("Validate = %v shows the secret", err)
			}
		})
	}
}

// TestHeaderTimeout: the wait for an answer's headers is the shorter of
// the request policy's timeouts that is set.
func TestHeaderTimeout(t *testing.T) {
	for _, tc := range []struct {
		timeout, response, want time.Duration
	}{
		{30 * time.Second, 10 * time.Second, 10 * time.Second},
		{time.Second, 10 * time.Second, time.Second},
		{30 * time.Second, 0, 30 * time.Second},
		{0, 10 * time.Second, 10 * time.Second},
		{0, 0, 0},
	} {
		c := DefaultConfig("b", "")
		c.Request.Timeout, c.Request.ResponseTimeout = tc.timeout, tc.response
		if got := c.headerTimeout(); got != tc.want {
			t.Errorf("Timeout %v, ResponseTimeout %v: headerTimeout %v, want %v", tc.timeout, tc.response, got, tc.want)
		}
	}
}
