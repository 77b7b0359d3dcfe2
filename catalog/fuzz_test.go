package catalog

import (
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
)

// FuzzDecode: decoding any bytes as a catalog record either fails with
// ErrDamaged or yields a record that encodes back to a record equal to
// it; it never panics.
func FuzzDecode(f *testing.F) {
	gen := &Generation{Number: 3, Mode: Aligned, MaxParallelism: 8, KeyGroups: []dstl.KeyGroupRange{{Start: 0, End: 3}, {Start: 4, End: 7}},
		Processes: 1, Restored: []Restored{{Object: "job/_catalog/v2/00000000000000000002/00000000000000000005/00000",
			KeyGroups: []dstl.KeyGroupRange{{Start: 0, End: 3}, {Start: 4, End: 7}}}}, RestoredCheckpoint: 5, FirstCheckpoint: 9,
		Created: time.Unix(1700000000, 0).UTC()}
	c := &commit{Generation: 3, Checkpoint: 9, Process: 0, HoldFrom: 10, Complete: 8, Created: time.Unix(1700000000, 0).UTC(),
		Parts: []*Part{{Instance: 0, KeyGroups: dstl.KeyGroupRange{Start: 0, End: 3}, State: []byte("state"),
			Metadata: map[string]string{"offset": "42"}, Objects: []string{"job/x.dstl"}},
			{Instance: 1, KeyGroups: dstl.KeyGroupRange{Start: 4, End: 7}, State: []byte("other"), Objects: []string{}}}}
	for _, r := range []struct {
		kind byte
		v    any
	}{{kindGeneration, gen}, {kindCommit, c}, {kindClaim, claim{Owner: "o", Created: time.Unix(1, 0).UTC()}},
		{kindFence, fence{Next: 4, Owner: "o", Created: time.Unix(1, 0).UTC()}}} {
		data, err := encode(r.kind, r.v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, r.kind)
	}
	f.Add([]byte("DSTC"), byte(kindCommit))
	f.Fuzz(func(t *testing.T, data []byte, kind byte) {
		switch kind % 4 {
		case 0:
			var g Generation
			if decode("x", data, kindGeneration, &g) == nil {
				_ = g.validate("x", g.Number)
				roundTrip(t, kindGeneration, &g, &Generation{})
			}
		case 1:
			var c commit
			if decode("x", data, kindCommit, &c) == nil {
				if c.validate("x", c.Generation, c.Checkpoint, c.Process, nil) == nil {
					roundTrip(t, kindCommit, &c, &commit{})
				}
				// Validation against a generation never panics, whatever
				// the instances the commit names.
				_ = c.validate("x", c.Generation, c.Checkpoint, c.Process, gen)
			}
		case 2:
			var c claim
			if decode("x", data, kindClaim, &c) == nil {
				roundTrip(t, kindClaim, &c, &claim{})
			}
		default:
			var fe fence
			if decode("x", data, kindFence, &fe) == nil {
				roundTrip(t, kindFence, &fe, &fence{})
			}
		}
	})
}

// roundTrip checks that v encodes to a record that decodes.
func roundTrip(t *testing.T, kind byte, v, into any) {
	t.Helper()
	data, err := encode(kind, v)
	if err != nil {
		t.Fatalf("encode of a decoded record: %v", err)
	}
	if err := decode("x", data, kind, into); err != nil {
		t.Fatalf("decode of an encoded record: %v", err)
	}
}

// TestDecodeErrors: each kind of damage is ErrDamaged naming the object.
func TestDecodeErrors(t *testing.T) {
	good, err := encode(kindClaim, claim{Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte { b := append([]byte(nil), good...); b[i] ^= 1; return b }
	for _, tc := range []struct {
		name string
		data []byte
		kind byte
		want string
	}{
		{"short", good[:6], kindClaim, "too short"},
		{"magic", flip(0), kindClaim, "bad magic"},
		{"version", flip(4), kindClaim, "version"},
		{"kind", good, kindCommit, "kind"},
		{"checksum", flip(10), kindClaim, "checksum"},
		{"trailing", func() []byte { b, _ := encode(kindClaim, []any{1}); return b }(), kindClaim, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c claim
			err := decode("job/_catalog/x", tc.data, tc.kind, &c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"job/_catalog/x"`) {
				t.Fatalf("decode = %v, want an error naming the object and saying %q", err, tc.want)
			}
		})
	}
}
