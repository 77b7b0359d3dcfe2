package catalogv1

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/dstlgo/dstl/dstl"
)

// ErrDamaged is wrapped by the error about a catalog object that does not
// decode: bad magic, unknown version or kind, a checksum mismatch, fields
// that do not parse or contradict the object's name. The error names the
// object.
var ErrDamaged = errors.New("catalog: damaged catalog object")

// Version is the version of the catalog objects' encoding.
const Version = 1

// magic starts every catalog object.
const magic = "DSTC"

// The kinds of catalog records, the byte after the version.
const (
	kindGeneration = 'G'
	kindClaim      = 'C'
	kindPart       = 'P'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encode frames v, of kind, as a catalog object: magic, version, kind, the
// JSON of v, and the CRC32C of all that, 4 bytes little-endian.
func encode(kind byte, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(magic)+2+len(body)+4)
	b = append(b, magic...)
	b = append(b, Version, kind)
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// decode checks the frame of a catalog object of kind and decodes its JSON
// into v, strictly: unknown fields and trailing data are refused.
func decode(name string, data []byte, kind byte, v any) error {
	const head = len(magic) + 2
	switch {
	case len(data) < head+4:
		return fmt.Errorf("%w %q: %d bytes, too short", ErrDamaged, name, len(data))
	case string(data[:len(magic)]) != magic:
		return fmt.Errorf("%w %q: bad magic %q", ErrDamaged, name, data[:len(magic)])
	case data[len(magic)] != Version:
		return fmt.Errorf("%w %q: version %d, this build reads version %d", ErrDamaged, name, data[len(magic)], Version)
	case data[len(magic)+1] != kind:
		return fmt.Errorf("%w %q: a record of kind %q where %q was expected", ErrDamaged, name, data[len(magic)+1], kind)
	}
	end := len(data) - 4
	if got, want := crc32.Checksum(data[:end], castagnoli), binary.LittleEndian.Uint32(data[end:]); got != want {
		return fmt.Errorf("%w %q: checksum %08x, computed %08x", ErrDamaged, name, want, got)
	}
	dec := json.NewDecoder(bytes.NewReader(data[head:end]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w %q: %w", ErrDamaged, name, err)
	}
	if dec.More() {
		return fmt.Errorf("%w %q: data after the record", ErrDamaged, name)
	}
	return nil
}

// Mode says when a checkpoint is complete.
type Mode string

// The checkpoint modes.
const (
	// Aligned: checkpoint N is complete once every instance of its
	// generation committed its part of N (as in Flink).
	Aligned Mode = "aligned"
	// Independent: each instance's latest part is its latest checkpoint
	// (as in Kafka Streams); a restore takes every instance's latest part.
	Independent Mode = "independent"
)

// Generation is the record of one generation of a job: the instance set,
// the key-group assignment and the parts it restored from. A newer
// generation fences the older ones.
type Generation struct {
	// Number orders the generations of a job, from 1.
	Number int64 `json:"number"`
	// Mode is the generation's checkpoint mode.
	Mode Mode `json:"mode"`
	// MaxParallelism is the number of key groups, 0 to MaxParallelism-1.
	MaxParallelism int `json:"max_parallelism"`
	// KeyGroups holds the key-group range of each instance, by index.
	KeyGroups []dstl.KeyGroupRange `json:"key_groups"`
	// Restored lists the parts the generation restored from (names of
	// catalog objects of an older generation), empty for a first start.
	Restored []string `json:"restored"`
	// RestoredCheckpoint is the checkpoint those parts belong to in the
	// aligned mode (0 in the independent mode, or for a first start).
	RestoredCheckpoint int64 `json:"restored_checkpoint"`
	// FirstCheckpoint is the number of the generation's first checkpoint:
	// above every checkpoint number in the catalog when it started.
	FirstCheckpoint int64 `json:"first_checkpoint"`
	// Created is when the generation started, by its starter's clock.
	Created time.Time `json:"created"`
}

// Instances returns the number of instances.
func (g *Generation) Instances() int { return len(g.KeyGroups) }

// validate checks the record against its name.
func (g *Generation) validate(name string, number int64) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrDamaged, name, fmt.Sprintf(format, args...))
	}
	switch {
	case g.Number != number:
		return bad("generation %d under the name of generation %d", g.Number, number)
	case g.Mode != Aligned && g.Mode != Independent:
		return bad("mode %q", g.Mode)
	case g.MaxParallelism < 1 || g.MaxParallelism > dstl.MaxKeyGroup+1:
		return bad("max parallelism %d", g.MaxParallelism)
	case len(g.KeyGroups) < 1:
		return bad("no instance")
	case g.FirstCheckpoint < 1:
		return bad("first checkpoint %d", g.FirstCheckpoint)
	}
	if err := checkAssignment(g.KeyGroups, g.MaxParallelism); err != nil {
		return bad("%v", err)
	}
	return nil
}

