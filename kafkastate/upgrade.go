package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/internal/catalogv1"
)

// The releases before checkpoint records kept each partition's
// checkpoints in the job's checkpoint catalog of the first layout
// (PREFIX/_catalog/gG/..., package internal/catalogv1): partition p was
// instance p of P, in the independent mode, and each checkpoint a part
// whose state is the partition's statestore.CheckpointHandle and whose
// metadata holds the topic, the partition and the next offset. The
// group's committed offsets trailed the parts, without metadata. A
// partition whose committed offset names no record restores its part of
// that catalog (see docs/KAFKA.md, "Upgrade").

// Metadata keys of a part of the first layout.
const (
	partTopic     = "topic"
	partPartition = "partition"
	partOffset    = "offset"
)

// legacyOutputStore is the store in which the releases before records
// kept a partition's pending output in the transactional mode: a state
// restored from the first layout may hold it, and so may the states
// checkpointed since (recordPartition.LegacyOutput).
const legacyOutputStore = "_kafkastate_output"

// legacyOutput is a record of pending output as legacyOutputStore holds
// it: the output of input record Input, which a committed transaction of
// an offset above Input holds.
type legacyOutput struct {
	Input     int64             `json:"input"`
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition,omitempty"`
	Key       []byte            `json:"key,omitempty"`
	Value     []byte            `json:"value,omitempty"`
	Headers   map[string][]byte `json:"headers,omitempty"`
}

// record returns the output as a record to produce.
func (o legacyOutput) record() *kgo.Record {
	r := &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: o.Key, Value: o.Value}
	for _, k := range slices.Sorted(maps.Keys(o.Headers)) {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: o.Headers[k]})
	}
	return r
}

// firstLayout is what the job's first-layout catalog restores: each
// partition's latest part.
type firstLayout struct {
	// parts are the parts the partitions restore from, and offsets the
	// next offsets they hold, by partition.
	parts   map[int32]*catalogv1.Part
	offsets map[int32]int64
}

// part returns the part partition p restores from, or nil.
func (f *firstLayout) part(p int32) *catalogv1.Part {
	if f == nil {
		return nil
	}
	return f.parts[p]
}

// firstLayoutListing is one listing of a job's first-layout catalog.
type firstLayoutListing struct {
	objects []backends.ObjectInfo // every object of the layout, sorted by name
	parts   int                   // of them, parts
	latest  int64                 // the latest generation with a record; 0: none
}

// names returns the names of the objects listed.
func (l *firstLayoutListing) names() []string {
	out := make([]string, len(l.objects))
	for i, o := range l.objects {
		out[i] = o.Name
	}
	return out
}

