package dstl

import (
	"slices"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/uploader"
)

func TestWrittenBefore(t *testing.T) {
	name, err := objname.NewLog("job/", 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tests := []struct {
		prefix, name string
		t            time.Time
		want         bool
	}{
		{"job/", name, now.Add(time.Second), true},
		{"job/", name, now.Add(-time.Second), false},
		{"job/", "job/0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, true},  // 2024
		{"job/", "job/0190a6f2-7c1e-4abc-8def-0123456789ab.dstl", now, false}, // UUIDv4: not ours
		{"job/", "job/not-a-uuid.dstl", now, false},
		{"job/", "job/0190a6f2-7c1e-7abc-8def-0123456789ab.snap", now, false},
		{"job/", "job/statestore/op/0190a6f2-7c1e-7abc-8def-0123456789ab.snap", now, false},
		{"job/", "job/x/0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, false}, // no name of the storage's
		{"", "0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, true},
		{"", "job/0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, false}, // another job's
	}
	for _, tt := range tests {
		if got := writtenBefore(tt.prefix, tt.name, tt.t); got != tt.want {
			t.Errorf("writtenBefore(%q, %q, %v) = %v, want %v", tt.prefix, tt.name, tt.t, got, tt.want)
		}
	}
}

// TestLocalCopies: the rules by which local copies are kept and dropped.
func TestLocalCopies(t *testing.T) {
	a, b := LogID{1}, LogID{2}
	// names returns the backend names of the copies to delete, checking
	// that each names its local copy.
	names := func(t *testing.T, drop []uploader.StoredObject) []string {
		t.Helper()
		var out []string
		for _, o := range drop {
			if o.LocalName != "local-"+o.Name || o.Size != 10 {
				t.Errorf("dropped %+v, want local name local-%s and size 10", o, o.Name)
			}
			out = append(out, o.Name)
		}
		return out
	}
	tests := []struct {
		name string
		run  func(l *localCopies) (steps [][]uploader.StoredObject)
		want [][]string // the copies each step drops
	}{
		{"the last live set drops an unclaimed copy", func(l *localCopies) [][]uploader.StoredObject {
			l.add("o", "local-o", 10, 2)
			return [][]uploader.StoredObject{l.released("o"), l.released("o"), l.released("o")}
		}, [][]string{nil, {"o"}, nil}},
		{"a claim keeps the copy until a newer checkpoint of its writer is confirmed", func(l *localCopies) [][]uploader.StoredObject {
			l.add("o", "local-o", 10, 1)
			if !l.claim(a, []string{"o"}, 1) {
				panic("claim of a tracked copy refused")
			}
			return [][]uploader.StoredObject{l.released("o"), l.confirmed(a, 1), l.confirmed(b, 9), l.confirmed(a, 2)}
		}, [][]string{nil, nil, nil, {"o"}}},
		{"a claim of a missing copy claims nothing", func(l *localCopies) [][]uploader.StoredObject {
			l.add("o", "local-o", 10, 1)
			if l.claim(a, []string{"o", "gone"}, 1) {
				panic("claim of a missing copy accepted")
			}
			return [][]uploader.StoredObject{l.released("o")}
		}, [][]string{{"o"}}},
		{"an abort ends the claims of its checkpoint only", func(l *localCopies) [][]uploader.StoredObject {
			l.add("o", "local-o", 10, 1)
			l.claim(a, []string{"o"}, 1)
			l.claim(a, []string{"o"}, 2)
			return [][]uploader.StoredObject{l.released("o"), l.aborted(a, 2), l.aborted(a, 1)}
		}, [][]string{nil, nil, {"o"}}},
		{"a closed writer's claims end at any writer's newer checkpoint", func(l *localCopies) [][]uploader.StoredObject {
			l.add("o", "local-o", 10, 1)
			l.claim(a, []string{"o"}, 3)
			steps := [][]uploader.StoredObject{l.released("o"), l.confirmed(b, 5)}
			l.writerClosed(a)
			return append(steps, l.confirmed(b, 3), l.confirmed(b, 4))
		}, [][]string{nil, nil, nil, {"o"}}},
		{"a restored copy stays until the first confirmed checkpoint", func(l *localCopies) [][]uploader.StoredObject {
			if !l.keepRestored("o", "local-o", 10) || l.keepRestored("o", "local-o", 10) {
				panic("keepRestored: want true, then false for a tracked copy")
			}
			if n := l.names(); len(n) != 1 || !n["local-o"] {
				panic("names do not list the restored copy")
			}
			return [][]uploader.StoredObject{l.aborted(b, 0), l.confirmed(b, 0)}
		}, [][]string{nil, {"o"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLocalCopies()
			steps := tt.run(&l)
			if len(steps) != len(tt.want) {
				t.Fatalf("%d steps, want %d", len(steps), len(tt.want))
			}
			for i, drop := range steps {
				if got := names(t, drop); !slices.Equal(got, tt.want[i]) {
					t.Errorf("step %d dropped %q, want %q", i, got, tt.want[i])
				}
			}
			if len(l.copies) != 0 || len(l.closed) != 0 {
				t.Errorf("left tracked: %d copies, %d closed writers", len(l.copies), len(l.closed))
			}
		})
	}
}