// checkAssignment checks that the ranges are valid, within
// [0, maxParallelism-1], and do not overlap.
func checkAssignment(ranges []dstl.KeyGroupRange, maxParallelism int) error {
	for i, r := range ranges {
		if err := r.Validate(); err != nil || r.End >= maxParallelism {
			return fmt.Errorf("instance %d: key groups %v not within [0, %d]", i, r, maxParallelism-1)
		}
		for j := range i {
			if o := ranges[j]; r.Start <= o.End && o.Start <= r.End {
				return fmt.Errorf("instances %d and %d: key groups %v and %v overlap", j, i, o, r)
			}
		}
	}
	return nil
}

// claim is the record of an instance slot's claim.
type claim struct {
	// Owner identifies the process that claimed the slot.
	Owner string `json:"owner"`
	// Nonce is random, per claim, so that two claims never hold the same
	// bytes (see the own-write check of a put).
	Nonce string `json:"nonce"`
	// Created is when, by the owner's clock.
	Created time.Time `json:"created"`
}

// Part is one instance's part of a checkpoint.
type Part struct {
	// Name is the part's catalog object (not encoded: the name says it).
	Name string `json:"-"`
	// Generation, Checkpoint and Instance say whose part it is; they must
	// match the object's name.
	Generation int64 `json:"generation"`
	Checkpoint int64 `json:"checkpoint"`
	Instance   int   `json:"instance"`
	// KeyGroups is the instance's key-group range.
	KeyGroups dstl.KeyGroupRange `json:"key_groups"`
	// State is what the instance restores from: a statestore
	// CheckpointHandle's encoding, or dstl handles, as the user wants.
	State []byte `json:"state"`
	// Metadata is the user's, such as input offsets.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Objects names every object under the job's prefix that State refers
	// to (log and snapshot objects): the catalog keeps them while the part
	// is retained or pending, and deletes other objects.
	Objects []string `json:"objects"`
	// Created is when the part was committed, by the instance's clock.
	Created time.Time `json:"created"`
}

// validate checks the part against its name and generation.
func (p *Part) validate(name string, g, n int64, i int, gen *Generation) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrDamaged, name, fmt.Sprintf(format, args...))
	}
	switch {
	case p.Generation != g || p.Checkpoint != n || p.Instance != i:
		return bad("part of generation %d, checkpoint %d, instance %d under the name of generation %d, checkpoint %d, instance %d",
			p.Generation, p.Checkpoint, p.Instance, g, n, i)
	case p.KeyGroups.Validate() != nil:
		return bad("key groups %v", p.KeyGroups)
	case gen != nil && (i >= len(gen.KeyGroups) || p.KeyGroups != gen.KeyGroups[i]):
		return bad("key groups %v, not those of instance %d in generation %d", p.KeyGroups, i, g)
	}
	for _, o := range p.Objects {
		if o == "" {
			return bad("an empty object name")
		}
	}
	return nil
}
