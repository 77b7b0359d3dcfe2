package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/uploader"
)

// Harness opens a fresh, empty backend for one test and returns it; the
// suite closes it. It may fail or skip t, and register cleanups with
// t.Cleanup, which run after the suite has closed the backend.
type Harness func(t *testing.T) backends.Backend

// Option adjusts the backend suite to a backend.
type Option func(*suite)

// WithPartSize tells the suite the backend's part size: the size above
// which a Put goes up in parts (S3 multipart parts, GCS resumable chunks,
// Azure staged blocks). The large-object case puts an object of three and a
// half parts; PutExistingMultipart and ConcurrentMultipart put bodies of
// one part and a half. The default is [DefaultPartSize].
func WithPartSize(n int64) Option { return func(s *suite) { s.partSize = n } }

// WithLocalRecovery runs the storages of [TestEngine] with the local
// recovery that open opens (for instance duplicating.Open of package
// github.com/dstlgo/dstl/duplicating), turned on by
// [dstl.Config.LocalRecoveryEnabled] in a directory of each case's.
// ManyWriters then also reads each writer's last confirmed local handle,
// preferring local copies.
func WithLocalRecovery(open uploader.OpenLocalRecovery) Option {
	return func(s *suite) { s.localRecovery = open }
}

// RawPut stores data under name in b's store as it is, through the
// store's own client, bypassing the backend's checks of names: an object
// that another tool wrote. It may register the object's deletion with
// t.Cleanup (which runs before the suite closes b). It returns an error
// when the store refuses the name.
type RawPut func(t *testing.T, b backends.Backend, name string, data []byte) error

// WithRawPut gives the suite a way to write objects whose names no Put
// can write ([InvalidNames], such as "dir/" or "a//b"), for the case
// ListSkipsForeignNames; without it, that case is skipped.
func WithRawPut(put RawPut) Option { return func(s *suite) { s.rawPut = put } }

// DefaultPartSize is the part size the suite assumes when no [WithPartSize]
// is given: S3's smallest part size.
const DefaultPartSize = 5 << 20

// TestBackend runs every case of the [backends.Backend] contract as a subtest
// of t, each on a backend of its own from open. See the package
// documentation for what the cases check and assume.
func TestBackend(t *testing.T, open Harness, opts ...Option) {
	runCases(t, open, []suiteCase{
		{"LargeObject", (*suite).testLargeObject},
		{"GetRange", (*suite).testGetRange},
		{"GetHugeLength", (*suite).testGetHugeLength},
		{"PutUsesSize", (*suite).testPutUsesSize},
		{"PutExisting", (*suite).testPutExisting},
		{"PutExistingMultipart", (*suite).testPutExistingMultipart},
		{"PutFailureLeavesNothing", (*suite).testPutFailureLeavesNothing},
		{"PutInvalidArguments", (*suite).testPutInvalidArguments},
		{"InvalidNames", (*suite).testInvalidNames},
		{"Delete", (*suite).testDelete},
		{"List", (*suite).testList},
		{"ListCallbackError", (*suite).testListCallbackError},
		{"ListCallbackCallsBackend", (*suite).testListCallbackCallsBackend},
		{"ListCancelled", (*suite).testListCancelled},
		{"ListSkipsForeignNames", (*suite).testListSkipsForeignNames},
		{"CancelledContext", (*suite).testCancelledContext},
		{"ReaderHonoursContext", (*suite).testReaderHonoursContext},
		{"Concurrent", (*suite).testConcurrent},
		{"ConcurrentMultipart", (*suite).testConcurrentMultipart},
		{"Closed", (*suite).testClosed},
	}, opts...)
}

// suiteCase is one case of a suite.
type suiteCase struct {
	name string
	run  func(*suite, *testing.T)
}

// runCases runs each case as a subtest of t; each opens its backends from
// open.
func runCases(t *testing.T, open Harness, cases []suiteCase, opts ...Option) {
	s := &suite{open: open, partSize: DefaultPartSize}
	for _, o := range opts {
		o(s)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(s, t) })
	}
}

