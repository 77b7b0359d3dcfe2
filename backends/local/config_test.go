package local

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		in      string
		want    Config
		wantErr string // substring of the error; empty: no error
	}{
		{in: "/var/dstl", want: Config{Root: "/var/dstl", CreateRoot: true}},
		{in: "./x", want: Config{Root: "./x", CreateRoot: true}},
		{in: "rel/dir", want: Config{Root: "rel/dir", CreateRoot: true}},
		{in: "/odd?fsync=false", want: Config{Root: "/odd?fsync=false", CreateRoot: true}},
		{in: "/with:colon", want: Config{Root: "/with:colon", CreateRoot: true}},
		{in: `C:\dstl`, want: Config{Root: `C:\dstl`, CreateRoot: true}},
		{in: "file:///var/dstl", want: Config{Root: "/var/dstl", CreateRoot: true}},
		{in: "FILE:///var/dstl", want: Config{Root: "/var/dstl", CreateRoot: true}},
		{in: "file://localhost/var/dstl", want: Config{Root: "/var/dstl", CreateRoot: true}},
		{in: "file:/var/dstl", want: Config{Root: "/var/dstl", CreateRoot: true}},
		{in: "file:///a%20b/c%3Fd", want: Config{Root: "/a b/c?d", CreateRoot: true}},
		{in: "file:///v?mkdir=false", want: Config{Root: "/v", CreateRoot: false}},
		{in: "file:///v?fsync=false", want: Config{Root: "/v", CreateRoot: true, NoSync: true}},
		{in: "file:///v?fsync=true&mkdir=1", want: Config{Root: "/v", CreateRoot: true}},
		{in: "file:///v?mkdir=false&fsync=0", want: Config{Root: "/v", NoSync: true}},
		{in: "", wantErr: "empty base path"},
		{in: "file:///v?bogus=1&mkdir=true&alsobad=2", wantErr: `unknown query parameter(s) "alsobad", "bogus"`},
		{in: "file:///v?fsync=maybe", wantErr: `"fsync": want true or false, got "maybe"`},
		{in: "file:///v?mkdir=true&mkdir=false", wantErr: `"mkdir" given 2 times`},
		{in: "file://host/v", wantErr: `host "host"`},
		{in: "file:rel/dir", wantErr: "absolute path"},
		{in: "file://", wantErr: "missing path"},
		{in: "file:///v#frag", wantErr: "fragment"},
		{in: "file://user@localhost/v", wantErr: "user information"},
		{in: "s3://bucket/prefix", wantErr: `scheme "s3"`},
		{in: "s3://b/a%zz", wantErr: `scheme "s3"`},
		{in: "s3://dstl test/x", wantErr: `scheme "s3"`},
		{in: "GS://b/%", wantErr: `scheme "gs"`},
		{in: "/v\x00", wantErr: "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseURL(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseURL(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg Config
		ok  bool
	}{
		{DefaultConfig("/x"), true},
		{Config{Root: "x"}, true},
		{Config{}, false},
		{Config{Root: "a\x00b"}, false},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v.Validate() = %v, want ok %v", tt.cfg, err, tt.ok)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"creates nested root", DefaultConfig(filepath.Join(dir, "new", "nested")), true},
		{"existing root without mkdir", Config{Root: dir}, true},
		{"missing root without mkdir", Config{Root: filepath.Join(dir, "missing")}, false},
		{"root is a file", DefaultConfig(file), false},
		{"invalid config", Config{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Open(t.Context(), tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("Open: %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				return
			}
			defer b.Close()
			if !filepath.IsAbs(b.Root()) {
				t.Errorf("Root() = %q, not absolute", b.Root())
			}
			if fi, err := os.Stat(b.Root()); err != nil || !fi.IsDir() {
				t.Errorf("root: %v", err)
			}
		})
	}
}

func TestOpenRelativeRoot(t *testing.T) {
	t.Chdir(t.TempDir())
	b, err := New(t.Context(), "./rel")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wd, _ := os.Getwd()
	if want := filepath.Join(wd, "rel"); b.Root() != want {
		t.Fatalf("Root() = %q, want %q", b.Root(), want)
	}
}

func TestRegistered(t *testing.T) {
	i := slices.IndexFunc(backends.Backends(), func(bi backends.Info) bool { return bi.ID == ID })
	if i < 0 || !slices.Equal(backends.Backends()[i].Schemes, []string{Scheme}) {
		t.Fatalf("backend %q not registered with scheme %q: %+v", ID, Scheme, backends.Backends())
	}
	dir := t.TempDir()
	tests := []struct {
		name, id, basePath string
		wantRoot           string
		wantErr            string
	}{
		{"file URL", "", "file://" + filepath.ToSlash(dir) + "/u?fsync=false", filepath.Join(dir, "u"), ""},
		{"plain path", "", filepath.Join(dir, "p"), filepath.Join(dir, "p"), ""},
		{"by id", ID, filepath.Join(dir, "i"), filepath.Join(dir, "i"), ""},
		{"unknown parameter", "", "file://" + filepath.ToSlash(dir) + "?nope=1", "", `unknown query parameter(s) "nope"`},
		{"missing root, mkdir=false", "", "file://" + filepath.ToSlash(dir) + "/absent?mkdir=false", "", "absent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, id, err := backends.Open(t.Context(), tt.id, tt.basePath)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("OpenBackend: %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if id != ID {
				t.Errorf("id = %q", id)
			}
			if got := b.(*Backend).Root(); got != tt.wantRoot {
				t.Errorf("root = %q, want %q", got, tt.wantRoot)
			}
		})
	}
}