// listFirstLayout lists the first-layout catalog under prefix once.
func listFirstLayout(ctx context.Context, b backends.Backend, prefix string) (*firstLayoutListing, error) {
	l := &firstLayoutListing{}
	err := b.List(ctx, prefix+objname.CatalogDir, func(oi backends.ObjectInfo) error {
		ref := objname.ParseCatalog(prefix, oi.Name)
		if ref.Version != 1 || ref.Kind == objname.CatalogOther {
			return nil
		}
		l.objects = append(l.objects, oi)
		switch ref.Kind {
		case objname.CatalogPart:
			l.parts++
		case objname.CatalogGeneration:
			l.latest = max(l.latest, ref.Generation)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafkastate: listing the first layout's catalog %q: %w", prefix+objname.CatalogDir, err)
	}
	slices.SortFunc(l.objects, func(a, b backends.ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return l, nil
}

// fenced reports whether the latest generation's record of the listing
// is the fence of an upgrade (catalogv1.Fence's): then no process of the
// first layout can commit or start a generation.
func (l *firstLayoutListing) fenced(ctx context.Context, b backends.Backend, prefix string) (bool, error) {
	if l.latest == 0 {
		return false, nil
	}
	name := objname.CatalogGenerationName(prefix, l.latest)
	data, err := readObject(ctx, b, name)
	if err != nil {
		return false, fmt.Errorf("kafkastate: reading the first layout's %q: %w", name, err)
	}
	o, err := catalogv1.DecodeObject(name, data)
	if err != nil {
		return false, firstLayoutErr(err)
	}
	return o.Generation != nil && catalogv1.IsFence(prefix, o.Generation), nil
}

// firstLayoutErr wraps an error of the first layout's catalog: a damaged
// object is ErrDamaged.
func firstLayoutErr(err error) error {
	if errors.Is(err, catalogv1.ErrDamaged) {
		return fmt.Errorf("%w: the first layout's catalog: %w", ErrDamaged, err)
	}
	return fmt.Errorf("kafkastate: the first layout's catalog: %w", err)
}

// readFirstLayout reads what the job's first-layout catalog restores:
// each partition's latest part. With move, it fences the first layout
// first (catalogv1.Fence: its processes can then neither commit nor join
// nor start a generation), as a process of this release does before it
// restores a partition from it; without, it writes nothing
// (catalogv1.Peek). A job with no such catalog, or whose catalog holds no
// part and is fenced already (the upgrade's deletion rule dropped it),
// restores nothing from it. It costs one listing of the catalog, and
// then the reads of its latest generations' records and of each part
// chosen.
func readFirstLayout(ctx context.Context, b backends.Backend, jobID, topic string, partitions int, move bool) (*firstLayout, error) {
	prefix := objname.JobPrefix(jobID)
	fl := &firstLayout{parts: map[int32]*catalogv1.Part{}, offsets: map[int32]int64{}}
	l, err := listFirstLayout(ctx, b, prefix)
	if err != nil || len(l.objects) == 0 {
		return fl, err
	}
	if l.parts == 0 {
		if done, err := l.fenced(ctx, b, prefix); err != nil || done || !move {
			return fl, err
		}
	}
	var up *catalogv1.UpgradePoint
	if move {
		up, err = catalogv1.Fence(ctx, b, jobID, "kafkastate", time.Now(), catalogv1.Independent, 1, 0)
	} else {
		up, err = catalogv1.Peek(ctx, b, jobID, 1)
	}
	if err != nil {
		return nil, firstLayoutErr(err)
	}
	if up == nil {
		return fl, nil
	}
	for _, part := range up.Parts {
		p, off, err := checkPart(part, topic, partitions)
		if err != nil {
			return nil, err
		}
		if fl.parts[p] != nil {
			return nil, fmt.Errorf("%w %q: a second part of partition %d, beside %q", ErrDamaged, part.Name, p, fl.parts[p].Name)
		}
		fl.parts[p], fl.offsets[p] = part, off
	}
	return fl, nil
}

// checkPart checks that a part of the first layout is of the topic and of
// the partition its instance says, and returns the partition and its
// offset; the error wraps ErrDamaged and names the part.
func checkPart(part *catalogv1.Part, topic string, partitions int) (int32, int64, error) {
	bad := func(format string, args ...any) (int32, int64, error) {
		return 0, 0, fmt.Errorf("%w %q: the first layout's part: %s", ErrDamaged, part.Name, fmt.Sprintf(format, args...))
	}
	p := part.Instance
	switch {
	case part.Metadata[partTopic] != topic:
		return bad("topic %q, not %q (another job's catalog, or the job's id changed)", part.Metadata[partTopic], topic)
	case part.Metadata[partPartition] != strconv.Itoa(p):
		return bad("partition %q in the part of instance %d", part.Metadata[partPartition], p)
	case p >= partitions:
		return bad("partition %d: the topic has %d partitions", p, partitions)
	}
	off, err := strconv.ParseInt(part.Metadata[partOffset], 10, 64)
	if err != nil || off < 0 {
		return bad("offset %q", part.Metadata[partOffset])
	}
	return int32(p), off, nil
}

// firstLayoutKeep is what the deletion rule keeps of the job's
// first-layout catalog, as one run learnt it.
type firstLayoutKeep struct {
	// objects are the objects that the parts the partitions without a
	// committed record restore from name: kept however old.
	objects []string
	// parts are those parts.
	parts []string
	// drop are the catalog's objects that no partition restores from any
	// more, once every partition with a part has a record committed, and
	// the catalog is fenced: every object but the latest generation's
	// record (the fence, which stays for good), parts first.
	drop []backends.ObjectInfo
}

// firstLayoutState is what the collector remembers of the job's
// first-layout catalog between its runs.
type firstLayoutState struct {
	done   bool     // nothing is left of it but the fence: no more listings
	listed []string // the names of the last listing
	point  *catalogv1.UpgradePoint
}

// firstLayout returns what this run keeps of the job's first-layout
// catalog: while a partition that restores a part of it has no record
// committed (pos), the objects of every part the partitions restore
// (catalogv1.Peek's, read again only when the catalog changed); once
// none, the catalog's objects to drop. It costs one listing a run until
// only the fence is left.
func (k *collector) firstLayout(ctx context.Context, pos map[int32]position) (*firstLayoutKeep, error) {
	st := &k.v1
	if st.done {
		return &firstLayoutKeep{}, nil
	}
	l, err := listFirstLayout(ctx, k.b, k.prefix)
	if err != nil {
		return nil, err
	}
	out := &firstLayoutKeep{}
	names := l.names()
	switch {
	case len(l.objects) == 0:
		st.done = true
		return out, nil
	case l.parts == 0:
		st.point = nil
	case !slices.Equal(names, st.listed) || st.point == nil:
		up, err := catalogv1.Peek(ctx, k.b, k.jobID, 1)
		if err != nil {
			return nil, firstLayoutErr(err)
		}
		st.point = up
	}
	st.listed = names
	superseded := true
	if up := st.point; up != nil {
		for _, part := range up.Parts {
			p, _, err := checkPart(part, k.topic, k.partitions)
			if err != nil {
				return nil, err
			}
			if pos[p].record == "" {
				superseded = false
			}
		}
		if !superseded {
			for _, part := range up.Parts {
				out.parts = append(out.parts, part.Name)
				out.objects = append(out.objects, part.Objects...)
			}
			return out, nil
		}
	}
	fenced, err := l.fenced(ctx, k.b, k.prefix)
	if err != nil || !fenced {
		return out, err // a catalog whose processes may still run is theirs
	}
	fence := objname.CatalogGenerationName(k.prefix, l.latest)
	for _, o := range l.objects {
		if o.Name != fence {
			out.drop = append(out.drop, o)
		}
	}
	if len(out.drop) == 0 {
		st.done = true
	}
	// Parts first: a listing that shows no part and the fence is an
	// upgrade done.
	slices.SortStableFunc(out.drop, func(a, b backends.ObjectInfo) int {
		pa := objname.ParseCatalog(k.prefix, a.Name).Kind == objname.CatalogPart
		pb := objname.ParseCatalog(k.prefix, b.Name).Kind == objname.CatalogPart
		switch {
		case pa && !pb:
			return -1
		case pb && !pa:
			return 1
		}
		return 0
	})
	return out, nil
}

// dropFirstLayout deletes the first layout's catalog objects of drop that
// are older than the grace by the store's clock at now (one whose
// modification time is unknown stays), each delete bounded by timeout
// (0: none). It returns the names deleted.
func (k *collector) dropFirstLayout(ctx context.Context, drop []backends.ObjectInfo, now time.Time, timeout time.Duration, dryRun bool) ([]string, error) {
	var gone []string
	var errs []error
	for _, o := range drop {
		if o.ModTime.IsZero() || now.Sub(o.ModTime) <= k.grace {
			continue
		}
		if dryRun {
			gone = append(gone, o.Name)
			continue
		}
		dctx, cancel := withTimeout(ctx, timeout)
		err := k.b.Delete(dctx, o.Name)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("kafkastate: deleting the first layout's %q: %w", o.Name, err))
			continue
		}
		gone = append(gone, o.Name)
	}
	return gone, errors.Join(errs...)
}