// InvalidNames returns object names that break the rules of
// [backends.CheckObjectName], which every backend rejects with
// [backends.ErrInvalidName]. The slice is new on every call.
func InvalidNames() []string {
	return []string{
		"", "/abs", "/", "//", ".", "..", "../x", "a/../b", "a/..", "./a", "a/./b", "a/.",
		"a/", "a/b/", "a//b", `a\b`, `..\x`, "a\x00b", "a\x00",
	}
}

// putBodySize is the size of the bodies of the failing Puts: large enough
// that a backend copies or uploads it in several parts.
const putBodySize = 3 << 20

// clockSkew is how far from the test's clock a modification time may be.
const clockSkew = 5 * time.Second

// suite is one run of [TestBackend].
type suite struct {
	open     Harness
	id       string // the backend identifier the first checked error named
	partSize int64
	// localRecovery turns local recovery on in the engine suite's storages.
	localRecovery uploader.OpenLocalRecovery
	// rawPut writes objects under names no Put can write; nil: none.
	rawPut RawPut
}

// backend opens a fresh backend, checks that it is empty and closes it at
// the end of the test.
func (s *suite) backend(t *testing.T) backends.Backend {
	t.Helper()
	b := s.open(t)
	if b == nil {
		t.Fatal("the harness returned a nil backend")
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	requireEmpty(t, b, "the harness returned a backend that is not empty")
	return b
}

// checkErr checks err with [CheckError], and that it names the backend
// that every other error of the run named.
func (s *suite) checkErr(t *testing.T, err error, op, object string, want error) {
	t.Helper()
	CheckError(t, err, op, s.id, object, want)
	if s.id == "" {
		be, _ := errors.AsType[*backends.Error](err)
		s.id = be.Backend
	}
}

// listInfo returns what List reports under prefix.
func listInfo(t *testing.T, b backends.Backend, prefix string) []backends.ObjectInfo {
	t.Helper()
	var out []backends.ObjectInfo
	if err := b.List(t.Context(), prefix, func(o backends.ObjectInfo) error { out = append(out, o); return nil }); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return out
}

// requireEmpty fails the test, with why and the names, when b stores any
// object.
func requireEmpty(t *testing.T, b backends.Backend, why string) {
	t.Helper()
	if names := list(t, b, ""); len(names) != 0 {
		t.Fatalf("%s: %q", why, names)
	}
}

// list returns the names List reports under prefix.
func list(t *testing.T, b backends.Backend, prefix string) []string {
	t.Helper()
	var names []string
	for _, o := range listInfo(t, b, prefix) {
		names = append(names, o.Name)
	}
	return names
}

// checkEmpty checks that name cannot be read and that nothing is listed.
func (s *suite) checkEmpty(t *testing.T, b backends.Backend, name string) {
	t.Helper()
	_, err := Read(t.Context(), b, name, 0, -1)
	s.checkErr(t, err, "get", name, backends.ErrNotFound)
	requireEmpty(t, b, "objects left behind")
}

func (s *suite) testGetRange(t *testing.T) {
	b := s.backend(t)
	const data = "0123456789"
	Put(t, b, "obj", data)
	Put(t, b, "empty", "")
	Put(t, b, "dir/obj", "x")
	tests := []struct {
		name           string
		object         string
		offset, length int64
		want           string
		err            error
	}{
		{"whole", "obj", 0, -1, data, nil},
		{"whole by length", "obj", 0, 10, data, nil},
		{"prefix", "obj", 0, 4, "0123", nil},
		{"middle", "obj", 3, 4, "3456", nil},
		{"suffix to end", "obj", 7, -1, "789", nil},
		{"past end is cut", "obj", 8, 100, "89", nil},
		{"zero length", "obj", 5, 0, "", nil},
		{"offset at end", "obj", 10, -1, "", nil},
		{"offset past end", "obj", 11, -1, "", backends.ErrInvalidRange},
		{"negative offset", "obj", -1, 1, "", backends.ErrInvalidRange},
		{"bad length", "obj", 0, -2, "", backends.ErrInvalidRange},
		{"nested", "dir/obj", 0, -1, "x", nil},
		{"empty object", "empty", 0, -1, "", nil},
		{"empty object with a length", "empty", 0, 5, "", nil},
		{"empty object, offset past end", "empty", 1, -1, "", backends.ErrInvalidRange},
		{"missing", "nope", 0, -1, "", backends.ErrNotFound},
		{"missing nested", "no/such/obj", 0, -1, "", backends.ErrNotFound},
		{"under an object", "obj/x", 0, -1, "", backends.ErrNotFound},
		{"prefix of a nested name", "dir", 0, -1, "", backends.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(t.Context(), b, tt.object, tt.offset, tt.length)
			if tt.err != nil {
				s.checkErr(t, err, "get", tt.object, tt.err)
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Get(%q, %d, %d) = %q, %v; want %q", tt.object, tt.offset, tt.length, got, err, tt.want)
			}
		})
	}
}

