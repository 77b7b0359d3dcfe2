package urlparam

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// Names of the request policy's query parameters, the same in every
// backend.
const (
	RequestTimeout  = "request_timeout"
	MaxAttempts     = "max_attempts"
	ResponseTimeout = "response_timeout"
	TimeoutAttempts = "timeout_attempts"
	UnansweredHold  = "unanswered_hold"
)

// PolicyParameters documents the query parameters of a request policy
// ([backends.Policy]) that [Policy] parses: [RequestTimeout],
// [MaxAttempts], [ResponseTimeout], [TimeoutAttempts] and
// [UnansweredHold], with the defaults of [backends.DefaultPolicy], then
// each name of deprecated: an old name of [RequestTimeout] that the
// backend still accepts, documented as deprecated.
func PolicyParameters(deprecated ...string) []driver.URLParameter {
	d := backends.DefaultPolicy
	params := []driver.URLParameter{
		{Name: RequestTimeout, Value: "DURATION", Default: d.Timeout.String(), Description: "bound of each attempt of a request; 0 for none", Example: "10s"},
		{Name: MaxAttempts, Value: "N", Default: strconv.Itoa(d.MaxAttempts), Description: "attempts per request, the first included", Example: "3"},
		{Name: ResponseTimeout, Value: "DURATION", Default: d.ResponseTimeout.String(), Description: "bound of the wait for an answer's headers; 0 for none but " + RequestTimeout, Example: "5s"},
		{Name: TimeoutAttempts, Value: "N", Default: strconv.Itoa(d.TimeoutAttempts), Description: "attempts of a request that may time out before it fails; 0 for " + MaxAttempts, Example: "1"},
		{Name: UnansweredHold, Value: "DURATION", Default: d.UnansweredHold.String(), Description: "how long gets and lists fail at once after one went unanswered; 0 for no hold", Example: "1s"},
	}
	for _, name := range deprecated {
		params = append(params, driver.URLParameter{Name: name, Value: "DURATION",
			Description: "deprecated: the old name of " + RequestTimeout, Example: "10s"})
	}
	return params
}

// Policy parses the request policy's query parameters that q holds (see
// [PolicyParameters]) into p, leaving the settings of those absent as
// they are. Durations are Go's (30s, 1m); the request timeout, the response
// timeout, the timeout attempts and the unanswered hold may be 0, the
// attempts are at least 1. A name of deprecated is an old name of
// [RequestTimeout]: it sets the request timeout, and q may not hold both.
// The error names the first parameter that is given more than once or
// whose value is not accepted, and its value.
func Policy(q url.Values, p *backends.Policy, deprecated ...string) error {
	timeoutName := RequestTimeout
	for _, name := range deprecated {
		if _, ok := q[name]; !ok {
			continue
		}
		if _, ok := q[timeoutName]; ok {
			return fmt.Errorf("query parameter %q is the deprecated name of %q: give %s alone", name, RequestTimeout, RequestTimeout)
		}
		timeoutName = name
	}
	for _, f := range []struct {
		name string
		want string
		set  func(v string) bool
	}{
		{timeoutName, "a duration such as 30s, or 0 for none", durationAtLeast0(&p.Timeout)},
		{MaxAttempts, "a whole number of at least 1", intAtLeast(1, &p.MaxAttempts)},
		{ResponseTimeout, "a duration such as 10s, or 0", durationAtLeast0(&p.ResponseTimeout)},
		{TimeoutAttempts, "a whole number, or 0", intAtLeast(0, &p.TimeoutAttempts)},
		{UnansweredHold, "a duration such as 5s, or 0 for none", durationAtLeast0(&p.UnansweredHold)},
	} {
		vs, ok := q[f.name]
		switch {
		case !ok:
		case len(vs) != 1:
			return fmt.Errorf("query parameter %q given %d times", f.name, len(vs))
		case !f.set(vs[0]):
			return fmt.Errorf("query parameter %q: want %s, got %q", f.name, f.want, vs[0])
		}
	}
	return nil
}

// durationAtLeast0 returns a setter of *dst from a duration that is not
// negative, reporting whether it took the value.
func durationAtLeast0(dst *time.Duration) func(string) bool {
	return func(v string) bool {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return false
		}
		*dst = d
		return true
	}
}

// intAtLeast returns a setter of *dst from an integer of at least min,
// reporting whether it took the value.
func intAtLeast(min int, dst *int) func(string) bool {
	return func(v string) bool {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return false
		}
		*dst = n
		return true
	}
}
