// Package errchain walks the errors an error wraps.
package errchain

import "iter"

// All yields err and every error it wraps, depth first: through Unwrap()
// error and, for a joined error, through each of Unwrap() []error in
// turn. A nil err yields nothing.
func All(err error) iter.Seq[error] {
	return func(yield func(error) bool) {
		var walk func(error) bool
		walk = func(e error) bool {
			if e == nil {
				return true
			}
			if !yield(e) {
				return false
			}
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				return walk(u.Unwrap())
			case interface{ Unwrap() []error }:
				for _, c := range u.Unwrap() {
					if !walk(c) {
						return false
					}
				}
			}
			return true
		}
		walk(err)
	}
}
