package dstl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// TestLocalRecoveryNotGiven: local recovery enabled for a storage given
// no local recovery (dstl.WithLocalRecovery) is an error saying what to
// pass.
func TestLocalRecoveryNotGiven(t *testing.T) {
	cfg := testConfig()
	cfg.LocalRecoveryEnabled = true
	cfg.LocalRecoveryDir = t.TempDir()
	_, err := dstl.New(cfg, dstltest.NewBackend())
	if !errors.Is(err, dstl.ErrInvalidConfig) || !strings.Contains(err.Error(), "dstl.WithLocalRecovery") || !strings.Contains(err.Error(), "local-recovery.enabled") {
		t.Fatalf("dstl.New with local recovery enabled and not given: %v", err)
	}
}

// TestReadPreferLocalWithoutLocalRecovery: a storage without local copies
// reads a pair from the backend and says so.
func TestReadPreferLocalWithoutLocalRecovery(t *testing.T) {
	s := newStorage(t, dstltest.NewBackend(), testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "a")
	f, err := w.Persist(t.Context(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Local != nil {
		t.Fatalf("a storage without local recovery returned a local handle")
	}
	local := res.Remote // as if a local handle had been kept elsewhere
	r, err := s.NewReader(res.Remote.KeyGroups)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	rep, err := r.ReadPreferLocal(t.Context(), res.Remote, &local, func(c dstl.Change) error {
		got = append(got, string(c.Data))
		return nil
	})
	if err != nil || len(got) != 1 || got[0] != "a" {
		t.Fatalf("ReadPreferLocal = %q, %v", got, err)
	}
	if rep.RemoteSets != 1 || rep.LocalSets != 0 || rep.RemoteBytes != res.Remote.StoredSize {
		t.Errorf("report %+v, want one set read remotely", rep)
	}
}
