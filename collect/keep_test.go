package collect_test

import (
	"slices"
	"testing"

	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
)

// TestKeep: a Keep holds the objects of log handles (each entry's) and of
// names given, and the operators given; the zero and the nil Keep hold
// nothing.
func TestKeep(t *testing.T) {
	logHandle := func(objects ...string) dstl.Handle {
		var h dstl.Handle
		for _, o := range objects {
			h.Entries = append(h.Entries, dstl.HandleEntry{Object: o})
		}
		return h
	}
	for _, tc := range []struct {
		name      string
		add       func(k *collect.Keep)
		objects   []string
		operators []string
	}{
		{"zero", func(*collect.Keep) {}, nil, nil},
		{"names", func(k *collect.Keep) { k.AddObject("job/b", "job/a", "job/b") }, []string{"job/a", "job/b"}, nil},
		{"log handle", func(k *collect.Keep) { k.AddHandle(logHandle("job/1.dstl", "job/2.dstl", "job/1.dstl")) },
			[]string{"job/1.dstl", "job/2.dstl"}, nil},
		{"a checkpoint's objects and operator", func(k *collect.Keep) {
			k.AddOperator("op-1")
			k.AddObject("job/statestore/op-1/s.snap", "job/statestore/op-0/f.sst", "job/3.dstl")
		}, []string{"job/3.dstl", "job/statestore/op-0/f.sst", "job/statestore/op-1/s.snap"}, []string{"op-1"}},
		{"operators", func(k *collect.Keep) { k.AddOperator("op-2"); k.AddOperator("op-0") }, nil, []string{"op-0", "op-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k collect.Keep
			tc.add(&k)
			if got := k.Objects(); !slices.Equal(got, tc.objects) || k.Len() != len(tc.objects) {
				t.Errorf("objects %q (%d), want %q", got, k.Len(), tc.objects)
			}
			for _, o := range tc.objects {
				if !k.Has(o) {
					t.Errorf("Has(%q) = false", o)
				}
			}
			if k.Has("local/copy.dstl") || k.Has("job/other") {
				t.Error("keeps what it was not given")
			}
			if got := k.Operators(); !slices.Equal(got, tc.operators) {
				t.Errorf("operators %q, want %q", got, tc.operators)
			}
			for _, op := range tc.operators {
				if !k.HasOperator(op) {
					t.Errorf("HasOperator(%q) = false", op)
				}
			}
		})
	}
	var nilKeep *collect.Keep
	if nilKeep.Has("x") || nilKeep.HasOperator("x") || nilKeep.Len() != 0 || nilKeep.Objects() != nil || nilKeep.Operators() != nil {
		t.Error("a nil Keep keeps something")
	}
}