// testPutUsesSize: a body longer than size is cut at size.
func (s *suite) testPutUsesSize(t *testing.T) {
	b := s.backend(t)
	if err := b.Put(t.Context(), "x", strings.NewReader("abcdef"), 3); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(t.Context(), b, "x", 0, -1); err != nil || got != "abc" {
		t.Fatalf("Get = %q, %v; want abc", got, err)
	}
	if got := listInfo(t, b, ""); len(got) != 1 || got[0].Size != 3 {
		t.Fatalf("List = %+v, want x of 3 bytes", got)
	}
}

func (s *suite) testPutExisting(t *testing.T) {
	b := s.backend(t)
	Put(t, b, "a/obj", "original")
	err := b.Put(t.Context(), "a/obj", strings.NewReader("other"), 5)
	s.checkErr(t, err, "put", "a/obj", backends.ErrExists)
	if got, err := Read(t.Context(), b, "a/obj", 0, -1); err != nil || got != "original" {
		t.Fatalf("after the failed Put: %q, %v; want the original", got, err)
	}
	if got := listInfo(t, b, ""); len(got) != 1 || got[0].Name != "a/obj" || got[0].Size != int64(len("original")) {
		t.Fatalf("List = %+v, want the original a/obj only", got)
	}
}

// multipartSize is the size of the bodies of the cases that put existing
// names, or race for one, above the part size: one part and a half, so
// that a backend uploads them in parts.
func (s *suite) multipartSize() int64 { return s.partSize + s.partSize/2 }

// body returns size bytes that differ from those of every other seed at
// the first byte, and from those of a shift of any seed's bytes.
func body(seed int, size int64) []byte {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(seed*17 + i*7 + i>>13)
	}
	return data
}

// checkObject checks that name reads back as want, whole, and is listed
// with its size.
func checkObject(t *testing.T, b backends.Backend, name string, want []byte) {
	t.Helper()
	got, err := Read(t.Context(), b, name, 0, -1)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	if !bytes.Equal([]byte(got), want) {
		t.Fatalf("Get(%q) read back %d bytes that differ from the %d of the Put that created it", name, len(got), len(want))
	}
	if infos := listInfo(t, b, name); len(infos) != 1 || infos[0].Name != name || infos[0].Size != int64(len(want)) {
		t.Fatalf("List(%q) = %+v, want %q of %d bytes only", name, infos, name, len(want))
	}
}

// testPutExistingMultipart: a Put of an existing name fails with
// ErrExists and leaves the object whole on every path a Put takes: a
// body above the part size over a small object and over a large one,
// and a small body over a large object.
func (s *suite) testPutExistingMultipart(t *testing.T) {
	large := s.multipartSize()
	for _, tc := range []struct {
		name          string
		first, second int64
	}{
		{"large over small", 100, large},
		{"large over large", large, large},
		{"small over large", large, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := s.backend(t)
			const name = "big/obj"
			first, second := body(1, tc.first), body(2, tc.second)
			if err := b.Put(t.Context(), name, bytes.NewReader(first), tc.first); err != nil {
				t.Fatalf("Put of %d bytes: %v", tc.first, err)
			}
			err := b.Put(t.Context(), name, bytes.NewReader(second), tc.second)
			s.checkErr(t, err, "put", name, backends.ErrExists)
			checkObject(t, b, name, first)
		})
	}
}

// concurrentPuts is how many Puts above the part size race for one name
// in testConcurrentMultipart.
const concurrentPuts = 6

