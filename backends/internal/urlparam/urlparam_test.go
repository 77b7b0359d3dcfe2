package urlparam

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends/driver"
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

func TestCheckDocumented(t *testing.T) {
	params := []driver.URLParameter{
		{Name: "a", Value: "N", Description: "an a", Example: "1"},
		{Name: "b", Value: "BOOL", Description: "a b", Example: "true"},
	}
	strict := func(known ...string) func(string) error {
		return func(s string) error {
			u, err := url.Parse(s)
			if err != nil {
				return err
			}
			return Check(u.Query(), known)
		}
	}
	for _, tc := range []struct {
		name    string
		params  []driver.URLParameter
		parse   func(string) error
		wantErr string
	}{
		{"exact", params, strict("a", "b"), ""},
		{"listed but rejected", params, strict("a"), `parameter "b"`},
		{"unknown accepted", params, strict("a", "b", unknownName), "accepted, with a parameter not listed"},
		{"unknown rejected silently", params, func(s string) error {
			if strings.Contains(s, unknownName) {
				return errors.New("no")
			}
			return nil
		}, "without naming"},
		{"listed twice", append(params, params[0]), strict("a", "b"), "listed twice"},
		{"no example", []driver.URLParameter{{Name: "a", Value: "N", Description: "an a"}}, strict("a"), "example missing"},
	} {
		err := CheckDocumented("x://b/p", tc.params, tc.parse, nil)
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
