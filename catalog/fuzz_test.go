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
		Restored: []string{"job/_catalog/g00000000000000000002/part-00000000000000000005-00000"}, RestoredCheckpoint: 5, FirstCheckpoint: 9,
		Created: time.Unix(1700000000, 0).UTC()}
	part := &Part{Generation: 3, Checkpoint: 9, Instance: 1, KeyGroups: dstl.KeyGroupRange{Start: 4, End: 7}, State: []byte("state"),
		Metadata: map[string]string{"offset": "42"}, Objects: []string{"job/x.dstl"}, Created: time.Unix(1700000000, 0).UTC()}
	for _, r := range []struct {
		kind byte
		v    any
	}{{kindGeneration, gen}, {kindPart, part}, {kindClaim, claim{Owner: "o", Created: time.Unix(1, 0).UTC()}}} {
		data, err := encode(r.kind, r.v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, r.kind)
	}
	f.Add([]byte("DSTC"), byte(kindPart))
	f.Fuzz(func(t *testing.T, data []byte, kind byte) {
		var err error
		switch kind % 3 {
		case 0:
			var g Generation
			if err = decode("x", data, kindGeneration, &g); err == nil {
				err = g.validate("x", g.Number)
				roundTrip(t, kindGeneration, &g, &Generation{})
			}
		case 1:
			var p Part
			if err = decode("x", data, kindPart, &p); err == nil {
				err = p.validate("x", p.Generation, p.Checkpoint, p.Instance, nil)
				roundTrip(t, kindPart, &p, &Part{})
			}
		default:
			var c claim
			if err = decode("x", data, kindClaim, &c); err == nil {
				roundTrip(t, kindClaim, &c, &claim{})
			}
		}
		_ = err
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
		{"kind", good, kindPart, "kind"},
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
