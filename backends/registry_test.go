package backends_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	_ "github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

func init() {
	backends.Register("registry-test", func(ctx context.Context, basePath string) (backends.Backend, error) {
		return dstltest.NewBackend(), nil
	}, "regtest")
}

func TestRegisterDuplicatePanics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		id      string
		schemes []string
	}{
		{"identifier", "registry-test", nil},
		{"scheme", "registry-test-2", []string{"regtest"}},
		{"local identifier", "local", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Register did not panic on a duplicate")
				}
			}()
			backends.Register(tc.id, func(context.Context, string) (backends.Backend, error) { return nil, nil }, tc.schemes...)
		})
	}
}

func TestOpenBackend(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, id, basePath string
		wantID, wantErr    string
	}{
		{"plain path is local", "", dir, "local", ""},
		{"file URL", "", "file://" + dir, "local", ""},
		{"by identifier", "registry-test", "anything", "registry-test", ""},
		{"by scheme", "", "regtest://bucket/prefix", "registry-test", ""},
		{"unknown identifier lists the known", "nope", dir, "", `unknown backend "nope" (known: local, memory, registry-test`},
		{"unknown scheme lists the known", "", "nope://x", "", `no backend serves URL scheme "nope"`},
		{"empty base path", "", "", "", `"base-path" is required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, id, err := backends.Open(context.Background(), tc.id, tc.basePath)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if id != tc.wantID {
				t.Fatalf("id = %q, want %q", id, tc.wantID)
			}
		})
	}
}

// TestOpenBackendMalformedURL: a base path with a scheme whose URL does not
// parse is a configuration error naming it, never a local path.
func TestOpenBackendMalformedURL(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, basePath := range []string{
		"s3://b/a%zz",
		"s3://dstl test/x",
		"regtest://b/%",
		"gs://b/x%",
		"azblob://c/%zz?x=1",
		"file:///tmp/%zz",
		"FILE:///tmp/%zz",
		"s3://[::1/x",
	} {
		t.Run(basePath, func(t *testing.T) {
			b, id, err := backends.Open(context.Background(), "", basePath)
			if err == nil {
				b.Close()
				t.Fatalf("OpenBackend(%q) opened backend %q", basePath, id)
			}
			if !errors.Is(err, dstl.ErrInvalidConfig) || !strings.Contains(err.Error(), strconv.Quote(basePath)) {
				t.Fatalf("err = %v, want ErrInvalidConfig naming %q", err, basePath)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Fatalf("OpenBackend(%q) created %s in the working directory", basePath, ents[0].Name())
			}
		})
	}
}

func TestURLScheme(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"s3://b/x", "s3", true}, {"S3://b", "s3", true}, {"s3://b/a%zz", "s3", true}, {"x+y.z-1:rest", "x+y.z-1", true},
		{"/abs/a:b", "", false}, {"rel/a:b", "", false}, {`C:\dir`, "", false}, {"plain", "", false}, {"1x://b", "", false}, {":x", "", false},
	} {
		got, ok := backends.URLScheme(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("URLScheme(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBackendsListsRegistrations(t *testing.T) {
	var ids []string
	for _, b := range backends.Backends() {
		ids = append(ids, b.ID+"="+strings.Join(b.Schemes, ","))
	}
	got := strings.Join(ids, " ")
	if !strings.Contains(got, "local=file") || !strings.Contains(got, "registry-test=regtest") {
		t.Fatalf("Backends() = %s", got)
	}
}

func TestCheckObjectName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"job/0190.dstl", true}, {"a b/ü%20.x", true}, {"a/.hidden", true},
		{"", false}, {".", false}, {"..", false}, {"../a", false}, {"a/../b", false}, {"a/./b", false},
		{"/a", false}, {"a/", false}, {"a//b", false}, {`a\b`, false}, {"a\x00b", false},
	} {
		err := backends.CheckObjectName(tc.name)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, backends.ErrInvalidName)) {
			t.Errorf("CheckObjectName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// TestRegisterURL: a backend registered with RegisterURL parses its base
// path, reports a parse error as an invalid configuration, and returns no
// backend (not a typed nil) when its open fails.
func TestRegisterURL(t *testing.T) {
	type cfg struct{ path string }
	errOpen := errors.New("cannot open")
	backends.RegisterURL("url-test", func(basePath string) (cfg, error) {
		if strings.Contains(basePath, "bad") {
			return cfg{}, errors.New("bad base path")
		}
		return cfg{basePath}, nil
	}, func(_ context.Context, c cfg) (*backends.Bucket, error) {
		return nil, fmt.Errorf("%s: %w", c.path, errOpen)
	}, "urltest")
	for _, tc := range []struct {
		path string
		want error
	}{
		{"urltest://bad/x", backends.ErrInvalidConfig},
		{"urltest://good/x", errOpen},
	} {
		b, _, err := backends.Open(t.Context(), "", tc.path)
		if !errors.Is(err, tc.want) || b != nil {
			t.Errorf("Open(%q) = %v, %v; want no backend and %v", tc.path, b, err, tc.want)
		}
	}
}
