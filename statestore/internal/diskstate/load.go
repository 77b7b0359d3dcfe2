package diskstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/dstl"
)

// LoadStats describes one restore.
type LoadStats struct {
	// Files are the files of the manifests.
	Files int
	// LocalFiles are those taken from their local copies.
	LocalFiles int
	// FetchedBytes are the bytes downloaded from the backend.
	FetchedBytes int64
	// LocalBytes are the bytes taken from local copies.
	LocalBytes int64
	// Duration is how long the restore took.
	Duration time.Duration
}

// Load restores into db, which must be empty (just opened), the key groups
// ranges[i] of the snapshot that ms[i] names, for each i. The ranges must
// be pairwise disjoint, and each within the key groups of its manifest.
//
// The first manifest's files are ingested straight into db, one at a time
// in the manifest's order (a later file shadows an earlier one); then
// every key outside ranges[0] is deleted. Each further manifest (a rescale
// that merges the state of several instances) is loaded the same way into
// a temporary database, whose keys of its range are then written into new
// SST files and ingested into db.
//
// Files are downloaded Parallelism at once and checked against the
// manifest's size and CRC: a mismatch is an error that wraps [ErrFormat]
// and names the object. With a LocalDir, a file whose local copy is intact
// is taken from there instead; a damaged or missing one is downloaded (and
// becomes the new local copy).
func Load(ctx context.Context, t Target, db *DB, ms []*Manifest, ranges []dstl.KeyGroupRange) (st LoadStats, err error) {
	start := time.Now()
	if len(ms) == 0 || len(ms) != len(ranges) {
		return st, fmt.Errorf("diskstate: load: %d manifests for %d key-group ranges (want as many, at least one)", len(ms), len(ranges))
	}
	if t.Backend == nil {
		return st, errors.New("diskstate: load: target without backend")
	}
	for i, r := range ranges {
		if ms[i] == nil {
			return st, fmt.Errorf("diskstate: load: manifest %d is nil", i)
		}
		if err := r.Validate(); err != nil {
			return st, fmt.Errorf("diskstate: load: range %d: %w", i, err)
		}
		if mr := ms[i].KeyGroups; r.Start < mr.Start || r.End > mr.End {
			return st, fmt.Errorf("diskstate: load: key groups %v are not all in the key groups %v of manifest %d", r, mr, i)
		}
		for j := range i {
			if q := ranges[j]; r.Start <= q.End && q.Start <= r.End {
				return st, fmt.Errorf("diskstate: load: key-group ranges %v and %v overlap", q, r)
			}
		}
	}
	if empty, err := isEmpty(db.DB); err != nil || !empty {
		if err == nil {
			err = errors.New("database not empty")
		}
		return st, fmt.Errorf("diskstate: load into %s: %w", db.Dir(), err)
	}
	temps := &tempFiles{}
	defer temps.removeAll(t.logger())

	for i, m := range ms {
		if i == 0 {
			if err := t.loadInto(ctx, db.DB, m, db.TempDir(), temps, &st); err != nil {
				return st, err
			}
			if err := deleteOutside(db.DB, ranges[0]); err != nil {
				return st, err
			}
			continue
		}
		if err := t.merge(ctx, db, m, ranges[i], temps, &st); err != nil {
			return st, err
		}
	}
	st.Duration = time.Since(start)
	return st, nil
}

