package backends_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/dstltest"
)

// TestVerifyCreateOnly: the check refuses a store that ignores create-only
// on either path, naming the path, and passes one that honours it; the
// probe object is gone afterwards.
func TestVerifyCreateOnly(t *testing.T) {
	for _, tc := range []struct {
		name       string
		conditions dstltest.Conditions
		path       string // in the error, "" when the check passes
	}{
		{"honoured", dstltest.HonourConditions, ""},
		{"ignored on multipart", dstltest.IgnoreOnMultipart, "the completion of a multipart upload"},
		{"ignored", dstltest.IgnoreConditions, "a single-request put"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewConditionStore(tc.conditions, 1<<20)
			defer b.Close()
			err := backends.VerifyCreateOnly(t.Context(), b, "job/.create-only-probe")
			switch {
			case tc.path == "" && err != nil:
				t.Fatalf("VerifyCreateOnly: %v", err)
			case tc.path != "" && !errors.Is(err, backends.ErrCreateOnlyIgnored):
				t.Fatalf("VerifyCreateOnly: %v, want ErrCreateOnlyIgnored", err)
			case tc.path != "" && (!strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "conditions at memory store") ||
				!strings.Contains(err.Error(), "release of the store")):
				t.Fatalf("VerifyCreateOnly: %v; want the store, %q and what to do named", err, tc.path)
			}
			var d *dstltest.ConditionStore
			b.As(&d)
			if p := d.Puts(); p["single"] != 2 || p["multipart"] != map[bool]int{true: 0, false: 1}[tc.conditions == dstltest.IgnoreConditions] {
				t.Errorf("Puts by path %v", p)
			}
			if objs := listNames(t, b); len(objs) != 0 {
				t.Errorf("objects left after the check: %q", objs)
			}
		})
	}
}

// TestVerifyCreateOnlyOncePerBucket: the verdict is kept in the Bucket,
// also when asked through a wrapper, whose requests the probe goes
// through; an error that is no verdict is asked again.
func TestVerifyCreateOnlyOncePerBucket(t *testing.T) {
	for _, conditions := range []dstltest.Conditions{dstltest.HonourConditions, dstltest.IgnoreConditions} {
		b := dstltest.NewConditionStore(conditions, 1<<20)
		c := counting.New(b)
		first := backends.VerifyCreateOnly(t.Context(), c, "p1")
		puts := c.Stats().Puts
		if puts != 2 { // the multipart put goes to the Bucket, which has the path
			t.Errorf("conditions %d: the probe sent %d Puts through the wrapper, want 2", conditions, puts)
		}
		for range 3 {
			if err := backends.VerifyCreateOnly(t.Context(), c, "p2"); !errors.Is(err, first) && err != first {
				t.Errorf("conditions %d: second check %v, first %v", conditions, err, first)
			}
			if err := b.VerifyCreateOnly(t.Context(), "p3"); err != first {
				t.Errorf("conditions %d: the Bucket's own check %v, first %v", conditions, err, first)
			}
		}
		if got := c.Stats().Puts; got != puts {
			t.Errorf("conditions %d: later checks sent %d more Puts", conditions, got-puts)
		}
		b.Close()
	}

	// A check that fails for want of an answer is no verdict.
	b := dstltest.NewConditionStore(dstltest.HonourConditions, 1<<20)
	defer b.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := backends.VerifyCreateOnly(ctx, b, "p"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled check: %v", err)
	}
	if err := backends.VerifyCreateOnly(t.Context(), b, "p"); err != nil {
		t.Fatalf("check after a cancelled one: %v", err)
	}
}

// TestPutMultipart: the multipart path of a driver that has one, checked
// like Put; a driver without one says so.
func TestPutMultipart(t *testing.T) {
	b := dstltest.NewConditionStore(dstltest.HonourConditions, 1<<20)
	defer b.Close()
	if err := b.PutMultipart(t.Context(), "a", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	if err := b.PutMultipart(t.Context(), "a", strings.NewReader("abc"), 3); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("second PutMultipart: %v, want ErrExists", err)
	}
	if err := b.PutMultipart(t.Context(), "b", strings.NewReader(""), 0); err == nil {
		t.Fatal("PutMultipart of 0 bytes, below the driver's minimum: no error")
	}
	if err := b.PutMultipart(t.Context(), "a//b", strings.NewReader("abc"), 3); !errors.Is(err, backends.ErrInvalidName) {
		t.Fatalf("PutMultipart of an invalid name: %v", err)
	}
	n := backends.New("naive", newNaive(), backends.NoRetries)
	if err := n.PutMultipart(t.Context(), "a", strings.NewReader("abc"), 3); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("PutMultipart of a driver without the path: %v, want ErrUnsupported", err)
	}
	if err := backends.VerifyCreateOnly(t.Context(), n, "probe"); err != nil {
		t.Fatalf("VerifyCreateOnly of a driver with one path: %v", err)
	}
}

func listNames(t *testing.T, b backends.Backend) []string {
	t.Helper()
	var names []string
	if err := b.List(t.Context(), "", func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestVerifyCreateOnlyEmbedded: a backend package's type that embeds the
// Bucket, wrapped by counting, keeps its verdict in the Bucket.
func TestVerifyCreateOnlyEmbedded(t *testing.T) {
	type pkgBackend struct{ *backends.Bucket }
	b := dstltest.NewConditionStore(dstltest.HonourConditions, 1<<20)
	defer b.Close()
	c := counting.New(pkgBackend{b})
	for range 3 {
		if err := backends.VerifyCreateOnly(t.Context(), c, "probe"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats().Puts; got != 2 {
		t.Fatalf("three checks sent %d Puts through the wrapper, want one check's 2", got)
	}
}
