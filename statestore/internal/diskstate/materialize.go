package diskstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/dstlgo/dstl/dstl"
)

// Bounds of a snapshot's files.
const (
	// SweepFactor is about how many bytes of segments an incremental
	// materialisation writes for each byte changed.
	SweepFactor = 2
	// MaxFiles is the most files a manifest holds after an incremental
	// materialisation: one that would leave more writes a full snapshot
	// instead, a bounded spike (see [Materialize]).
	MaxFiles = 256
	// MaxFileSize is about the largest file written: a larger delta or
	// segment is split into several files.
	MaxFileSize = 64 << 20
)

// MaterializeStats describes one materialisation.
type MaterializeStats struct {
	// Full: the segments cover the whole span of the key groups (no
	// previous manifest, every key changed, or the bound on files).
	Full bool
	// ChangedKeys and ChangedBytes are the changed keys of the span and
	// their bytes (key and value as read at the cut, the key alone for a
	// deleted key). In a full materialisation every live key counts.
	ChangedKeys  int
	ChangedBytes int64
	// DeltaFiles, DeltaBytes, SegmentFiles and SegmentBytes are the files
	// written of each kind and their bytes.
	DeltaFiles   int
	DeltaBytes   int64
	SegmentFiles int
	SegmentBytes int64
	// Files and UploadedBytes are all the files written and uploaded, and
	// their bytes.
	Files         int
	UploadedBytes int64
	// Obsolete are the objects of the previous manifest that the new one
	// no longer names; deleting them is the caller's.
	Obsolete []string
	// Duration is how long the materialisation took.
	Duration time.Duration
}

// Materialize writes and uploads the files of a new snapshot of db, cut at
// snap, for the key groups kgr. The caller builds the new manifest from
// what it returns (Files = files, Cursor = cursor) and puts it.
//
// prev is the manifest of the last snapshot, whose state db held before
// the changes; nil (or a manifest whose segments do not cover the span of
// kgr) makes a full snapshot: segments over the whole span. changed are
// the keys changed since prev (sorted, as [DB.TakeChanges] returns them);
// all means every key changed, and makes a full snapshot. Changed keys
// outside kgr are ignored: a restore deletes what lies outside the key
// groups it keeps.
//
// An incremental materialisation writes a delta (the changed keys at the
// cut, deleted ones as point deletions) and a segment: the next slice of
// the span, from prev's cursor on, rewritten whole (a range deletion over
// the slice and its live keys), wrapping to the span's start at its end.
// Delta, segments and the manifest the caller puts (reckoned as prev's
// and an entry per new file) together take at most about (1 + SweepFactor)
// times the changed bytes: the segment gets what the delta and the
// manifest leave (about SweepFactor times the changes). Changes so small
// that the delta's own overhead (about 1 KiB a file) spends that budget
// write no segment, and then the bytes uploaded exceed the bound by that
// overhead. Once the
// segments since a file cover the span, every older file is obsolete: the
// manifest holds the files of about one sweep of the span.
//
// When the changes are so small against the state that the manifest would
// hold more than MaxFiles files, the sweep runs through the whole span at
// once: a full snapshot, which makes every earlier file obsolete. It is a
// spike of the whole state's bytes, at most about once every MaxFiles/2
// materialisations (each adds a delta and a segment). (A sweep only from
// the cursor to the end of the span would leave about MaxFiles files, and
// spike again within a few materialisations.)
//
// Files larger than MaxFileSize are split, a segment into segments with
// adjacent spans. NewObject is called from the calling goroutine, once a
// file. files are the files of the new manifest: those of prev still
// needed, then the new ones. No change (and no need of a full snapshot)
// writes nothing. On error, what this call uploaded is deleted (best
// effort) and its temporary files removed.
func Materialize(ctx context.Context, t Target, db *DB, snap *pebble.Snapshot, prev *Manifest, kgr dstl.KeyGroupRange, changed []string, all bool) (files []File, cursor []byte, st MaterializeStats, err error) {
	start := time.Now()
	if err := kgr.Validate(); err != nil {
		return nil, nil, st, fmt.Errorf("diskstate: materialize: %w", err)
	}
	if t.Backend == nil || t.NewObject == nil {
		return nil, nil, st, errors.New("diskstate: materialize: target without backend or object names")
	}
	lo, hi := KeyGroupSpan(kgr)
	m := &materializer{
		ctx: ctx, t: &t, snap: snap, lo: lo, hi: hi, kgr: kgr,
		format: db.TableFormat(), dir: db.TempDir(),
	}
	defer m.temps.removeAll(t.logger())

	full := all || prev == nil || !covers(prev.Files, lo, hi)
	var kept, obsolete []File
	if !full {
		if err := m.incremental(prev, changed); err != nil {
			return nil, nil, st, err
		}
		if len(m.out) == 0 {
			// Nothing changed: the previous manifest stands.
			kept, obsolete = prune(prev.Files, lo, hi)
			st.Obsolete = objects(obsolete)
			st.Duration = time.Since(start)
			return slices.Clone(kept), clampCursor(prev.Cursor, lo, hi), st, nil
		}
		kept, obsolete = m.prune(prev.Files)
		if len(kept) > t.fileLimit() {
			t.logger().Info("diskstate: too many files, writing a full snapshot",
				"files", len(kept), "max", t.fileLimit())
			m.discard()
			full = true
		}
	}

	up := newUploader(ctx, &t)
	defer func() {
		if err != nil {
			up.undo(ctx)
		}
	}()
	if full {
		err = m.full(up)
	} else {
		for _, f := range m.out {
			if err = up.submit(f); err != nil {
				break
			}
		}
	}
	if werr := up.wait(); err == nil {
		err = werr
	}
	if err != nil {
		return nil, nil, st, err
	}
	if full {
		kept, obsolete = m.fileList(), nil
		if prev != nil {
			obsolete = prev.Files
		}
	} else {
		// Name the new files in the list pruned above.
		names := m.fileList()
		copy(kept[len(kept)-len(names):], names)
	}

	st.Full = full
	st.ChangedKeys, st.ChangedBytes = m.changedKeys, m.changedBytes
	for _, f := range m.out {
		if f.Kind == Delta {
			st.DeltaFiles++
			st.DeltaBytes += f.Size
		} else {
			st.SegmentFiles++
			st.SegmentBytes += f.Size
		}
	}
	st.Files = len(m.out)
	st.UploadedBytes = up.bytes
	st.Obsolete = objects(obsolete)
	st.Duration = time.Since(start)
	return kept, m.cursor, st, nil
}