// loadInto fetches m's files into dir and ingests them into pdb, one at a
// time in order.
func (t *Target) loadInto(ctx context.Context, pdb *pebble.DB, m *Manifest, dir string, temps *tempFiles, st *LoadStats) error {
	got := make([]fetched, len(m.Files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.parallelism())
	var mu sync.Mutex
	for i, f := range m.Files {
		g.Go(func() error {
			r, err := t.fetch(gctx, f, dir, temps.add)
			if err != nil {
				return err
			}
			got[i] = r
			mu.Lock()
			st.Files++
			if r.local {
				st.LocalFiles++
				st.LocalBytes += f.Size
			} else {
				st.FetchedBytes += f.Size
			}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// Ingest removes the files it took (its links stay in the database).
	for i, r := range got {
		if err := pdb.Ingest(ctx, []string{r.path}); err != nil {
			return fmt.Errorf("diskstate: ingest %s: %w", m.Files[i].Object, err)
		}
	}
	return nil
}

// merge loads m into a temporary database and ingests its keys of r into
// db.
func (t *Target) merge(ctx context.Context, db *DB, m *Manifest, r dstl.KeyGroupRange, temps *tempFiles, st *LoadStats) error {
	dir, err := os.MkdirTemp(db.TempDir(), "merge-*")
	if err != nil {
		return fmt.Errorf("diskstate: load: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			t.logger().Warn("diskstate: remove temporary database", "dir", dir, "err", err)
		}
	}()
	tmp, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             slogLogger{t.logger()},
	})
	if err != nil {
		return fmt.Errorf("diskstate: open temporary database: %w", err)
	}
	defer tmp.Close()
	if err := t.loadInto(ctx, tmp, m, db.TempDir(), temps, st); err != nil {
		return err
	}

	lo, hi := KeyGroupSpan(r)
	it, err := tmp.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("diskstate: read key groups %v of the manifest of %s: %w", r, m.Operator, err)
	}
	defer it.Close()
	var paths []string
	var tw *tableWriter
	defer func() {
		if tw != nil {
			tw.abort()
		}
	}()
	limit, format := t.sizeLimit(), db.TableFormat()
	for valid := it.First(); valid; valid = it.Next() {
		if tw != nil && tw.estimatedSize() >= limit {
			f, err := tw.finish(Delta, nil, nil)
			tw = nil
			if err != nil {
				return err
			}
			paths = append(paths, f.path)
		}
		if tw == nil {
			if tw, err = newTableWriter(db.TempDir(), format, temps.add); err != nil {
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("diskstate: read key %x: %w", it.Key(), err)
		}
		if err := tw.set(it.Key(), v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("diskstate: read key groups %v of the manifest of %s: %w", r, m.Operator, err)
	}
	if tw != nil {
		f, err := tw.finish(Delta, nil, nil)
		tw = nil
		if err != nil {
			return err
		}
		paths = append(paths, f.path)
	}
	if len(paths) == 0 {
		return nil
	}
	// The files are disjoint from each other and from what db holds.
	if err := db.Ingest(ctx, paths); err != nil {
		return fmt.Errorf("diskstate: ingest key groups %v: %w", r, err)
	}
	return nil
}

// deleteOutside deletes every key of pdb outside the key groups of r.
//
// The first range starts at the key 0x00, not at the empty key, which no
// real key is: with a range deletion from the empty key, deleted keys were
// seen to come back after a later ingestion (Pebble v2.1.7;
// TestLoadNarrowerAndMerge, under -race, failed most runs). The likely
// cause: the bounds of a memtable flush take an empty start key for "no
// bound" (compaction.go's flush bounds, base.UserKeyBounds.Union), so the
// range deletion loses part of its span when flushed. No key and no range
// bound of this package is empty (KeyGroupSpan, DB.Wipe, segment spans).
func deleteOutside(pdb *pebble.DB, r dstl.KeyGroupRange) error {
	lo, hi := KeyGroupSpan(r)
	if err := pdb.DeleteRange([]byte{0}, lo, pebble.NoSync); err != nil {
		return fmt.Errorf("diskstate: delete key groups before %v: %w", r, err)
	}
	// Past every key: key groups are below 0x8000.
	end := bytes.Repeat([]byte{0xff}, 16)
	if err := pdb.DeleteRange(hi, end, pebble.NoSync); err != nil {
		return fmt.Errorf("diskstate: delete key groups after %v: %w", r, err)
	}
	return nil
}

// isEmpty reports whether pdb holds no key.
func isEmpty(pdb *pebble.DB) (bool, error) {
	it, err := pdb.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return false, err
	}
	return empty, nil
}
