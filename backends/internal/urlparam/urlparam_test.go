package urlparam

import (
	"net/url"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	known := []string{"a", "b"}
	for _, tc := range []struct{ query, wantErr string }{
		{"", ""},
		{"a=1&b=2", ""},
		{"a=1&zz=2&c=3", `unknown query parameter(s) "c", "zz" (known: a, b)`},
		{"a=1&a=2", `query parameter "a" given 2 times`},
	} {
		q, _ := url.ParseQuery(tc.query)
		err := Check(q, known)
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Check(%q) = %v, want %q", tc.query, err, tc.wantErr)
		}
	}
}

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true}, {"10B", 10, true}, {"4k", 4 << 10, true}, {"1.5MiB", 0, false}, {"99999999999999999999", 0, false}, {"5MiB", 5 << 20, true}, {"512 KiB", 512 << 10, true}, {"8mb", 8 << 20, true},
		{"1g", 1 << 30, true}, {"0", 0, true}, {"-1", 0, false}, {"x", 0, false}, {"5 TiB", 0, false}, {"", 0, false},
	} {
		got, err := Size(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Size(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
