package errchain

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestAll(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	joined := errors.Join(a, fmt.Errorf("wrap: %w", b))
	for _, tc := range []struct {
		name string
		err  error
		want []error
	}{
		{"nil", nil, nil},
		{"one", a, []error{a}},
		{"wrapped", fmt.Errorf("x: %w", c), nil}, // checked below: the wrapper, then c
		{"joined, depth first", fmt.Errorf("top: %w", joined), nil},
	} {
		var got []error
		for e := range All(tc.err) {
			got = append(got, e)
		}
		switch tc.name {
		case "wrapped":
			if len(got) != 2 || got[0] != tc.err || got[1] != c {
				t.Errorf("%s: %v", tc.name, got)
			}
		case "joined, depth first":
			if len(got) != 5 || got[1] != joined || got[2] != a || got[4] != b {
				t.Errorf("%s: %v", tc.name, got)
			}
		default:
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
	}
	// A consumer that stops early stops the walk.
	n := 0
	for range All(joined) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("stopped after %d", n)
	}
}
