// Package conformance holds the exported test suites that every dstl
// backend must pass, in the spirit of gocloud.dev's blob/drivertest.
//
// [TestBackend] checks the contract of [backends.Backend]: atomic Puts that
// never replace an object ([backends.ErrExists]) and leave nothing behind when
// cancelled or failed, ranged Gets, idempotent Deletes, Lists in lexical
// order with sizes and times, readers and calls that honour their context,
// names checked by [backends.CheckObjectName], [dstl.ErrClosed] after Close,
// concurrent use, and errors that are *[backends.Error] values naming
// the operation, the backend and the object, and a large object of three
// and a half parts read back whole and across every part boundary (give the
// backend's part size with [WithPartSize]). The refusal of an existing
// name is checked on every path a Put takes: PutExistingMultipart puts a
// body of one part and a half over a small object and over a large one,
// and a small body over a large object, and each Put fails with
// [backends.ErrExists] and leaves the first object whole (read back and
// listed with its size); ConcurrentMultipart races six Puts of one part
// and a half, each with a body of its own, for one name, and exactly one
// succeeds, the others fail with [backends.ErrExists], and the object
// holds the winner's body. These catch a store that honours If-None-Match
// on a single-request upload but not on the completion of a multipart one
// (dstltest.NewConditionStore makes such a store). With [WithRawPut], it also
// checks that List skips objects whose names no Put can write ("dir/",
// "a//b", written by other tools). Each case runs as a subtest on a backend
// of its own.
//
// [TestEngine] runs the DSTL itself, a [dstl.Storage] made by [dstl.New],
// over the backend, each case again on a backend of its own:
//
//   - ManyWriters: 16 writers over disjoint key-group ranges append changes
//     and metadata and go through checkpoints that are confirmed, aborted
//     ([dstl.Writer.Reset]) and truncated, also while pending. Once the
//     storage is closed, the objects left are exactly those of confirmed
//     checkpoints; a second storage over the same backend reads each
//     writer's last confirmed handle, after a round trip through its binary
//     encoding, back to exactly the changes appended: per key group in
//     order, metadata first in each change set.
//   - Rescaling: readers of other key-group ranges than the writers' (half
//     a writer's range, or across two) get exactly their key groups and all
//     metadata.
//   - LargeObjects: in each format version, checkpoints of 6 MiB and of
//     300 KiB, whose objects are put while they are encoded (the former in
//     parts where the backend's part size is below it), read back exactly.
//   - FormatVersion2: a storage that writes object format version 2
//     (format.version 2, whose uploads put each object while they encode
//     it) stores objects of that version, which a second storage reads back
//     exactly, whole and by other key-group ranges.
//   - ReleasedObjectsDeleted, SharedObjectKeptWhileReferenced,
//     ConfirmedObjectSurvives: an object goes (Get fails with
//     [backends.ErrNotFound], List omits it) once every change set in it is
//     released, and not before: not while another writer's change set in it
//     is referenced, not while a pending checkpoint covers it, never once a
//     checkpoint with it was confirmed.
//   - FlippedByte, TruncatedObject: an object rewritten with a byte flipped
//     inside a change set, or cut inside one, reads back as an error that
//     names the object and wraps format.ErrChecksum or format.ErrCorrupt
//     (package github.com/dstlgo/dstl/dstl/format), and no change.
//
// With [WithLocalRecovery], the storages of [TestEngine] keep local copies
// (with the local recovery it is given, e.g. duplicating.Open), and
// ManyWriters also reads each writer's last confirmed local handle with
// [dstl.Reader.ReadPreferLocal].
//
// A backend, in this module or outside it, runs the suites from a test of
// its own with a [Harness] that opens a fresh, empty backend. For a cloud store,
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
//	func harness(t *testing.T) backends.Backend {
//		endpoint := os.Getenv("MYSTORE_ENDPOINT")
//		if endpoint == "" {
//			t.Skip("MYSTORE_ENDPOINT is not set")
//		}
//		b, err := mystore.Open(t.Context(), mystore.Config{
//			Endpoint: endpoint,
//			Prefix:   "conformance/" + rand.Text() + "/",
//		})
//		if err != nil {
//			t.Fatalf("open: %v", err)
//		}
//		return b
//	}
//
//	func TestConformance(t *testing.T) { conformance.TestBackend(t, harness) }
//
//	func TestEngine(t *testing.T) { conformance.TestEngine(t, harness) }
//
// The suites close every backend they open, with [testing.T.Cleanup]. A
// harness may register cleanups of its own to check what the backend left
// behind, such as temporary files: they run after the suite's Close. The
// tests of a backend keep only what is specific to it (its configuration,
// its on-disk or on-wire details) and leave the contract to this package;
// [CheckError], [Put], [Read] and [InvalidNames] serve them too.
//
// What the suites take for granted, so that every backend can pass them:
//
//   - They only store names that [backends.CheckObjectName] accepts, with no
//     segment that starts with a dot, and they never store both a name and
//     a name below it ("a" and "a/b"), which a filesystem cannot hold. The
//     engine names its objects "<UUIDv7>.dstl".
//   - The largest bodies are the large object's three and a half parts and
//     the 3 MiB of the Puts that are made to fail; six Puts of one part and
//     a half each run at once. The engine's objects are smaller.
//   - The modification times a List reports lie within a few seconds of the
//     clock of the machine that runs the tests.
//   - A Delete, or a Put, is seen by the Gets and Lists that follow it. To
//     damage an object, TestEngine deletes it and puts the damaged bytes
//     under the same name.
//   - Each case of TestEngine ends within a minute, and within a few
//     seconds unless a request takes more than a fraction of one; the
//     storage's batching window is 5 ms (100 ms in the cases of two writers
//     sharing an object) and an upload is not hedged before 20 s.
package conformance
