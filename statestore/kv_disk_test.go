package statestore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// pickyCodec encodes any string but decodes none that starts with "bad":
// the way a codec changed between two versions of a program fails.
type pickyCodec struct{ statestore.StringCodec }

var errPicky = errors.New("picky: will not decode")

func (pickyCodec) Decode(b []byte) (string, error) {
	if strings.HasPrefix(string(b), "bad") {
		return "", errPicky
	}
	return string(b), nil
}

// diskCheckpointer returns a checkpointer whose stores are on disk.
func diskCheckpointer(t *testing.T) *statestore.Checkpointer {
	t.Helper()
	cp, err := statestore.NewCheckpointer(newStorage(t, dstltest.NewBackend()), statestore.Config{
		Operator: "op", KeyGroups: allGroups, MaxParallelism: maxP, Dir: t.TempDir(),
		MaterializeSize: -1, MaterializeInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return cp
}

func TestKeyValueDiskAttachRefusesAUsedStore(t *testing.T) {
	cp := diskCheckpointer(t)
	for _, tc := range []struct {
		name string
		use  func(s *statestore.KeyValueStore[string, string])
	}{
		{"entries", func(s *statestore.KeyValueStore[string, string]) {
			s.SetLogging(false)
			_ = s.Put("a", "1")
		}},
		{"buffered", func(s *statestore.KeyValueStore[string, string]) { _ = s.Delete("a") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := statestore.NewKeyValueStore("kv-"+tc.name, cp.Log(), statestore.StringCodec{}, statestore.StringCodec{},
				statestore.WithMaxParallelism(maxP))
			if err != nil {
				t.Fatal(err)
			}
			tc.use(s)
			err = cp.Register(s)
			if err == nil || !strings.Contains(err.Error(), `"kv-`+tc.name+`"`) {
				t.Fatalf("Register of a used store: %v, want an error naming the store", err)
			}
		})
	}
}

// A value the codec no longer decodes: Get fails, a loop stops at it, and
// the store keeps the error, which fails Flush until a restore.
func TestKeyValueDiskDecodeErrorStopsLoopAndFlush(t *testing.T) {
	cp := diskCheckpointer(t)
	s, err := statestore.NewKeyValueStore("kv", cp.Log(), statestore.StringCodec{}, pickyCodec{}, statestore.WithMaxParallelism(maxP))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Register(s); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"a", "1"}, {"b", "bad"}, {"c", "3"}} {
		if err := s.Put(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Get("b"); !errors.Is(err, errPicky) {
		t.Errorf("Get of an undecodable value: %v, want %v", err, errPicky)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Err before any loop: %v", err)
	}
	var keys []string
	for k := range s.All() {
		keys = append(keys, k)
	}
	if strings.Join(keys, ",") != "a" {
		t.Errorf("the loop yielded %q, want it to stop at b", keys)
	}
	if err := s.Err(); !errors.Is(err, errPicky) {
		t.Errorf("Err after the loop: %v, want %v", err, errPicky)
	}
	if err := s.Flush(t.Context()); !errors.Is(err, errPicky) {
		t.Errorf("Flush after the loop stopped: %v, want %v", err, errPicky)
	}
	if n := len(s.TakeChanges()); n != 3 {
		t.Errorf("%d changes still buffered, want 3", n)
	}
	// A restore (which clears the store first) is the way back.
	s.Clear()
	if err := s.Err(); err != nil {
		t.Errorf("Err after Clear: %v", err)
	}
	if err := s.Put("d", "4"); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(t.Context()); err != nil {
		t.Errorf("Flush after Clear: %v", err)
	}
}

func TestKeyValueDiskClosed(t *testing.T) {
	cp := diskCheckpointer(t)
	s, err := statestore.NewKeyValueStore("kv", cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, statestore.WithMaxParallelism(maxP))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Register(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("a", "1"); err != nil {
		t.Fatal(err)
	}
	seq := s.All() // made before Close, run after it
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for k := range seq {
		t.Errorf("a loop over a closed store yielded %q", k)
	}
	if err := s.Err(); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("Err after a loop over a closed store: %v", err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("Len of a closed store %d", n)
	}
	if _, err := s.Snapshot(); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("Snapshot of a closed store: %v", err)
	}
}

// TestDiskClearAfterClose: Clear of a disk-backed store whose checkpointer
// (and so its database) is closed does nothing and does not panic, for
// every kind.
func TestDiskClearAfterClose(t *testing.T) {
	o := newOperator(t, newStorage(t, dstltest.NewBackend()), "op-0", allGroups, statestore.Config{Dir: t.TempDir()})
	newWorkload(1).run(t, o, 50)
	if err := o.cp.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []statestore.Store{o.kv, o.win, o.ver} {
		s.Clear()
	}
}
