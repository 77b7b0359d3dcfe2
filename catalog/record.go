package catalog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/dstlgo/dstl/dstl"
)

// ErrDamaged is wrapped by the error about a catalog object that does not
// decode: bad magic, unknown version or kind, a checksum mismatch, fields
// that do not parse or contradict the object's name. The error names the
// object.
var ErrDamaged = errors.New("catalog: damaged catalog object")

// Version is the version of the catalog objects' encoding that this
// package writes: the second layout's. It reads the first layout's
// (version 1) to upgrade a job.
const Version = 2

// magic starts every catalog object.
const magic = "DSTC"

// The kinds of catalog records, the byte after the version.
const (
	kindGeneration = 'G'
	kindFence      = 'F'
	kindClaim      = 'C'
	kindCommit     = 'M'
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
		return fmt.Errorf("%w %q: version %d, where the second layout's objects are of version %d", ErrDamaged, name, data[len(magic)], Version)
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
	// Aligned: checkpoint N is complete once every process of its
	// generation committed its instances' parts of N (as in Flink).
	Aligned Mode = "aligned"
	// Independent: each instance's latest part is its latest checkpoint
	// (as in Kafka Streams); a restore takes every instance's latest part.
	Independent Mode = "independent"
)

// Generation is the record of one generation of a job: the instance set,
// the key-group assignment, the processes that run the instances and what
// the generation restored. A newer generation fences the older ones.
type Generation struct {
	// Number orders the generations of a job, from 1.
	Number int64 `json:"number"`
	// Mode is the generation's checkpoint mode.
	Mode Mode `json:"mode"`
	// MaxParallelism is the number of key groups, 0 to MaxParallelism-1.
	MaxParallelism int `json:"max_parallelism"`
	// KeyGroups holds the key-group range of each instance, by index.
	KeyGroups []dstl.KeyGroupRange `json:"key_groups"`
	// Processes is how many processes run the instances: process p runs
	// the instances of [InstancesOf](p, Processes, len(KeyGroups)).
	Processes int `json:"processes"`
	// Restored lists the objects the generation restores from (commits of
	// the generation before it, or parts of the catalog's first layout
	// after an upgrade), each with the key-group ranges of the parts it
	// holds; empty for a first start.
	Restored []Restored `json:"restored"`
	// RestoredCheckpoint is the checkpoint those parts belong to in the
	// aligned mode (0 in the independent mode, or for a first start).
	RestoredCheckpoint int64 `json:"restored_checkpoint"`
	// FirstCheckpoint is the number of the generation's first checkpoint:
	// above every checkpoint number of the generation before it when it
	// started.
	FirstCheckpoint int64 `json:"first_checkpoint"`
	// Created is when the generation started, by its starter's clock.
	Created time.Time `json:"created"`
}

// Restored is a catalog object a generation restores from.
type Restored struct {
	// Object names the catalog object: a commit, or a first-layout part.
	Object string `json:"object"`
	// KeyGroups holds the key groups the generation restores from each
	// part of the object it restores: the part's key-group range, or, in
	// the independent mode, a range within it (the key groups of a
	// process that committed nothing, where the part also covers others').
	KeyGroups []dstl.KeyGroupRange `json:"key_groups"`
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
	case g.Processes < 1 || g.Processes > len(g.KeyGroups):
		return bad("%d processes for %d instances", g.Processes, len(g.KeyGroups))
	case g.FirstCheckpoint < 1:
		return bad("first checkpoint %d", g.FirstCheckpoint)
	case g.RestoredCheckpoint < 0 || g.RestoredCheckpoint >= g.FirstCheckpoint:
		return bad("restored checkpoint %d, first checkpoint %d", g.RestoredCheckpoint, g.FirstCheckpoint)
	}
	if err := checkAssignment(g.KeyGroups, g.MaxParallelism); err != nil {
		return bad("%v", err)
	}
	var restored []dstl.KeyGroupRange
	for _, r := range g.Restored {
		if r.Object == "" || len(r.KeyGroups) == 0 {
			return bad("a restored object %q with %d key-group ranges", r.Object, len(r.KeyGroups))
		}
		restored = append(restored, r.KeyGroups...)
	}
	if err := checkAssignment(restored, g.MaxParallelism); err != nil {
		return bad("restored parts: %v", err)
	}
	return nil
}

// checkAssignment checks that the ranges are valid, within
// [0, maxParallelism-1], and do not overlap.
func checkAssignment(ranges []dstl.KeyGroupRange, maxParallelism int) error {
	for i, r := range ranges {
		if err := r.Validate(); err != nil || r.End >= maxParallelism {
			return fmt.Errorf("range %d: key groups %v not within [0, %d]", i, r, maxParallelism-1)
		}
		for j := range i {
			if o := ranges[j]; overlaps(r, o) {
				return fmt.Errorf("ranges %d and %d: key groups %v and %v overlap", j, i, o, r)
			}
		}
	}
	return nil
}

func overlaps(a, b dstl.KeyGroupRange) bool { return a.Start <= b.End && b.Start <= a.End }

// intersect returns the key groups of both a and b, and whether there are
// any.
func intersect(a, b dstl.KeyGroupRange) (dstl.KeyGroupRange, bool) {
	r := dstl.KeyGroupRange{Start: max(a.Start, b.Start), End: min(a.End, b.End)}
	return r, r.Start <= r.End
}

