package dstltest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstltest"
)

// TestConditionStoreHonouring: a ConditionStore that honours conditions
// meets the whole backend contract, its large objects going up as
// multipart uploads.
func TestConditionStoreHonouring(t *testing.T) {
	const partSize = 64 << 10
	conformance.TestBackend(t, func(*testing.T) backends.Backend {
		return dstltest.NewConditionStore(dstltest.HonourConditions, partSize)
	}, conformance.WithPartSize(partSize))
}

// TestConditionStorePaths: which path replaces an existing object, by mode.
func TestConditionStorePaths(t *testing.T) {
	const partSize = 16
	small, large := "small", strings.Repeat("large", 10)
	for _, tc := range []struct {
		c                     dstltest.Conditions
		singleOK, multipartOK bool
	}{
		{dstltest.HonourConditions, false, false},
		{dstltest.IgnoreOnMultipart, false, true},
		{dstltest.IgnoreConditions, true, true},
	} {
		b := dstltest.NewConditionStore(tc.c, partSize)
		conformance.Put(t, b, "x", "first")
		err := b.Put(t.Context(), "x", strings.NewReader(small), int64(len(small)))
		if got := err == nil; got != tc.singleOK || !got && !errors.Is(err, backends.ErrExists) {
			t.Errorf("mode %d: single Put over an existing object: %v", tc.c, err)
		}
		err = b.Put(t.Context(), "x", strings.NewReader(large), int64(len(large)))
		if got := err == nil; got != tc.multipartOK || !got && !errors.Is(err, backends.ErrExists) {
			t.Errorf("mode %d: multipart Put over an existing object: %v", tc.c, err)
		}
		var d *dstltest.ConditionStore
		if !b.As(&d) {
			t.Fatal("As(**ConditionStore) = false")
		}
		if p := d.Puts(); p["single"] != 2 || p["multipart"] != 1 {
			t.Errorf("mode %d: Puts by path %v, want 2 single and 1 multipart", tc.c, p)
		}
		b.Close()
	}
}
