package statestore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/dstlgo/dstl/dstl"
)

// SnapshotObjectVersion is the version of the snapshot objects a
// Checkpointer writes.
const SnapshotObjectVersion = 1

// objectMagic starts a snapshot object. Its name is made by package
// objname: under the job's prefix, in "statestore/OPERATOR/", apart from
// the log's objects.
const objectMagic = "DSSO"

// snapshotObject is the decoded form of one snapshot object: the payloads
// of every store of an operator at one point of its log.
type snapshotObject struct {
	operator string
	kgr      dstl.KeyGroupRange
	maxP     int
	from     dstl.SequenceNumber // where the log goes on, in the writer that wrote it
	stores   []storePayload
}

type storePayload struct {
	name    string
	kind    Kind
	payload []byte
}

// encode writes the object (version 1); integers are unsigned varints:
//
//	magic "DSSO", version 1 byte, operator (length, bytes),
//	key groups start, end, max parallelism, log sequence number,
//	stores: count, then per store: name (length, bytes), kind (length,
//	bytes), payload (length, bytes; see Store.Snapshot),
//	CRC32C (Castagnoli) of everything before it, 4 bytes little-endian.
func (o *snapshotObject) encode() []byte {
	size := 64
	for _, s := range o.stores {
		size += len(s.name) + len(s.kind) + len(s.payload) + 16
	}
	b := make([]byte, 0, size)
	b = append(b, objectMagic...)
	b = append(b, SnapshotObjectVersion)
	b = appendString(b, o.operator)
	b = binary.AppendUvarint(b, uint64(o.kgr.Start))
	b = binary.AppendUvarint(b, uint64(o.kgr.End))
	b = binary.AppendUvarint(b, uint64(o.maxP))
	b = binary.AppendUvarint(b, uint64(o.from))
	b = binary.AppendUvarint(b, uint64(len(o.stores)))
	for _, s := range o.stores {
		b = appendString(b, s.name)
		b = appendString(b, string(s.kind))
		b = appendBytes(b, s.payload)
	}
	return finishChecksum(b)
}

// decodeSnapshotObject decodes an object; the payloads alias data.
func decodeSnapshotObject(name string, data []byte) (*snapshotObject, error) {
	if len(data) < len(objectMagic)+1+4 || string(data[:len(objectMagic)]) != objectMagic {
		return nil, fmt.Errorf("%w: object %s: not a state store snapshot (bad magic)", ErrSnapshotFormat, name)
	}
	if v := data[len(objectMagic)]; v != SnapshotObjectVersion {
		return nil, fmt.Errorf("%w: object %s: version %d, this build reads version %d", ErrSnapshotFormat, name, v, SnapshotObjectVersion)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: object %s: checksum mismatch", ErrSnapshotFormat, name)
	}
	d := decoder{b: body[len(objectMagic)+1:]}
	o := &snapshotObject{operator: string(d.bytes())}
	o.kgr.Start, o.kgr.End, o.maxP = int(d.uvarint()), int(d.uvarint()), int(d.uvarint())
	o.from = dstl.SequenceNumber(d.uvarint())
	for range d.count() {
		o.stores = append(o.stores, storePayload{name: string(d.bytes()), kind: Kind(d.bytes()), payload: d.bytes()})
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("trailing bytes"))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: object %s: %v", ErrSnapshotFormat, name, d.err)
	}
	return o, nil
}
