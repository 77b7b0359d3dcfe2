package azure

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
)

func TestParseURL(t *testing.T) {
	const azurite = "http://127.0.0.1:10000/devstoreaccount1"
	noEnv := map[string]string{}
	keyEnv := map[string]string{EnvAccount: "acct", EnvKey: "a2V5"}
	connEnv := map[string]string{EnvConnectionString: "UseDevelopmentStorage=true", EnvKey: "a2V5"}
	tests := []struct {
		name    string
		url     string
		env     map[string]string
		check   func(t *testing.T, c Config)
		wantErr string // substring of the error; "" for none
	}{
		{"defaults", "azblob://cont/jobs/j1?account=acct", noEnv, func(t *testing.T, c Config) {
			want := DefaultConfig("cont")
			want.Prefix, want.Account = "jobs/j1", "acct"
			if c != want {
				t.Fatalf("got %+v, want %+v", c, want)
			}
			if c.PartSize != 8<<20 || c.Concurrency != 4 || c.Request != backends.DefaultPolicy {
				t.Fatalf("defaults %+v", c)
			}
		}, ""},
		{"all parameters", "azblob://cont/p/?endpoint=" + azurite + "&account=devstoreaccount1&part_size=512KiB&concurrency=8&timeout=5s&max_attempts=2", noEnv, func(t *testing.T, c Config) {
			if c.AccountURL != azurite || c.Account != "devstoreaccount1" || c.PartSize != 512<<10 ||
				c.Concurrency != 8 || c.Request.Timeout != 5*time.Second || c.Request.MaxAttempts != 2 || c.Prefix != "p/" {
				t.Fatalf("got %+v", c)
			}
		}, ""},
		{"deadlines", "azblob://cont?account=a&timeout=0&response_timeout=0&timeout_attempts=1&unanswered_hold=0", noEnv, func(t *testing.T, c Config) {
			want := backends.DefaultPolicy
			want.Timeout, want.ResponseTimeout, want.TimeoutAttempts, want.UnansweredHold = 0, 0, 1, 0
			if c.Request != want {
				t.Fatalf("Request %+v, want %+v", c.Request, want)
			}
		}, ""},
		{"account_url alias and plain part size", "azblob://cont?account_url=" + azurite + "&part_size=1000", noEnv, func(t *testing.T, c Config) {
			if c.AccountURL != azurite || c.PartSize != 1000 || c.Prefix != "" {
				t.Fatalf("got %+v", c)
			}
		}, ""},
		{"key and account from the environment", "azblob://cont", keyEnv, func(t *testing.T, c Config) {
			if c.Account != "acct" || c.AccountKey != "a2V5" || c.ConnectionString != "" {
				t.Fatalf("got account %q, key set %v, connection string set %v", c.Account, c.AccountKey != "", c.ConnectionString != "")
			}
		}, ""},
		{"connection string from the environment", "azblob://cont", connEnv, func(t *testing.T, c Config) {
			if c.ConnectionString == "" || c.AccountKey != "" {
				t.Fatalf("connection string set %v, key set %v", c.ConnectionString != "", c.AccountKey != "")
			}
		}, ""},
		{"an endpoint wins over the connection string", "azblob://cont?endpoint=" + azurite, connEnv, func(t *testing.T, c Config) {
			if c.ConnectionString != "" || c.AccountKey == "" {
				t.Fatalf("connection string set %v, key set %v", c.ConnectionString != "", c.AccountKey != "")
			}
		}, ""},
		{"unknown parameter", "azblob://cont?account=a&prefix=x&Part_size=1", noEnv, nil, `unknown query parameter(s) "Part_size", "prefix"`},
		{"key in the URL is unknown", "azblob://cont?account=a&key=secret", noEnv, nil, `unknown query parameter(s) "key"`},
		{"repeated parameter", "azblob://cont?account=a&account=b", noEnv, nil, `"account" given 2 times`},
		{"both endpoint forms", "azblob://cont?endpoint=" + azurite + "&account_url=" + azurite, noEnv, nil, `"endpoint" and "account_url"`},
		{"bad part size", "azblob://cont?account=a&part_size=lots", noEnv, nil, `"part_size"`},
		{"zero part size", "azblob://cont?account=a&part_size=0", noEnv, nil, `"part_size"`},
		{"part size over the block limit", "azblob://cont?account=a&part_size=5GiB", noEnv, nil, `"part_size"`},
		{"bad concurrency", "azblob://cont?account=a&concurrency=0", noEnv, nil, `"concurrency"`},
		{"bad timeout", "azblob://cont?account=a&timeout=soon", noEnv, nil, `"timeout"`},
		{"negative timeout", "azblob://cont?account=a&timeout=-1s", noEnv, nil, `"timeout"`},
		{"bad attempts", "azblob://cont?account=a&max_attempts=0", noEnv, nil, `"max_attempts"`},
		{"negative response timeout", "azblob://cont?account=a&response_timeout=-1s", noEnv, nil, `"response_timeout"`},
		{"bad timeout attempts", "azblob://cont?account=a&timeout_attempts=many", noEnv, nil, `"timeout_attempts"`},
		{"negative unanswered hold", "azblob://cont?account=a&unanswered_hold=-1s", noEnv, nil, `"unanswered_hold"`},
		{"request timeout", "azblob://cont?account=a&request_timeout=1s", noEnv, func(t *testing.T, c Config) {
			if c.Request.Timeout != time.Second {
				t.Fatalf("Request %+v", c.Request)
			}
		}, ""},
		{"bad request timeout", "azblob://cont?account=a&request_timeout=soon", noEnv, nil, `"request_timeout"`},
		{"both names of the request timeout", "azblob://cont?account=a&request_timeout=1s&timeout=2s", noEnv, nil, `"timeout" is the deprecated name of "request_timeout": give request_timeout alone`},
		{"bad endpoint", "azblob://cont?endpoint=ftp://x", noEnv, nil, "account URL"},
		{"no account at all", "azblob://cont", noEnv, nil, "account URL, an account name, a connection string or a client is required"},
		{"missing container", "azblob:///prefix?account=a", noEnv, nil, "missing container"},
		{"other scheme", "s3://b/p", noEnv, nil, `"s3" is not "azblob"`},
		{"user information", "azblob://user:secret@cont?account=a", noEnv, nil, "user information"},
		{"fragment", "azblob://cont?account=a#frag", noEnv, nil, "fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseURL(tt.url, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseURL(%q) = %v, want an error with %q", tt.url, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("error %q shows a secret", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseURL(%q): %v", tt.url, err)
			}
			tt.check(t, c)
		})
	}
}

