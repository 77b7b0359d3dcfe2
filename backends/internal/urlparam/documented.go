package urlparam

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/dstlgo/dstl/backends/driver"
)

// unknownName is a query parameter no backend knows.
const unknownName = "dstl_no_such_parameter"

// CheckDocumented checks a backend's URL parser against the parameters it
// documents: parse (which parses or opens a base path) must accept base
// with each parameter alone at its example value (plus the parameters
// companions names for it, which it goes only with), must reject a
// parameter that is not listed, naming it, and the list must name no
// parameter twice. It returns every problem found.
func CheckDocumented(base string, params []driver.URLParameter, parse func(basePath string) error, companions map[string]url.Values) error {
	var errs []error
	seen := map[string]bool{}
	for _, p := range params {
		if seen[p.Name] {
			errs = append(errs, fmt.Errorf("parameter %q listed twice", p.Name))
		}
		seen[p.Name] = true
		if p.Name == "" || p.Value == "" || p.Description == "" || p.Example == "" {
			errs = append(errs, fmt.Errorf("parameter %+v: name, value, description or example missing", p))
			continue
		}
		q := url.Values{}
		for k, vs := range companions[p.Name] {
			q[k] = vs
		}
		q.Set(p.Name, p.Example)
		u := base + "?" + q.Encode()
		if err := parse(u); err != nil {
			errs = append(errs, fmt.Errorf("parameter %q: %s rejected: %w", p.Name, u, err))
		}
	}
	u := base + "?" + unknownName + "=1"
	if err := parse(u); err == nil {
		errs = append(errs, fmt.Errorf("%s accepted, with a parameter not listed", u))
	} else if !strings.Contains(err.Error(), unknownName) {
		errs = append(errs, fmt.Errorf("%s rejected without naming the parameter: %w", u, err))
	}
	return errors.Join(errs...)
}