// testConcurrentMultipart: of Puts above the part size racing for one
// name, each with a body of its own, exactly one succeeds, the others
// fail with ErrExists, and the object holds the winner's body.
func (s *suite) testConcurrentMultipart(t *testing.T) {
	b := s.backend(t)
	const name = "race/large"
	size := s.multipartSize()
	bodies := make([][]byte, concurrentPuts)
	for i := range bodies {
		bodies[i] = body(i+1, size)
	}
	errs := make([]error, concurrentPuts)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range concurrentPuts {
		wg.Go(func() {
			<-start
			errs[i] = b.Put(t.Context(), name, bytes.NewReader(bodies[i]), size)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	var won []int
	for i, err := range errs {
		if err == nil {
			winner = i
			won = append(won, i)
			continue
		}
		if !errors.Is(err, backends.ErrExists) {
			t.Errorf("Put %d: %v, want success or %v", i, err, backends.ErrExists)
			continue
		}
		s.checkErr(t, err, "put", name, backends.ErrExists)
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d Puts of %d bytes to one name succeeded (%v), want exactly one", len(won), concurrentPuts, size, won)
	}
	checkObject(t, b, name, bodies[winner])
}

// cancellingBody cancels a context once a read reaches past offset at.
type cancellingBody struct {
	data   []byte
	at     int64
	cancel context.CancelFunc
}

func (r *cancellingBody) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > r.at {
		r.cancel()
	}
	return bytes.NewReader(r.data).ReadAt(p, off)
}

// failingBody returns its data up to offset at, then err.
type failingBody struct {
	data []byte
	at   int64
	err  error
}

func (r *failingBody) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) <= r.at {
		return copy(p, r.data[off:]), nil
	}
	n := 0
	if off < r.at {
		n = copy(p, r.data[off:r.at])
	}
	return n, r.err
}

func (s *suite) testPutFailureLeavesNothing(t *testing.T) {
	errBroken := errors.New("broken body")
	data := bytes.Repeat([]byte{7}, putBodySize)
	size := int64(len(data))
	cancelledAt := func(at int64) func() (context.Context, io.ReaderAt) {
		return func() (context.Context, io.ReaderAt) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, &cancellingBody{data: data, at: at, cancel: cancel}
		}
	}
	tests := []struct {
		name string
		body func() (context.Context, io.ReaderAt)
		size int64
		want error
	}{
		{"cancelled before", func() (context.Context, io.ReaderAt) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, bytes.NewReader(data)
		}, size, context.Canceled},
		{"cancelled at the first read", cancelledAt(0), size, context.Canceled},
		{"cancelled half-way", cancelledAt(size / 2), size, context.Canceled},
		{"cancelled at the last byte", cancelledAt(size - 1), size, context.Canceled},
		{"body fails half-way", func() (context.Context, io.ReaderAt) {
			return context.Background(), &failingBody{data: data, at: size/2 + 10, err: errBroken}
		}, size, errBroken},
		{"body shorter than size", func() (context.Context, io.ReaderAt) {
			return context.Background(), bytes.NewReader(data[:100])
		}, 101, io.ErrUnexpectedEOF},
		{"empty body, size 1", func() (context.Context, io.ReaderAt) {
			return context.Background(), bytes.NewReader(nil)
		}, 1, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := s.backend(t)
			ctx, body := tt.body()
			s.checkErr(t, b.Put(ctx, "sub/dir/obj", body, tt.size), "put", "sub/dir/obj", tt.want)
			s.checkEmpty(t, b, "sub/dir/obj")
			// The name is free for a retry.
			Put(t, b, "sub/dir/obj", "ok")
			if got, err := Read(t.Context(), b, "sub/dir/obj", 0, -1); err != nil || got != "ok" {
				t.Fatalf("after the retry: %q, %v", got, err)
			}
		})
	}
}

func (s *suite) testPutInvalidArguments(t *testing.T) {
	b := s.backend(t)
	s.checkErr(t, b.Put(t.Context(), "x", strings.NewReader(""), -1), "put", "x", nil)
	s.checkErr(t, b.Put(t.Context(), "x", nil, 0), "put", "x", nil)
	s.checkEmpty(t, b, "x")
}