func TestValidate(t *testing.T) {
	ok := DefaultConfig("c")
	ok.Account = "a"
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v): %v", ok, err)
	}
	for _, tt := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"no container", func(c *Config) { c.Container = "" }, "container is required"},
		{"slash in container", func(c *Config) { c.Container = "a/b" }, "container"},
		{"zero part size", func(c *Config) { c.PartSize = 0 }, "part size"},
		{"zero concurrency", func(c *Config) { c.Concurrency = 0 }, "concurrency"},
		{"absolute prefix", func(c *Config) { c.Prefix = "/p" }, "prefix"},
		{"bad policy", func(c *Config) { c.Request.MaxAttempts = 0 }, "azure: Request: max attempts"},
		{"negative timeout", func(c *Config) { c.Request.Timeout = -1 }, "azure: Request: request timeout"},
		{"no account", func(c *Config) { c.Account = "" }, "required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestRegistered: the registry opens the backend by scheme and by
// identifier, and rejects an unknown parameter, without a request.
func TestRegistered(t *testing.T) {
	ctx := context.Background()
	b, id, err := backends.Open(ctx, "", "azblob://cont/p?endpoint=http://127.0.0.1:1/devstoreaccount1&account=devstoreaccount1")
	if err != nil || id != ID {
		t.Fatalf("OpenBackend = %v, %q, %v", b, id, err)
	}
	if got := b.(*Backend); got.Container() != "cont" || got.Prefix() != "p/" {
		t.Fatalf("container %q prefix %q", got.Container(), got.Prefix())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	err = b.Put(ctx, "x", strings.NewReader("x"), 1)
	if !errors.Is(err, dstl.ErrClosed) {
		t.Fatalf("Put after Close: %v, want ErrClosed", err)
	}
	if _, _, err := backends.Open(ctx, ID, "azblob://cont?account=a&bogus=1"); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("OpenBackend with an unknown parameter: %v", err)
	}
}

// TestParseURLPrefixOnce: an error of the configuration a base path gives
// says "azure: " once.
func TestParseURLPrefixOnce(t *testing.T) {
	_, err := parseURL("azblob://c", func(string) string { return "" })
	if err == nil || strings.Count(err.Error(), "azure: ") != 1 || !strings.Contains(err.Error(), "an account URL") {
		t.Fatalf("parseURL = %v, want an error about the account that says \"azure: \" once", err)
	}
}