// materializer writes the files of one materialisation.
type materializer struct {
	ctx    context.Context
	t      *Target
	snap   *pebble.Snapshot
	lo, hi []byte
	kgr    dstl.KeyGroupRange
	format sstable.TableFormat
	dir    string
	temps  tempFiles

	out          []*localFile // files written, in manifest order
	cursor       []byte
	changedKeys  int
	changedBytes int64
	segmentKeys  int // keys written into segments
}

// prune returns the files of the new manifest, those of prev still needed
// and the new ones (still unnamed), and the obsolete files of prev. New
// files that the new segments make obsolete (a delta whose keys the
// segments rewrite) are dropped.
func (m *materializer) prune(prev []File) (kept, obsolete []File) {
	all := append(slices.Clip(prev), m.fileList()...)
	kept, _ = prune(all, m.lo, m.hi)
	first := len(all) - len(kept)
	if first > len(prev) {
		m.out = m.out[first-len(prev):]
		return kept, prev
	}
	return kept, prev[:first]
}

// fileList returns the files written, as the manifest names them.
func (m *materializer) fileList() []File {
	out := make([]File, len(m.out))
	for i, f := range m.out {
		out[i] = f.File
		out[i].Writer = m.kgr
	}
	return out
}

// discard forgets the files written (they are removed at the end).
func (m *materializer) discard() {
	m.out, m.cursor, m.changedKeys, m.changedBytes, m.segmentKeys = nil, nil, 0, 0, 0
}

// manifestEntryAllowance is what a file's entry in a manifest takes at
// most for keys of usual sizes (object name, size, CRC, kind, span).
const manifestEntryAllowance = 256

