package collect

import (
	"maps"
	"slices"

	"github.com/dstlgo/dstl/dstl"
)

// Keep is what a collection must never delete: the objects that kept
// handles reference (the checkpoints that may still be restored), and the
// operators whose snapshots those handles account for. The zero Keep
// references nothing and is ready to use; a Keep is not safe for
// concurrent changes, and must not change while [Run] reads it.
//
// A Keep takes object names, so that this package depends on no state
// store. A state store's checkpoint handle is kept by its objects and its
// operator:
//
//	keep.AddOperator(cp.Operator)
//	keep.AddObject(cp.Objects()...)
//
// (see [github.com/dstlgo/dstl/statestore.CheckpointHandle.Objects]).
type Keep struct {
	objects   map[string]struct{}
	operators map[string]struct{}
}

// AddObject keeps the objects of the given names (full object names,
// under the job's prefix).
func (k *Keep) AddObject(names ...string) {
	if k.objects == nil {
		k.objects = map[string]struct{}{}
	}
	for _, n := range names {
		k.objects[n] = struct{}{}
	}
}

// AddHandle keeps the objects of a log handle: the object of each of its
// entries.
func (k *Keep) AddHandle(h dstl.Handle) {
	for _, e := range h.Entries {
		k.AddObject(e.Object)
	}
}

// AddOperator says that the kept objects account for every snapshot of
// operator that may still be restored, so that a collection with
// [Snapshots] among its kinds may delete the operator's other snapshots
// (unless [Options.AllOperators] says so of every operator, a collection
// deletes the snapshots of the operators added here only).
func (k *Keep) AddOperator(operator string) {
	if k.operators == nil {
		k.operators = map[string]struct{}{}
	}
	k.operators[operator] = struct{}{}
}

// Has reports whether the object of the name is kept. A nil Keep keeps
// nothing.
func (k *Keep) Has(name string) bool {
	if k == nil {
		return false
	}
	_, ok := k.objects[name]
	return ok
}

// HasOperator reports whether operator was added by [Keep.AddOperator].
func (k *Keep) HasOperator(operator string) bool {
	if k == nil {
		return false
	}
	_, ok := k.operators[operator]
	return ok
}

// Len returns the number of kept objects.
func (k *Keep) Len() int {
	if k == nil {
		return 0
	}
	return len(k.objects)
}

// Objects returns the names of the kept objects, sorted.
func (k *Keep) Objects() []string {
	if k == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(k.objects))
}

// Operators returns the operators added by [Keep.AddOperator], sorted.
func (k *Keep) Operators() []string {
	if k == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(k.operators))
}