func (s *suite) testInvalidNames(t *testing.T) {
	b := s.backend(t)
	for _, name := range InvalidNames() {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			s.checkErr(t, b.Put(t.Context(), name, strings.NewReader("x"), 1), "put", name, backends.ErrInvalidName)
			_, err := b.Get(t.Context(), name, 0, -1)
			s.checkErr(t, err, "get", name, backends.ErrInvalidName)
			s.checkErr(t, b.Delete(t.Context(), name), "delete", name, backends.ErrInvalidName)
		})
	}
	requireEmpty(t, b, "objects stored")
}

func (s *suite) testDelete(t *testing.T) {
	b := s.backend(t)
	Put(t, b, "a/b", "x")
	Put(t, b, "file", "y")
	Put(t, b, "keep/x", "z")
	tests := []struct {
		name, object string
	}{
		{"existing", "a/b"},
		{"again", "a/b"},
		{"never existed", "nope"},
		{"missing parent", "no/such/thing"},
		{"under an object", "file/x"},
		{"prefix of a nested name", "keep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.Delete(t.Context(), tt.object); err != nil {
				t.Fatalf("Delete(%q): %v", tt.object, err)
			}
			_, err := Read(t.Context(), b, tt.object, 0, -1)
			s.checkErr(t, err, "get", tt.object, backends.ErrNotFound)
		})
	}
	if got, want := list(t, b, ""), []string{"file", "keep/x"}; !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
}