// incremental writes the delta and the sweep's segments: together with
// the manifest, at most (1 + SweepFactor) times the changed bytes (plus a
// key), the segments getting what the delta and the manifest leave.
func (m *materializer) incremental(prev *Manifest, changed []string) error {
	deltaBytes, err := m.delta(changed)
	if err != nil || deltaBytes == 0 {
		return err
	}
	cur := clampCursor(prev.Cursor, m.lo, m.hi)
	m.cursor = cur
	// The manifest the caller puts counts too: about prev's, with the
	// entries of this materialisation's files.
	manifest := int64(len(prev.encode())) + 3*manifestEntryAllowance
	budget := (1+SweepFactor)*m.changedBytes - deltaBytes - manifest
	if budget <= tableOverhead {
		// Changes so small that the delta's own overhead spends the
		// budget: the sweep waits.
		return nil
	}
	end, used, err := m.segments(cur, m.hi, budget, nil)
	if err != nil {
		return err
	}
	if end != nil { // budget spent before the end of the span
		m.cursor = end
		return nil
	}
	// The sweep reached the end of the span: it wraps to the start, up to
	// where it started at most.
	m.cursor = m.lo
	if bytes.Equal(cur, m.lo) || budget-used <= tableOverhead {
		return nil
	}
	end, _, err = m.segments(m.lo, cur, budget-used, nil)
	if err != nil {
		return err
	}
	if end != nil {
		m.cursor = end
	} else {
		m.cursor = cur
	}
	return nil
}

// full writes segments over the whole span, uploading each as it is done.
func (m *materializer) full(up *uploader) error {
	m.cursor = m.lo
	_, _, err := m.segments(m.lo, m.hi, -1, up)
	if err == nil {
		m.changedKeys, m.changedBytes = m.segmentKeys, 0
		for _, f := range m.out {
			m.changedBytes += f.raw
		}
	}
	return err
}

// delta writes the changed keys of the span into delta files and returns
// their bytes (0: nothing changed in the span).
//
// It reads the keys, sorted, with one iterator seeking forward, which finds
// the next key in the blocks it holds (Pebble's seek-using-next) rather
// than looking up the index and data blocks of each again, as a point read
// of each would.
func (m *materializer) delta(changed []string) (size int64, err error) {
	it, err := m.snap.NewIterWithContext(m.ctx, &pebble.IterOptions{LowerBound: m.lo, UpperBound: m.hi})
	if err != nil {
		return 0, fmt.Errorf("diskstate: read [%x, %x): %w", m.lo, m.hi, err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("diskstate: read [%x, %x): %w", m.lo, m.hi, cerr)
		}
	}()
	var tw *tableWriter
	for i, k := range changed {
		key := []byte(k)
		if i > 0 && k <= changed[i-1] {
			return 0, fmt.Errorf("diskstate: changed keys not sorted: %x after %x", key, changed[i-1])
		}
		if bytes.Compare(key, m.lo) < 0 || bytes.Compare(key, m.hi) >= 0 {
			continue
		}
		if i%1024 == 0 {
			if err := m.ctx.Err(); err != nil {
				return 0, err
			}
		}
		if tw != nil && tw.estimatedSize() >= m.t.sizeLimit() {
			f, err := tw.finish(Delta, nil, nil)
			tw = nil
			if err != nil {
				return 0, err
			}
			m.out = append(m.out, f)
			size += f.Size
		}
		if tw == nil {
			var err error
			if tw, err = newTableWriter(m.dir, m.format, m.temps.add); err != nil {
				return 0, err
			}
		}
		found := it.SeekGE(key) && bytes.Equal(it.Key(), key)
		var v []byte
		if found {
			v, err = it.ValueAndErr()
		} else {
			err = it.Error()
		}
		switch {
		case err != nil:
			tw.abort()
			return 0, fmt.Errorf("diskstate: read key %x: %w", key, err)
		case !found:
			err = tw.delete(key)
			m.changedBytes += int64(len(key))
		default:
			err = tw.set(key, v)
			m.changedBytes += int64(len(key) + len(v))
		}
		if err != nil {
			tw.abort()
			return 0, err
		}
		m.changedKeys++
	}
	if tw != nil {
		f, err := tw.finish(Delta, nil, nil)
		if err != nil {
			return 0, err
		}
		m.out = append(m.out, f)
		size += f.Size
	}
	return size, nil
}

// tableOverhead is about the size of an SST file of no key.
const tableOverhead = 1 << 10

