package catalogv1

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
)

// Object is one catalog object of this layout, decoded alone.
type Object struct {
	// Kind is the record's kind: 'G' a generation's record, 'C' a claim,
	// 'P' a part.
	Kind byte
	// Generation is a generation's record.
	Generation *Generation
	// Part is a part; its Name is the object's.
	Part *Part
	// Owner and Created are a claim's.
	Owner   string
	Created time.Time
}

// DecodeObject decodes a catalog object of this layout of any kind, read
// from the object named name, and checks it as a member does. When name
// is a catalog object's name of this layout (under any prefix), the record
// must be of the kind, generation, checkpoint and instance the name says.
func DecodeObject(name string, data []byte) (*Object, error) {
	var kind byte
	if len(data) > len(magic)+1 {
		kind = data[len(magic)+1]
	}
	o := &Object{Kind: kind}
	var v any
	switch kind {
	case kindGeneration:
		o.Generation = new(Generation)
		v = o.Generation
	case kindClaim:
		v = new(claim)
	case kindPart:
		o.Part = new(Part)
		v = o.Part
	default:
		v = new(json.RawMessage)
	}
	if err := decode(name, data, kind, v); err != nil {
		return nil, err
	}
	var ref objname.CatalogRef
	if i := strings.LastIndex(name, objname.CatalogDir); i >= 0 && (i == 0 || name[i-1] == '/') {
		if r := objname.ParseCatalog(name[:i], name); r.Version == 1 {
			ref = r
		}
	}
	switch kind {
	case kindGeneration:
		n := o.Generation.Number
		if ref.Kind == objname.CatalogGeneration {
			n = ref.Generation
		} else if ref.Kind != objname.CatalogOther {
			return nil, fmt.Errorf("%w %q: a generation's record under another kind's name", ErrDamaged, name)
		}
		if err := o.Generation.validate(name, n); err != nil {
			return nil, err
		}
	case kindClaim:
		if ref.Kind != objname.CatalogOther && ref.Kind != objname.CatalogClaim {
			return nil, fmt.Errorf("%w %q: a claim under another kind's name", ErrDamaged, name)
		}
		c := v.(*claim)
		o.Owner, o.Created = c.Owner, c.Created
	case kindPart:
		p := o.Part
		g, n, i := p.Generation, p.Checkpoint, p.Instance
		switch ref.Kind {
		case objname.CatalogPart:
			g, n, i = ref.Generation, ref.Checkpoint, ref.Instance
		case objname.CatalogOther:
		default:
			return nil, fmt.Errorf("%w %q: a part under another kind's name", ErrDamaged, name)
		}
		if err := p.validate(name, g, n, i, nil); err != nil {
			return nil, err
		}
		p.Name = name
	default:
		return nil, fmt.Errorf("%w %q: unknown kind %q", ErrDamaged, name, kind)
	}
	return o, nil
}
