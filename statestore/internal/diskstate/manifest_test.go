package diskstate

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
)

func sampleManifest() *Manifest {
	return &Manifest{
		Operator:       "counts",
		KeyGroups:      dstl.KeyGroupRange{Start: 4, End: 9},
		MaxParallelism: 128,
		From:           1 << 40,
		Cursor:         []byte{0, 6, 1, 'x'},
		Stores: []StoreMeta{
			{Name: "counts", Kind: "kv", KindVersion: 1},
			{Name: "windows", Kind: "window", KindVersion: 2, Meta: []byte{1, 2, 3}},
		},
		Files: []File{
			{Object: "state/a.sst", Size: 1234, CRC: 0xdeadbeef, Kind: Segment, Lo: []byte{0, 4}, Hi: []byte{0, 10}},
			{Object: "state/b.sst", Size: 99, CRC: 7, Kind: Delta},
			{Object: "state/c.sst", Size: 0, CRC: 0, Kind: Segment, Lo: nil, Hi: []byte{0, 5}},
		},
	}
}

func TestManifestRoundTrip(t *testing.T) {
	for _, m := range []*Manifest{sampleManifest(), {Operator: "empty"}} {
		data, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeManifest("m", data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("decoded %+v, want %+v", got, m)
		}
	}
	if got, want := sampleManifest().Objects(), []string{"state/a.sst", "state/b.sst", "state/c.sst"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Objects() = %v, want %v", got, want)
	}
}

// reseal replaces the checksum at the end of data.
func reseal(data []byte) []byte {
	body := data[:len(data)-4]
	return binary.LittleEndian.AppendUint32(body[:len(body):len(body)], crc32.Checksum(body, castagnoli))
}

func TestDecodeManifestRejects(t *testing.T) {
	good := sampleManifest().encode()
	body := good[:len(good)-4]
	with := func(f func(m *Manifest)) []byte {
		m := sampleManifest()
		f(m)
		return m.encode()
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"short", []byte("DSSM\x01"), "truncated"},
		{"bad magic", append([]byte("DSSX"), good[4:]...), "bad magic"},
		{"bad magic short", []byte("XSSM\x01"), "bad magic"},
		{"other version", reseal(append([]byte("DSSM\x02"), good[5:]...)), "version 2"},
		{"checksum", append(append([]byte{}, body...), 0, 0, 0, 0), "checksum"},
		{"flipped byte", func() []byte { d := append([]byte{}, good...); d[10] ^= 0x40; return d }(), "checksum"},
		{"truncated", reseal(append(append([]byte{}, body[:len(body)-9]...), 0, 0, 0, 0)), "truncated"},
		{"truncated CRC", reseal(append(append([]byte{}, body[:len(body)-4]...), 0, 0, 0, 0)), "truncated"},
		{"trailing bytes", reseal(append(append([]byte{}, body...), 1, 2, 3, 0, 0, 0, 0)), "3 trailing bytes"},
		{"inverted key groups", with(func(m *Manifest) { m.KeyGroups = dstl.KeyGroupRange{Start: 9, End: 4} }), "invalid key-group range"},
		{"negative key group", with(func(m *Manifest) { m.KeyGroups.Start = -1 }), "invalid key-group range"},
		{"key groups past max parallelism", with(func(m *Manifest) { m.MaxParallelism = 8 }), "maximum parallelism"},
		{"unknown file kind", with(func(m *Manifest) { m.Files[1].Kind = 7 }), "unknown kind 7"},
		{"segment lo = hi", with(func(m *Manifest) { m.Files[0].Hi = m.Files[0].Lo }), "is empty"},
		{"segment lo > hi", with(func(m *Manifest) { m.Files[0].Lo, m.Files[0].Hi = m.Files[0].Hi, m.Files[0].Lo }), "is empty"},
		{"negative size", with(func(m *Manifest) { m.Files[1].Size = -5 }), "negative size"},
		{"writer outside the key groups", with(func(m *Manifest) { m.Files[0].Writer = dstl.KeyGroupRange{Start: 0, End: m.MaxParallelism} }), "writer's key groups"},
		{"writer range reversed", with(func(m *Manifest) { m.Files[0].Writer = dstl.KeyGroupRange{Start: 5, End: 2} }), "writer's key groups"},
		{"bad object name", with(func(m *Manifest) { m.Files[1].Object = "../x" }), "invalid object name"},
		{"huge count", reseal(append(append(append([]byte{}, good[:5]...), 0xff, 0xff, 0xff, 0xff, 0x0f), 0, 0, 0, 0)), "past the end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeManifest("state/m-17", tt.data)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v, want one wrapping ErrFormat", err)
			}
			if !strings.Contains(err.Error(), "state/m-17") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to name the object and say %q", err, tt.want)
			}
		})
	}
	// What DecodeManifest rejects, MarshalBinary refuses to write.
	for _, f := range []func(m *Manifest){
		func(m *Manifest) { m.KeyGroups.End = dstl.MaxKeyGroup + 1 },
		func(m *Manifest) { m.Files[0].Kind = 0 },
		func(m *Manifest) { m.Files[0].Lo = m.Files[0].Hi },
		func(m *Manifest) { m.Files[1].Lo = []byte{1} },
	} {
		m := sampleManifest()
		f(m)
		if _, err := m.MarshalBinary(); err == nil {
			t.Errorf("MarshalBinary of a bad manifest %+v: no error", m)
		}
	}
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add(sampleManifest().encode())
	f.Add((&Manifest{Operator: "x"}).encode())
	f.Add([]byte("DSSM\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest("fuzz", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		again, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		m2, err := DecodeManifest("fuzz", again)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip: %+v, then %+v", m, m2)
		}
	})
}