func (s *suite) testList(t *testing.T) {
	b := s.backend(t)
	// Put in an order of their own, neither sorted nor reversed, so that a
	// listing in the order of the Puts shows; "d/x" comes before "d/y/z", as
	// a name in a directory that exists comes before one that needs a new
	// directory in it.
	objects := []struct{ name, data string }{
		{"d-/q", "9"},
		{"z", ""},
		{"a.b", "333"},
		{"d/x", "6"},
		{"ünï/cödé", "11"},
		{"a", "1"},
		{"d/y/z0", "8"},
		{"with space/o k", "10"},
		{"ab/c", "5"},
		{"100%/50%25", "12"},
		{"a0", "4"},
		{"b c", "66"},
		{"d/y/z", "77"},
		{"a-b", "22"},
	}
	data := map[string]string{}
	before := time.Now().Add(-clockSkew)
	for _, o := range objects {
		Put(t, b, o.name, o.data)
		data[o.name] = o.data
	}
	after := time.Now().Add(clockSkew)
	for name, want := range data {
		if got, err := Read(t.Context(), b, name, 0, -1); err != nil || got != want {
			t.Errorf("Get(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	all := slices.Sorted(maps.Keys(data))
	prefixes := []string{
		"", "a", "a-", "a/", "ab", "ab/", "b ", "d", "d/", "d/y", "d/y/", "d/y/z", "d-",
		"with", "with space/", "ü", "ünï/c", "100%", "100%/50%", "z", "zz",
		"nope/", "../", "./", "a//", "/", "d//y",
	}
	for _, p := range prefixes {
		t.Run(fmt.Sprintf("%q", p), func(t *testing.T) {
			var got, want []string
			for _, o := range listInfo(t, b, p) {
				got = append(got, o.Name)
				if size := int64(len(data[o.Name])); o.Size != size {
					t.Errorf("%q: size %d, want %d", o.Name, o.Size, size)
				}
				if o.ModTime.Before(before) || o.ModTime.After(after) {
					t.Errorf("%q: modification time %v, want between %v and %v", o.Name, o.ModTime, before, after)
				}
			}
			for _, name := range all {
				if strings.HasPrefix(name, p) {
					want = append(want, name)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("List(%q) = %q, want %q", p, got, want)
			}
		})
	}
}

// testListSkipsForeignNames: List reports no name that CheckObjectName
// refuses (which Get and Delete would refuse then), such as the "dir/"
// markers or "a//b" keys that other tools write into the same bucket.
func (s *suite) testListSkipsForeignNames(t *testing.T) {
	if s.rawPut == nil {
		t.Skip("the backend's test gives no WithRawPut")
	}
	b := s.backend(t)
	Put(t, b, "d/obj", "1")
	Put(t, b, "e", "22")
	written := 0
	for _, name := range []string{"dir/", "d/", "d//x", "x//y", "d/./x", "d/../e", "d/x/", "./d"} {
		if err := s.rawPut(t, b, name, []byte("foreign")); err != nil {
			t.Logf("the store refuses the name %q: %v", name, err)
			continue
		}
		written++
	}
	if written == 0 {
		t.Skip("the store refused every foreign name")
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"d/obj", "e"}},
		{"d", []string{"d/obj"}},
		{"d/", []string{"d/obj"}},
		{"di", nil},
		{"x", nil},
	} {
		if got := list(t, b, tc.prefix); !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
	// What List reports, Get and Delete take.
	for _, name := range list(t, b, "") {
		if err := backends.CheckObjectName(name); err != nil {
			t.Errorf("List reported %q: %v", name, err)
		}
	}
}

func (s *suite) testListCallbackError(t *testing.T) {
	b := s.backend(t)
	Put(t, b, "a", "")
	Put(t, b, "b/c", "")
	Put(t, b, "d", "")
	stop := errors.New("stop")
	var seen []string
	err := b.List(t.Context(), "", func(o backends.ObjectInfo) error {
		seen = append(seen, o.Name)
		if o.Name == "b/c" {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("List = %v, want the callback's error as it is", err)
	}
	if want := []string{"a", "b/c"}; !slices.Equal(seen, want) {
		t.Fatalf("listed %q, want %q", seen, want)
	}
}

// testListCallbackCallsBackend: the callback may read and delete what it
// is given, as a garbage collector does.
func (s *suite) testListCallbackCallsBackend(t *testing.T) {
	b := s.backend(t)
	names := []string{"a", "b/c", "d"}
	for _, name := range names {
		Put(t, b, name, "data of "+name)
	}
	var seen []string
	err := b.List(t.Context(), "", func(o backends.ObjectInfo) error {
		seen = append(seen, o.Name)
		if got, err := Read(t.Context(), b, o.Name, 0, -1); err != nil || got != "data of "+o.Name {
			return fmt.Errorf("Get(%q) in the callback = %q, %v", o.Name, got, err)
		}
		return b.Delete(t.Context(), o.Name)
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if !slices.Equal(seen, names) {
		t.Fatalf("listed %q, want %q", seen, names)
	}
	requireEmpty(t, b, "left after deleting every listed object")
}

func (s *suite) testListCancelled(t *testing.T) {
	b := s.backend(t)
	Put(t, b, "a", "")
	Put(t, b, "b", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := 0
	err := b.List(ctx, "", func(backends.ObjectInfo) error { n++; cancel(); return nil })
	s.checkErr(t, err, "list", "", context.Canceled)
	if n != 1 {
		t.Fatalf("callback called %d times, want once: the listing goes on after its context is done", n)
	}
}

// testCancelledContext: calls with a done context fail. (Put is a case of
// testPutFailureLeavesNothing.)
func (s *suite) testCancelledContext(t *testing.T) {
	b := s.backend(t)
	Put(t, b, "obj", "data")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.Get(ctx, "obj", 0, -1)
	s.checkErr(t, err, "get", "obj", context.Canceled)
	s.checkErr(t, b.Delete(ctx, "obj"), "delete", "obj", context.Canceled)
	err = b.List(ctx, "o", func(backends.ObjectInfo) error { t.Error("callback called"); return nil })
	s.checkErr(t, err, "list", "o", context.Canceled)
}

func (s *suite) testReaderHonoursContext(t *testing.T) {
	b := s.backend(t)
	Put(t, b, "a", "abcdef")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r, err := b.Get(ctx, "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 2)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "ab" {
		t.Fatalf("read %q, %v; want ab", buf, err)
	}
	cancel()
	_, err = r.Read(buf)
	s.checkErr(t, err, "get", "a", context.Canceled)
}

// testConcurrent: concurrent Puts and Gets of distinct objects, Lists, and
// Puts racing for one name, of which exactly one wins.
func (s *suite) testConcurrent(t *testing.T) {
	b := s.backend(t)
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("dir%d/obj%d", i%4, i)
			data := strings.Repeat(fmt.Sprint(i), 1000)
			if err := b.Put(t.Context(), name, strings.NewReader(data), int64(len(data))); err != nil {
				errs <- err
				return
			}
			got, err := Read(t.Context(), b, name, 0, -1)
			if err != nil || got != data {
				errs <- fmt.Errorf("get %s: %d bytes, %v", name, len(got), err)
			}
		})
	}
	var won sync.Map
	for i := range n {
		wg.Go(func() {
			data := fmt.Sprintf("writer %d", i)
			err := b.Put(t.Context(), "race/obj", strings.NewReader(data), int64(len(data)))
			switch {
			case err == nil:
				won.Store(data, true)
			case !errors.Is(err, backends.ErrExists):
				errs <- err
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if err := b.List(t.Context(), "", func(backends.ObjectInfo) error { return nil }); err != nil {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var winners []string
	won.Range(func(k, _ any) bool { winners = append(winners, k.(string)); return true })
	if len(winners) != 1 {
		t.Fatalf("%d Puts of one name succeeded: %q", len(winners), winners)
	}
	if got, err := Read(t.Context(), b, "race/obj", 0, -1); err != nil || got != winners[0] {
		t.Fatalf("race/obj = %q, %v; want %q", got, err, winners[0])
	}
	if got := list(t, b, ""); len(got) != n+1 {
		t.Fatalf("listed %d objects, want %d", len(got), n+1)
	}
}

func (s *suite) testClosed(t *testing.T) {
	b := s.backend(t)
	Put(t, b, "a", "abc")
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s.checkErr(t, b.Put(t.Context(), "b", strings.NewReader("x"), 1), "put", "b", dstl.ErrClosed)
	_, err := b.Get(t.Context(), "a", 0, -1)
	s.checkErr(t, err, "get", "a", dstl.ErrClosed)
	s.checkErr(t, b.Delete(t.Context(), "a"), "delete", "a", dstl.ErrClosed)
	s.checkErr(t, b.List(t.Context(), "p", func(backends.ObjectInfo) error { return nil }), "list", "p", dstl.ErrClosed)
}

// testLargeObject puts an object of three and a half parts, so that a
// backend that uploads in parts needs at least four, and reads it back
// whole and in ranges that straddle every part boundary.
func (s *suite) testLargeObject(t *testing.T) {
	b := s.backend(t)
	size := 3*s.partSize + s.partSize/2
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	const name = "large/object"
	if err := b.Put(t.Context(), name, bytes.NewReader(data), size); err != nil {
		t.Fatalf("Put of %d bytes (%d parts of %d): %v", size, (size+s.partSize-1)/s.partSize, s.partSize, err)
	}
	got, err := Read(t.Context(), b, name, 0, -1)
	if err != nil {
		t.Fatalf("Get whole: %v", err)
	}
	if !bytes.Equal([]byte(got), data) {
		t.Fatalf("read back %d bytes that differ from the %d put", len(got), size)
	}
	for i := int64(1); i <= 3; i++ {
		off := i*s.partSize - 100
		got, err := Read(t.Context(), b, name, off, 200)
		if err != nil {
			t.Fatalf("Get [%d, +200) across part boundary %d: %v", off, i, err)
		}
		if !bytes.Equal([]byte(got), data[off:off+200]) {
			t.Fatalf("Get [%d, +200) across part boundary %d returned other bytes", off, i)
		}
	}
	if infos := listInfo(t, b, "large/"); len(infos) != 1 || infos[0].Size != size {
		t.Fatalf("List = %+v, want the object with size %d", infos, size)
	}
}

// testGetHugeLength: a length past any possible end reads to the end,
// however large (offset+length must not overflow into another range).
func (s *suite) testGetHugeLength(t *testing.T) {
	b := s.backend(t)
	const data = "0123456789"
	Put(t, b, "huge", data)
	for _, tc := range []struct{ offset, length int64 }{
		{3, math.MaxInt64}, {3, math.MaxInt64 - 3}, {3, math.MaxInt64 - 2}, {0, math.MaxInt64}, {3, 1 << 62},
	} {
		got, err := Read(t.Context(), b, "huge", tc.offset, tc.length)
		if err != nil {
			t.Fatalf("Get(%d, %d): %v", tc.offset, tc.length, err)
		}
		if got != data[tc.offset:] {
			t.Fatalf("Get(%d, %d) = %q, want %q", tc.offset, tc.length, got, data[tc.offset:])
		}
	}
}
