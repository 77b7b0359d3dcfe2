package dstl_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/dstltest"
)

// manyWritersOneObject has 32 writers persist 10 KiB each into one object
// and returns the backend, the storage and the handles.
func manyWritersOneObject(t *testing.T) (*dstltest.Backend, *dstl.Storage, []*dstl.Writer, []dstl.Handle) {
	t.Helper()
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.BatchPersistDelay = 300 * time.Millisecond
	s := newStorage(t, b, cfg)
	const writers = 32
	ws := make([]*dstl.Writer, writers)
	hs := make([]dstl.Handle, writers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = newWriter(t, s, fmt.Sprint(i), dstl.KeyGroupRange{Start: 4 * i, End: 4*i + 3})
		for j := range 100 {
			mustAppend(t, ws[i], 4*i+j%4, strings.Repeat(string(rune('a'+i%26)), 100))
		}
	}
	for i, w := range ws {
		wg.Go(func() { hs[i] = persist(t, w, 0, 1) })
	}
	wg.Wait()
	if b.Len() != 1 {
		t.Fatalf("objects = %d, want 1", b.Len())
	}
	return b, s, ws, hs
}

// TestReaderFetchesOnlyWhatItNeeds: a handle that needs 1/32 of an object
// fetches its range alone: bytes fetched / bytes needed <= 1.1.
func TestReaderFetchesOnlyWhatItNeeds(t *testing.T) {
	b, _, ws, hs := manyWritersOneObject(t)
	obj := b.Objects()[0]
	r, err := dstl.NewReader(b, ws[7].KeyGroups(), dstl.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for _, err := range r.Changes(context.Background(), hs[7]) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 100 {
		t.Fatalf("read %d changes, want 100", n)
	}
	st := r.Stats()
	ratio := float64(st.BytesFetched) / float64(st.BytesNeeded)
	t.Logf("object %d bytes; handle needs %d; fetched %d in %d requests (ratio %.3f)", obj.Size, st.BytesNeeded, st.BytesFetched, st.Requests, ratio)
	if ratio > 1.1 || st.Requests != 1 {
		t.Fatalf("fetched %d bytes in %d requests for %d needed (ratio %.3f), want one request and ratio <= 1.1", st.BytesFetched, st.Requests, st.BytesNeeded, ratio)
	}
	if st.BytesNeeded*10 > obj.Size {
		t.Fatalf("the handle needs %d of %d bytes: not a small part", st.BytesNeeded, obj.Size)
	}
}

// TestReaderCoalescesAndCaches: prefetching every handle of a shared object
// costs one request; reading them all afterwards costs none.
func TestReaderCoalescesAndCaches(t *testing.T) {
	b, s, _, hs := manyWritersOneObject(t)
	r, err := s.NewReader(dstl.KeyGroupRange{Start: 0, End: 127})
	if err != nil {
		t.Fatal(err)
	}
	gets := b.Counts()[dstltest.OpGet]
	if err := r.Prefetch(context.Background(), hs...); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if err := r.Read(context.Background(), h, func(dstl.Change) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Counts()[dstltest.OpGet] - gets; got != 1 {
		t.Fatalf("reading 32 handles of one object took %d requests, want 1", got)
	}
	// A second reader of the same storage shares the cache.
	r2, _ := s.NewReader(dstl.KeyGroupRange{Start: 0, End: 3})
	if err := r2.Read(context.Background(), hs[0], func(dstl.Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := b.Counts()[dstltest.OpGet] - gets; got != 1 {
		t.Fatalf("second reader fetched again: %d requests", got)
	}
}

func TestReaderCacheExpiresIdleRanges(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h := persist(t, w, 0, 1)
	r, err := dstl.NewReader(b, w.KeyGroups(), dstl.ReaderOptions{CacheIdleTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := func() {
		if err := r.Read(context.Background(), h, func(dstl.Change) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	read()
	read()
	if got := r.Stats().Requests; got != 1 {
		t.Fatalf("requests = %d, want 1 (second read cached)", got)
	}
	time.Sleep(150 * time.Millisecond)
	read()
	if got := r.Stats().Requests; got != 2 {
		t.Fatalf("requests = %d, want 2 (idle range expired)", got)
	}
}

// TestReaderDamagedObject: a flipped byte or a truncation gives an error
// that names the object and offset, never wrong data.
func TestReaderDamagedObject(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		want   error
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)/3] ^= 0x40; return b }, format.ErrChecksum},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, format.ErrCorrupt},
		{"truncated before the change set", func(b []byte) []byte { return b[:5] }, format.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			s := newStorage(t, b, testConfig())
			w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
			for range 50 {
				mustAppend(t, w, 0, strings.Repeat("z", 40))
			}
			h := persist(t, w, 0, 1)
			obj := h.Entries[0].Object
			data, _ := b.ObjectBytes(obj)
			b.SetObjectBytes(obj, tc.damage(append([]byte(nil), data...)))
			r, _ := dstl.NewReader(b, w.KeyGroups(), dstl.ReaderOptions{})
			defer r.Close()
			n := 0
			err := r.Read(context.Background(), h, func(dstl.Change) error { n++; return nil })
			if err == nil {
				t.Fatal("read of a damaged object succeeded")
			}
			if n != 0 {
				t.Fatalf("yielded %d changes from a damaged change set", n)
			}
			if !strings.Contains(err.Error(), obj) {
				t.Fatalf("error %q does not name the object", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// TestSharedFetchSurvivesOtherCallersCancel: two readers of one storage ask
// for the same range at once; the first one's context ends while the fetch
// runs. The second, whose context is live, still gets the bytes.
func TestSharedFetchSurvivesOtherCallersCancel(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h := persist(t, w, 0, 1)
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpGet {
			return dstltest.Fault{Delay: 100 * time.Millisecond}
		}
		return dstltest.Fault{}
	})
	r1, _ := s.NewReader(w.KeyGroups())
	r2, _ := s.NewReader(w.KeyGroups())
	ctx1, cancel1 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel1()
	var wg sync.WaitGroup
	var err1, err2 error
	wg.Go(func() { err1 = r1.Read(ctx1, h, func(dstl.Change) error { return nil }) })
	time.Sleep(5 * time.Millisecond)
	wg.Go(func() { err2 = r2.Read(context.Background(), h, func(dstl.Change) error { return nil }) })
	wg.Wait()
	if !errors.Is(err1, context.DeadlineExceeded) {
		t.Errorf("reader 1 = %v, want its deadline", err1)
	}
	if err2 != nil {
		t.Fatalf("reader 2 with a live context failed: %v", err2)
	}
}

// TestReaderPrefetchedDamagedFrame: a prefetch verifies the frames of the
// ranges it fetches; a damaged frame in a shared range still fails the
// read of its handle, with the error a read without prefetch gives, and
// the other handles of the range read whole.
func TestReaderPrefetchedDamagedFrame(t *testing.T) {
	b, _, _, hs := manyWritersOneObject(t)
	e := hs[7].Entries[0]
	data, _ := b.ObjectBytes(e.Object)
	data = append([]byte(nil), data...)
	data[e.Offset+e.Length/2] ^= 0x08
	b.SetObjectBytes(e.Object, data)

	readAll := func(r *dstl.Reader, h dstl.Handle) ([]string, error) {
		var got []string
		err := r.Read(context.Background(), h, func(c dstl.Change) error {
			got = append(got, string(c.Data))
			return nil
		})
		return got, err
	}
	plain, _ := dstl.NewReader(b, dstl.KeyGroupRange{Start: 0, End: 127}, dstl.ReaderOptions{})
	defer plain.Close()
	_, wantErr := readAll(plain, hs[7])
	if !errors.Is(wantErr, format.ErrChecksum) {
		t.Fatalf("read without prefetch: %v, want a checksum error", wantErr)
	}

	r, _ := dstl.NewReader(b, dstl.KeyGroupRange{Start: 0, End: 127}, dstl.ReaderOptions{})
	defer r.Close()
	if err := r.Prefetch(context.Background(), hs...); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(r, hs[7])
	if len(got) != 0 || err == nil || err.Error() != wantErr.Error() || !errors.Is(err, format.ErrChecksum) {
		t.Fatalf("read after prefetch: %d changes, %v; want none and %v", len(got), err, wantErr)
	}
	var fe *format.Error
	if !errors.As(err, &fe) || fe.Object != e.Object || fe.Offset != e.Offset+e.Length-format.FrameCRCSize {
		t.Fatalf("error %v does not name the frame's checksum in %s at %d", err, e.Object, e.Offset+e.Length-format.FrameCRCSize)
	}
	for _, i := range []int{6, 8} {
		got, err := readAll(r, hs[i])
		if err != nil {
			t.Fatalf("handle %d: %v", i, err)
		}
		want := strings.Repeat(string(rune('a'+i%26)), 100)
		if len(got) != 100 || got[0] != want || got[99] != want {
			t.Fatalf("handle %d: %d changes, first %q", i, len(got), got[0])
		}
	}
	if st := r.Stats(); st.Requests != 1 {
		t.Fatalf("%d requests, want 1 (the prefetch)", st.Requests)
	}
}

// TestReaderHeldGetsAreNoRequests: reads held by the bucket after an
// unanswered one (backends.Policy.UnansweredHold) send no request, and
// the reader does not count them: the unanswered read is its one request.
func TestReaderHeldGetsAreNoRequests(t *testing.T) {
	var cs *dstltest.ConditionStore
	dstltest.NewConditionStore(dstltest.HonourConditions, 1<<20).As(&cs)
	d := &silentOpens{ConditionStore: cs}
	b := backends.New("silent", d, backends.Policy{Timeout: 50 * time.Millisecond, ResponseTimeout: 50 * time.Millisecond,
		MaxAttempts: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, UnansweredHold: time.Minute})
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h := persist(t, w, 0, 1)
	r, err := dstl.NewReader(b, w.KeyGroups(), dstl.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d.silent.Store(true)
	for i := range 3 {
		err := r.Read(t.Context(), h, func(dstl.Change) error { return nil })
		if held := errors.Is(err, dstl.ErrUnavailable); err == nil || held != (i > 0) {
			t.Fatalf("read %d: %v; want the first unanswered, the others held", i, err)
		}
	}
	if got, opens := r.Stats().Requests, d.opens.Load(); got != 1 || opens != 1 {
		t.Fatalf("the reader counted %d requests, the store saw %d; want 1 (held reads send none)", got, opens)
	}
}

// silentOpens is a ConditionStore whose reads, once silent, go unanswered
// until their context ends.
type silentOpens struct {
	*dstltest.ConditionStore
	silent atomic.Bool
	opens  atomic.Int64
}

func (s *silentOpens) Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	s.opens.Add(1)
	if s.silent.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.ConditionStore.Open(ctx, name, offset, length)
}