// segments writes segment files over [lo, ...) up to hi: the live keys of
// the snapshot, with a range deletion over each file's span. A
// non-negative budget ends the last file before the key that would bring
// the bytes written past the budget (its first key is always written);
// end is then that key, where the next sweep starts. end is nil when the
// files reach hi. A file reaching the size limit ends before a key and the
// next starts there. With up, each file is uploaded when done.
func (m *materializer) segments(lo, hi []byte, budget int64, up *uploader) (end []byte, used int64, err error) {
	it, err := m.snap.NewIterWithContext(m.ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, 0, fmt.Errorf("diskstate: read [%x, %x): %w", lo, hi, err)
	}
	defer it.Close()

	var tw *tableWriter
	defer func() {
		if tw != nil && err != nil {
			tw.abort()
		}
	}()
	pieceLo := lo
	finish := func(pieceHi []byte) error {
		f, err := tw.finish(Segment, pieceLo, pieceHi)
		tw = nil
		if err != nil {
			return err
		}
		m.out = append(m.out, f)
		used += f.Size
		pieceLo = pieceHi
		if up != nil {
			return up.submit(f)
		}
		return nil
	}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if n++; n%1024 == 0 {
			if err := m.ctx.Err(); err != nil {
				return nil, used, err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, used, fmt.Errorf("diskstate: read key %x: %w", it.Key(), err)
		}
		if tw != nil && tw.keys > 0 {
			if budget >= 0 && used+tw.closedSize()+int64(len(it.Key())+len(v)) > budget {
				// The budget is spent: the segment ends before this key.
				end := bytes.Clone(it.Key())
				return end, used, finish(end)
			}
			if tw.estimatedSize() >= m.t.sizeLimit() {
				// The file is full: it ends where this key starts the next.
				if err := finish(bytes.Clone(it.Key())); err != nil {
					return nil, used, err
				}
			}
		}
		if tw == nil {
			if tw, err = newTableWriter(m.dir, m.format, m.temps.add); err != nil {
				return nil, used, err
			}
		}
		if err := tw.set(it.Key(), v); err != nil {
			return nil, used, err
		}
		m.segmentKeys++
	}
	if err := it.Error(); err != nil {
		return nil, used, fmt.Errorf("diskstate: read [%x, %x): %w", lo, hi, err)
	}
	if tw == nil {
		// No key left: a segment with the range deletion alone.
		if tw, err = newTableWriter(m.dir, m.format, m.temps.add); err != nil {
			return nil, used, err
		}
	}
	return nil, used, finish(hi)
}

// prune drops the files that newer segments make obsolete: walking from
// the newest, once the segments seen cover [lo, hi), every older file.
func prune(files []File, lo, hi []byte) (kept, obsolete []File) {
	var spans [][2][]byte
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		if f.Kind != Segment {
			continue
		}
		a, b := maxBytes(f.Lo, lo), minBytes(f.Hi, hi)
		if bytes.Compare(a, b) >= 0 {
			continue
		}
		spans = append(spans, [2][]byte{a, b})
		if spansCover(spans, lo, hi) {
			return files[i:], files[:i]
		}
	}
	return files, nil
}

// covers reports whether the segments of files cover [lo, hi).
func covers(files []File, lo, hi []byte) bool {
	var spans [][2][]byte
	for _, f := range files {
		if f.Kind == Segment {
			spans = append(spans, [2][]byte{f.Lo, f.Hi})
		}
	}
	return spansCover(spans, lo, hi)
}

// spansCover reports whether the union of spans covers [lo, hi).
func spansCover(spans [][2][]byte, lo, hi []byte) bool {
	s := slices.Clone(spans)
	slices.SortFunc(s, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
	at := lo
	for _, sp := range s {
		if bytes.Compare(sp[0], at) > 0 {
			break
		}
		if bytes.Compare(sp[1], at) > 0 {
			at = sp[1]
		}
	}
	return bytes.Compare(at, hi) >= 0
}

// clampCursor returns c if it lies in [lo, hi), lo otherwise.
func clampCursor(c, lo, hi []byte) []byte {
	if bytes.Compare(c, lo) < 0 || bytes.Compare(c, hi) >= 0 {
		return bytes.Clone(lo)
	}
	return bytes.Clone(c)
}

func objects(files []File) []string {
	if len(files) == 0 {
		return nil
	}
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Object
	}
	return out
}

func maxBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

func minBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) <= 0 {
		return a
	}
	return b
}
