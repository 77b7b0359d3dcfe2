// Package conformance holds the exported test suites that every dstl
// backend must pass, in the spirit of gocloud.dev's blob/drivertest.
//
// [TestBackend] checks the contract of [dstl.Backend]: atomic Puts that
// never replace an object ([dstl.ErrExists]) and leave nothing behind when
// cancelled or failed, ranged Gets, idempotent Deletes, Lists in lexical
// order with sizes and times, readers and calls that honour their context,
// names checked by [dstl.CheckObjectName], [dstl.ErrClosed] after Close,
// concurrent use, and errors that are *[dstl.BackendError] values naming
// the operation, the backend and the object. Each case runs as a subtest on
// a backend of its own.
//
// A backend, in this module or outside it, runs the suite from a test of its
// own with a [Harness] that opens a fresh, empty backend. For a cloud store,
// fresh and empty usually means a new bucket, or a new random prefix in a
// shared one; skip the test, saying why, when the store is not reachable:
//
//	package mystore_test
//
//	import (
//		"crypto/rand"
//		"os"
//		"testing"
//
//		"github.com/dstlgo/dstl/conformance"
//		"github.com/dstlgo/dstl/dstl"
//		"example.com/mystore"
//	)
//
//	func TestConformance(t *testing.T) {
//		endpoint := os.Getenv("MYSTORE_ENDPOINT")
//		if endpoint == "" {
//			t.Skip("MYSTORE_ENDPOINT is not set")
//		}
//		conformance.TestBackend(t, func(t *testing.T) dstl.Backend {
//			b, err := mystore.Open(t.Context(), mystore.Config{
//				Endpoint: endpoint,
//				Prefix:   "conformance/" + rand.Text() + "/",
//			})
//			if err != nil {
//				t.Fatalf("open: %v", err)
//			}
//			return b
//		})
//	}
//
// The suite closes every backend it opens, with [testing.T.Cleanup]. A
// harness may register cleanups of its own to check what the backend left
// behind, such as temporary files: they run after the suite's Close. The
// tests of a backend keep only what is specific to it (its configuration,
// its on-disk or on-wire details) and leave the contract to this package;
// [CheckError], [Put], [Read] and [InvalidNames] serve them too.
//
// What the suite takes for granted, so that every backend can pass it:
//
//   - It only stores names that [dstl.CheckObjectName] accepts, with no
//     segment that starts with a dot, and it never stores both a name and a
//     name below it ("a" and "a/b"), which a filesystem cannot hold.
//   - Its largest body is 3 MiB, sent by Puts that are made to fail.
//   - The modification times a List reports lie within a few seconds of the
//     clock of the machine that runs the tests.
package conformance
