package catalog

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
)

// RecordKind says what a catalog object is.
type RecordKind string

// The kinds of catalog objects.
const (
	GenerationRecord RecordKind = "generation" // a generation's record
	ClaimRecord      RecordKind = "claim"      // an instance slot's claim
	PartRecord       RecordKind = "part"       // an instance's part of a checkpoint
)

// Record is one catalog object as [DecodeRecord] reads it, alone, for
// tools that inspect a catalog object without joining its job.
type Record struct {
	// Kind says what the object is; one of Generation, Part and Owner is
	// set by it.
	Kind RecordKind
	// Version is the version of the object's encoding.
	Version int
	// Generation is a generation's record.
	Generation *Generation
	// Part is an instance's part of a checkpoint; its Name is the object's.
	Part *Part
	// Owner and Created are a claim's: the process that claimed the slot,
	// and when, by its clock.
	Owner   string
	Created time.Time
}

// DecodeRecord decodes the catalog object data of any kind, read from the
// object named name: it checks the object's magic, version, checksum and
// fields as a member does. When name is a catalog object's name (under
// any job's prefix), the record must be of the kind, generation,
// checkpoint and instance the name says; under another name (a copy in a
// local file, say), its content alone is checked. An error wraps
// [ErrDamaged] and names the object.
func DecodeRecord(name string, data []byte) (*Record, error) {
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
	case kindClaim:
		r.Kind = ClaimRecord
		v = new(claim)
	case kindPart:
		r.Kind, r.Part = PartRecord, new(Part)
		v = r.Part
	default:
		v = new(json.RawMessage)
	}
	if err := decode(name, data, kind, v); err != nil {
		return nil, err
	}
	ref := nameRef(name)
	if r.Kind == "" {
		return nil, fmt.Errorf("%w %q: unknown kind %q", ErrDamaged, name, kind)
	}
	if want := refKind(ref.Kind); want != "" && want != r.Kind {
		return nil, fmt.Errorf("%w %q: a %s under the name of a %s", ErrDamaged, name, r.Kind, want)
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
	case ClaimRecord:
		c := v.(*claim)
		r.Owner, r.Created = c.Owner, c.Created
	case PartRecord:
		p := r.Part
		g, n, i := p.Generation, p.Checkpoint, p.Instance
		if ref.Kind == objname.CatalogPart {
			g, n, i = ref.Generation, ref.Checkpoint, ref.Instance
		}
		if err := p.validate(name, g, n, i, nil); err != nil {
			return nil, err
		}
		p.Name = name
	}
	return r, nil
}

// nameRef returns what name says of a catalog object, under whatever
// prefix comes before the catalog's directory in it.
func nameRef(name string) objname.CatalogRef {
	i := strings.LastIndex(name, objname.CatalogDir)
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
	case objname.CatalogClaim:
		return ClaimRecord
	case objname.CatalogPart:
		return PartRecord
	}
	return ""
}
