// Package urlparam holds what the backends' URL forms share: strict query
// parameters, one size syntax and the request policy's parameters.
package urlparam

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Check rejects query parameters not in known, naming them (and the known
// ones, sorted), and known ones given more than once.
func Check(q url.Values, known []string) error {
	var unknown, repeated []string
	for k, vs := range q {
		switch {
		case !slices.Contains(known, k):
			unknown = append(unknown, strconv.Quote(k))
		case len(vs) != 1:
			repeated = append(repeated, fmt.Sprintf("query parameter %q given %d times", k, len(vs)))
		}
	}
	slices.Sort(unknown)
	slices.Sort(repeated)
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("unknown query parameter(s) %s (known: %s)", strings.Join(unknown, ", "), strings.Join(slices.Sorted(slices.Values(known)), ", "))
	case len(repeated) > 0:
		return fmt.Errorf("%s", repeated[0])
	}
	return nil
}

// Size parses a size: a number of bytes, optionally followed by a binary
// unit, KiB, MiB or GiB (case-insensitive; K, KB, M, MB, G, GB mean the same).
func Size(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q (want bytes, or a number with KiB, MiB or GiB)", s)
	}
	return n * mult, nil
}
