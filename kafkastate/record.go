package kafkastate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
)

// ErrDamaged is wrapped by the error about a checkpoint record that does
// not decode (bad magic, unknown version, a checksum mismatch, fields
// that do not parse or contradict its name or the service's topic), or
// about committed offset metadata that names no record of the job. The
// error names the object.
var ErrDamaged = errors.New("kafkastate: damaged checkpoint record")

// recordVersion is the version of the records' encoding.
const recordVersion = 1

// recordMagic starts every record.
const recordMagic = "DSKR"

// metadataPrefix starts the committed offset metadata that names a
// record: "dstl-record:" and the record's object name.
const metadataPrefix = "dstl-record:"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is one process's checkpoint record: the state of each of its
// partitions at one checkpoint. Its object name is
// PREFIX/_records/UUIDv7.cN.rec (objname.NewRecord), N its checkpoint.
type record struct {
	// Topic and Group are the service's.
	Topic string `json:"topic"`
	Group string `json:"group"`
	// Checkpoint is the checkpoint's number (milliseconds since the Unix
	// epoch, by the writer's clock, or above a checkpoint it restored).
	Checkpoint int64 `json:"checkpoint"`
	// HoldFrom is the lowest checkpoint that objects a later record of
	// the process may name were made for: the deletion rule keeps every
	// object made for it or later while this record is kept.
	HoldFrom int64 `json:"hold_from"`
	// Member and Generation are the group member that wrote it and its
	// generation then, for inspection.
	Member     string `json:"member,omitempty"`
	Generation int32  `json:"generation"`
	// Created is when the record was made, by the writer's clock.
	Created time.Time `json:"created"`
	// Partitions are the partitions' states, in partition order.
	Partitions []recordPartition `json:"partitions"`
}

// recordPartition is one partition's state in a record.
type recordPartition struct {
	Partition int32 `json:"partition"`
	// Offset is the next offset to process: the one committed with the
	// metadata that names the record.
	Offset int64 `json:"offset"`
	// State is a statestore.CheckpointHandle's encoding.
	State []byte `json:"state"`
	// Objects names every object under the job's prefix that State
	// refers to.
	Objects []string `json:"objects"`
	// LegacyOutput says that State holds the store in which the releases
	// before records kept the pending output (legacyOutputStore): the
	// partition was restored from the first layout's catalog since, so
	// its restores register that store.
	LegacyOutput bool `json:"legacy_output,omitempty"`
}

// partition returns the state of partition p, or nil.
func (r *record) partition(p int32) *recordPartition {
	k := slices.IndexFunc(r.Partitions, func(rp recordPartition) bool { return rp.Partition == p })
	if k < 0 {
		return nil
	}
	return &r.Partitions[k]
}

// objects returns every object the record's partitions refer to.
func (r *record) objects() []string {
	var out []string
	for _, rp := range r.Partitions {
		out = append(out, rp.Objects...)
	}
	return out
}

// encodeRecord frames r: magic, version, the JSON of r, and the CRC32C
// of all that, 4 bytes little-endian.
func encodeRecord(r *record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(recordMagic)+1+len(body)+4)
	b = append(b, recordMagic...)
	b = append(b, recordVersion)
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// decodeRecord checks the frame of the record of the object name (under
// prefix) and decodes it, strictly, checking it against its name and the
// topic.
func decodeRecord(prefix, name, topic string, data []byte) (*record, error) {
	const head = len(recordMagic) + 1
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrDamaged, name, fmt.Sprintf(format, args...))
	}
	switch {
	case len(data) < head+4:
		return nil, bad("%d bytes, too short", len(data))
	case string(data[:len(recordMagic)]) != recordMagic:
		return nil, bad("bad magic %q", data[:len(recordMagic)])
	case data[len(recordMagic)] != recordVersion:
		return nil, bad("version %d, want %d", data[len(recordMagic)], recordVersion)
	}
	end := len(data) - 4
	if got, want := crc32.Checksum(data[:end], castagnoli), binary.LittleEndian.Uint32(data[end:]); got != want {
		return nil, bad("checksum %08x, computed %08x", want, got)
	}
	dec := json.NewDecoder(bytes.NewReader(data[head:end]))
	dec.DisallowUnknownFields()
	r := new(record)
	if err := dec.Decode(r); err != nil {
		return nil, bad("%v", err)
	}
	if dec.More() {
		return nil, bad("data after the record")
	}
	n := objname.Parse(prefix, name)
	switch {
	case n.Kind != objname.Record:
		return nil, bad("not a record name under %q", prefix)
	case r.Checkpoint != n.Checkpoint:
		return nil, bad("checkpoint %d under the name of checkpoint %d", r.Checkpoint, n.Checkpoint)
	case r.Topic != topic:
		return nil, bad("a record of topic %q, not %q", r.Topic, topic)
	case r.HoldFrom < 0:
		return nil, bad("hold from %d", r.HoldFrom)
	}
	for i, rp := range r.Partitions {
		if rp.Partition < 0 || rp.Offset < 0 || len(rp.State) == 0 {
			return nil, bad("partition %d at offset %d with %d bytes of state", rp.Partition, rp.Offset, len(rp.State))
		}
		if i > 0 && rp.Partition <= r.Partitions[i-1].Partition {
			return nil, bad("partitions out of order: %d after %d", rp.Partition, r.Partitions[i-1].Partition)
		}
	}
	return r, nil
}

// metadataOf returns the committed offset metadata that names the record
// of the object name.
func metadataOf(name string) string { return metadataPrefix + name }

// recordOf returns the object name of the record that committed offset
// metadata names: "" when the metadata is not a record's (none, or a
// consumer's that is not this package's), an error wrapping ErrDamaged
// when it names something that is not a record under the job's prefix.
func recordOf(prefix, meta string) (string, error) {
	name, ok := strings.CutPrefix(meta, metadataPrefix)
	if !ok {
		return "", nil
	}
	if objname.Parse(prefix, name).Kind != objname.Record {
		return "", fmt.Errorf("%w: committed offset metadata names %q, not a record of the job (prefix %q): the group is another job's, or the job's id changed", ErrDamaged, name, prefix)
	}
	return name, nil
}

// offsetKey is the key of a partition's next offset in its task's
// metadata (job.Task.Metadata).
const offsetKey = "offset"

// offsetOf returns the next offset in a task's metadata; false when the
// task knows none (no committed offset, no record processed yet).
func offsetOf(meta map[string]string) (int64, bool) {
	v, ok := meta[offsetKey]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 0
}
