package catalog

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/internal/catalogv1"
)

// RecordKind says what a catalog object is.
type RecordKind string

// The kinds of catalog objects.
const (
	GenerationRecord RecordKind = "generation" // a generation's record
	FenceRecord      RecordKind = "fence"      // a generation's fence
	ClaimRecord      RecordKind = "claim"      // a process slot's claim (an instance slot's, in the first layout)
	CommitRecord     RecordKind = "commit"     // a process's commit of a checkpoint
	PartRecord       RecordKind = "part"       // an instance's part of a checkpoint, in the first layout
)

// Record is one catalog object as [DecodeRecord] reads it, alone, for
// tools that inspect a catalog object without joining its job.
type Record struct {
	// Kind says what the object is.
	Kind RecordKind
	// Version is the version of the object's encoding: 2, or 1 for an
	// object of the first layout.
	Version int
	// Generation is a generation's record. A first-layout record is given
	// in this layout's form: one process per instance, and its restored
	// parts with no key groups.
	Generation *Generation
	// Next is a fence's: the generation being started.
	Next int64
	// Checkpoint, Process, HoldFrom and Complete are a commit's (see
	// [InstanceState.HoldFrom] and [Status.Complete]).
	Checkpoint, HoldFrom, Complete int64
	Process                        int
	// Parts are a commit's parts, or a first-layout part; each Name is
	// the object's.
	Parts []*Part
	// Owner and Created are a claim's or a fence's: the process that
	// wrote it, and when, by its clock; Created is a commit's time too.
	Owner   string
	Created time.Time
}

// DecodeRecord decodes the catalog object data of any kind and either
// layout, read from the object named name: it checks the object's magic,
// version, checksum and fields as a member does. When name is a catalog
// object's name (under any job's prefix), the record must be of the kind,
// generation, checkpoint and process the name says; under another name (a
// copy in a local file, say), its content alone is checked. An error
// wraps [ErrDamaged] and names the object.
func DecodeRecord(name string, data []byte) (*Record, error) {
	if len(data) > len(magic) && data[len(magic)] == 1 {
		return decodeFirstLayout(name, data)
	}
	var kind byte
	if len(data) > len(magic)+1 {
		kind = data[len(magic)+1]
	}
	r := &Record{Version: Version}
	var v any
	switch kind {
	case kindGeneration:
		r.Kind, r.Generation = GenerationRecord, new(Generation)
		v = r.Generation
	case kindFence:
		r.Kind = FenceRecord
		v = new(fence)
	case kindClaim:
		r.Kind = ClaimRecord
		v = new(claim)
	case kindCommit:
		r.Kind = CommitRecord
		v = new(commit)
	default:
		v = new(json.RawMessage)
	}
	if err := decode(name, data, kind, v); err != nil {
		return nil, err
	}
	if r.Kind == "" {
		return nil, fmt.Errorf("%w %q: unknown kind %q", ErrDamaged, name, kind)
	}
	ref := nameRef(name)
	if ref.Kind != objname.CatalogOther {
		if want := refKind(ref.Kind); ref.Version != 2 || want != r.Kind {
			return nil, fmt.Errorf("%w %q: a %s of version 2 under the name of a %s of version %d", ErrDamaged, name, r.Kind, want, ref.Version)
		}
	}
	switch r.Kind {
	case GenerationRecord:
		number := r.Generation.Number
		if ref.Kind == objname.CatalogGeneration {
			number = ref.Generation
		}
		if err := r.Generation.validate(name, number); err != nil {
			return nil, err
		}
	case FenceRecord:
		f := v.(*fence)
		r.Next, r.Owner, r.Created = f.Next, f.Owner, f.Created
	case ClaimRecord:
		c := v.(*claim)
		r.Owner, r.Created = c.Owner, c.Created
	case CommitRecord:
		c := v.(*commit)
		g, n, p := c.Generation, c.Checkpoint, c.Process
		if ref.Kind == objname.CatalogCommit {
			g, n, p = ref.Generation, ref.Checkpoint, ref.Process
		}
		if err := c.validate(name, g, n, p, nil); err != nil {
			return nil, err
		}
		r.Checkpoint, r.Process, r.HoldFrom, r.Complete, r.Parts, r.Created = c.Checkpoint, c.Process, c.HoldFrom, c.Complete, c.Parts, c.Created
	}
	return r, nil
}

// decodeFirstLayout decodes a catalog object of the first layout.
func decodeFirstLayout(name string, data []byte) (*Record, error) {
	o, err := catalogv1.DecodeObject(name, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	r := &Record{Version: 1}
	switch {
	case o.Generation != nil:
		g := o.Generation
		r.Kind = GenerationRecord
		r.Generation = &Generation{Number: g.Number, Mode: Mode(g.Mode), MaxParallelism: g.MaxParallelism,
			KeyGroups: append([]dstl.KeyGroupRange(nil), g.KeyGroups...), Processes: len(g.KeyGroups), Restored: []Restored{},
			RestoredCheckpoint: g.RestoredCheckpoint, FirstCheckpoint: g.FirstCheckpoint, Created: g.Created}
		for _, name := range g.Restored {
			r.Generation.Restored = append(r.Generation.Restored, Restored{Object: name})
		}
	case o.Part != nil:
		p := o.Part
		r.Kind, r.Checkpoint, r.Created = PartRecord, p.Checkpoint, p.Created
		r.Parts = []*Part{{Name: name, Generation: p.Generation, Checkpoint: p.Checkpoint, Instance: p.Instance, KeyGroups: p.KeyGroups,
			State: p.State, Metadata: p.Metadata, Objects: p.Objects, Created: p.Created}}
	default:
		r.Kind, r.Owner, r.Created = ClaimRecord, o.Owner, o.Created
	}
	return r, nil
}

// nameRef returns what name says of a catalog object, under whatever
// prefix comes before the catalog's directory in it.
func nameRef(name string) objname.CatalogRef {
	i := strings.LastIndex(name, objname.CatalogDir)
	if v2 := strings.LastIndex(name, objname.CatalogV2Dir); v2 >= 0 {
		i = v2
	}
	if i < 0 || (i > 0 && name[i-1] != '/') {
		return objname.CatalogRef{}
	}
	return objname.ParseCatalog(name[:i], name)
}

// refKind returns the kind of record a catalog name is of; "" for another
// name.
func refKind(k objname.CatalogKind) RecordKind {
	switch k {
	case objname.CatalogGeneration:
		return GenerationRecord
	case objname.CatalogFence:
		return FenceRecord
	case objname.CatalogClaim:
		return ClaimRecord
	case objname.CatalogCommit:
		return CommitRecord
	case objname.CatalogPart:
		return PartRecord
	}
	return ""
}
