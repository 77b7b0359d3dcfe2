package urlparam

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
)

func TestPolicy(t *testing.T) {
	def := backends.DefaultPolicy
	with := func(f func(p *backends.Policy)) backends.Policy {
		p := def
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name, deprecated, query string // deprecated: the old name of request_timeout the backend accepts, if any
		want                    backends.Policy
		wantErr                 string
	}{
		{"none", "timeout", "", def, ""},
		{"others left alone", "", "part_size=8MiB&timeout=x", def, ""},
		{"all", "", "request_timeout=10s&max_attempts=3&response_timeout=5s&timeout_attempts=1&unanswered_hold=2s",
			with(func(p *backends.Policy) {
				p.Timeout, p.MaxAttempts, p.ResponseTimeout, p.TimeoutAttempts = 10*time.Second, 3, 5*time.Second, 1
				p.UnansweredHold = 2 * time.Second
			}), ""},
		{"no unanswered hold", "timeout", "unanswered_hold=0", with(func(p *backends.Policy) { p.UnansweredHold = 0 }), ""},
		{"negative unanswered hold", "timeout", "unanswered_hold=-1s", def, `query parameter "unanswered_hold": want a duration such as 5s, or 0 for none, got "-1s"`},
		{"bad unanswered hold", "timeout", "unanswered_hold=5", def, `query parameter "unanswered_hold": want a duration`},
		{"request timeout", "timeout", "request_timeout=1m", with(func(p *backends.Policy) { p.Timeout = time.Minute }), ""},
		{"request timeout by its deprecated name", "timeout", "timeout=1m", with(func(p *backends.Policy) { p.Timeout = time.Minute }), ""},
		{"both names of the request timeout", "timeout", "timeout=1m&request_timeout=1m", def,
			`query parameter "timeout" is the deprecated name of "request_timeout": give request_timeout alone`},
		{"no request timeout", "", "request_timeout=0", with(func(p *backends.Policy) { p.Timeout = 0 }), ""},
		{"no response timeout", "timeout", "response_timeout=0s", with(func(p *backends.Policy) { p.ResponseTimeout = 0 }), ""},
		{"timeout attempts as max_attempts", "timeout", "timeout_attempts=0", with(func(p *backends.Policy) { p.TimeoutAttempts = 0 }), ""},
		{"bad deprecated timeout", "timeout", "timeout=soon", def, `query parameter "timeout": want a duration such as 30s, or 0 for none, got "soon"`},
		{"negative timeout", "", "request_timeout=-1s", def, `query parameter "request_timeout": want a duration such as 30s, or 0 for none, got "-1s"`},
		{"empty timeout", "timeout", "request_timeout=", def, `query parameter "request_timeout": want`},
		{"zero attempts", "timeout", "max_attempts=0", def, `query parameter "max_attempts": want a whole number of at least 1, got "0"`},
		{"bad attempts", "timeout", "max_attempts=2.5", def, `query parameter "max_attempts": want a whole number of at least 1, got "2.5"`},
		{"negative response timeout", "timeout", "response_timeout=-5s", def, `query parameter "response_timeout": want a duration such as 10s, or 0, got "-5s"`},
		{"bad response timeout", "timeout", "response_timeout=10", def, `query parameter "response_timeout": want a duration`},
		{"negative timeout attempts", "timeout", "timeout_attempts=-1", def, `query parameter "timeout_attempts": want a whole number, or 0, got "-1"`},
		{"repeated", "", "request_timeout=1s&request_timeout=2s", def, `query parameter "request_timeout" given 2 times`},
		{"repeated deprecated name", "timeout", "timeout=1s&timeout=2s", def, `query parameter "timeout" given 2 times`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			p := def
			var deprecated []string
			if tc.deprecated != "" {
				deprecated = []string{tc.deprecated}
			}
			err = Policy(q, &p, deprecated...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Policy(%q) = %v", tc.query, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Policy(%q) = %v, want %q", tc.query, err, tc.wantErr)
			case tc.wantErr == "" && p != tc.want:
				t.Fatalf("Policy(%q) gave %+v, want %+v", tc.query, p, tc.want)
			}
		})
	}
}

// TestPolicyParameters: the documentation names request_timeout first,
// then the old names a backend still accepts, marked deprecated; it gives
// DefaultPolicy's values as defaults, and documents what Policy parses:
// each example alone is accepted, a parameter not listed is left alone.
func TestPolicyParameters(t *testing.T) {
	for _, tc := range []struct {
		deprecated []string
		wantNames  []string
	}{
		{nil, []string{"request_timeout", "max_attempts", "response_timeout", "timeout_attempts", "unanswered_hold"}},
		{[]string{"timeout"}, []string{"request_timeout", "max_attempts", "response_timeout", "timeout_attempts", "unanswered_hold", "timeout"}},
	} {
		t.Run(strings.Join(tc.wantNames, ","), func(t *testing.T) {
			params := PolicyParameters(tc.deprecated...)
			var names []string
			defaults := map[string]string{}
			for _, p := range params {
				names = append(names, p.Name)
				defaults[p.Name] = p.Default
				if slices.Contains(tc.deprecated, p.Name) && !strings.HasPrefix(p.Description, "deprecated: ") {
					t.Errorf("%s: description %q, want it deprecated", p.Name, p.Description)
				}
			}
			if strings.Join(names, " ") != strings.Join(tc.wantNames, " ") {
				t.Errorf("names %q, want %q", names, tc.wantNames)
			}
			d := backends.DefaultPolicy
			for name, want := range map[string]string{RequestTimeout: "30s", MaxAttempts: "5", ResponseTimeout: "10s", TimeoutAttempts: "2", UnansweredHold: "5s"} {
				if defaults[name] != want {
					t.Errorf("%s: default %q, want %q (DefaultPolicy %+v)", name, defaults[name], want, d)
				}
			}
			err := CheckDocumented("x://b/p", params, func(s string) error {
				u, err := url.Parse(s)
				if err != nil {
					return err
				}
				q := u.Query()
				if err := Check(q, names); err != nil {
					return err
				}
				p := backends.DefaultPolicy
				if err := Policy(q, &p, tc.deprecated...); err != nil {
					return err
				}
				if p == backends.DefaultPolicy {
					t.Errorf("%s: the example changed nothing", s)
				}
				return nil
			}, nil)
			if err != nil {
				t.Error(err)
			}
		})
	}
}