// fence is the record of a generation's fence: a newer generation is
// starting, and from this object on no checkpoint of the fenced
// generation is confirmed, and its members delete nothing.
type fence struct {
	// Next is the number of the generation being started.
	Next int64 `json:"next"`
	// Owner identifies the process that started it.
	Owner string `json:"owner"`
	// Created is when, by the owner's clock.
	Created time.Time `json:"created"`
}

// claim is the record of a process slot's claim.
type claim struct {
	// Owner identifies the process that claimed the slot.
	Owner string `json:"owner"`
	// Nonce is random, per claim, so that two claims never hold the same
	// bytes (see the own-write check of a put).
	Nonce string `json:"nonce"`
	// Created is when, by the owner's clock.
	Created time.Time `json:"created"`
}

// commit is the record of one process's commit of a checkpoint: the
// parts of the instances it runs.
type commit struct {
	Generation int64 `json:"generation"`
	Checkpoint int64 `json:"checkpoint"`
	Process    int   `json:"process"`
	// Parts hold the process's instances' parts, in instance order.
	Parts []*Part `json:"parts"`
	// HoldFrom is the lowest checkpoint that objects a later commit of
	// the process may reference were made for: the deletion rule keeps
	// every object made for it or later while this commit is the
	// process's latest.
	HoldFrom int64 `json:"hold_from"`
	// Complete is, in the commits of the aligned mode's leader (process
	// 0), the latest checkpoint of the generation it knew complete when
	// it wrote the commit (this commit's own checkpoint when the commit
	// completed it); 0 otherwise.
	Complete int64 `json:"complete,omitempty"`
	// Created is when the commit was made, by the process's clock.
	Created time.Time `json:"created"`
}

// Part is one instance's part of a checkpoint: what it restores from.
type Part struct {
	// Name is the catalog object that holds the part: a commit, or a
	// first-layout part (not encoded).
	Name string `json:"-"`
	// Generation and Checkpoint say whose checkpoint it is (not encoded
	// in a commit's parts: the commit says).
	Generation int64 `json:"-"`
	Checkpoint int64 `json:"-"`
	// Instance is the instance's index in its generation.
	Instance int `json:"instance"`
	// KeyGroups is the instance's key-group range. In a part a
	// generation restores ([Member.Restore]), it is the key groups to
	// restore from it, which may be fewer than State holds (see
	// [Restored]): restore only these.
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
	// Created is when the part was committed, by its process's clock (not
	// encoded in a commit's parts: the commit says).
	Created time.Time `json:"-"`
}

// validate checks a decoded commit against its name and generation (gen
// may be nil when unknown).
func (c *commit) validate(name string, g, n int64, p int, gen *Generation) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrDamaged, name, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Generation != g || c.Checkpoint != n || c.Process != p:
		return bad("commit of generation %d, checkpoint %d, process %d under the name of generation %d, checkpoint %d, process %d",
			c.Generation, c.Checkpoint, c.Process, g, n, p)
	case len(c.Parts) == 0:
		return bad("no part")
	case c.HoldFrom < 0 || c.Complete < 0 || c.Complete > n:
		return bad("hold from %d, complete %d", c.HoldFrom, c.Complete)
	}
	var want []int
	if gen != nil {
		if p >= gen.Processes {
			return bad("process %d of a generation of %d processes", p, gen.Processes)
		}
		lo, hi := InstancesOf(p, gen.Processes, gen.Instances())
		for i := lo; i <= hi; i++ {
			want = append(want, i)
		}
	}
	var got []int
	for i, part := range c.Parts {
		switch {
		case part == nil:
			return bad("part %d is null", i)
		case part.KeyGroups.Validate() != nil:
			return bad("instance %d: key groups %v", part.Instance, part.KeyGroups)
		case i > 0 && part.Instance <= c.Parts[i-1].Instance:
			return bad("instance %d after instance %d", part.Instance, c.Parts[i-1].Instance)
		case gen != nil && (part.Instance < 0 || part.Instance >= gen.Instances() || part.KeyGroups != gen.KeyGroups[part.Instance]):
			return bad("instance %d, key groups %v: not an instance of generation %d with those key groups", part.Instance, part.KeyGroups, g)
		case slices.Contains(part.Objects, ""):
			return bad("instance %d: an empty object name", part.Instance)
		}
		got = append(got, part.Instance)
		part.Name, part.Generation, part.Checkpoint, part.Created = name, g, n, c.Created
		if part.Objects == nil {
			part.Objects = []string{}
		}
	}
	if gen != nil && !slices.Equal(got, want) {
		return bad("parts of instances %v, process %d runs %v", got, p, want)
	}
	return nil
}

// sameCommit says whether two commits of one name hold the same parts and
// hold (their times may differ): a retried commit whose first answer was
// lost.
func sameCommit(a, b *commit) bool {
	if len(a.Parts) != len(b.Parts) || a.HoldFrom != b.HoldFrom {
		return false
	}
	for i := range a.Parts {
		x, y := a.Parts[i], b.Parts[i]
		if x.Instance != y.Instance || x.KeyGroups != y.KeyGroups || !bytes.Equal(x.State, y.State) ||
			!slices.Equal(x.Objects, y.Objects) || !mapsEqual(x.Metadata, y.Metadata) {
			return false
		}
	}
	return true
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
