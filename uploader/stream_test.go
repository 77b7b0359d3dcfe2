package uploader_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/uploader"
)

// peekingBackend is a backend whose Put first reads the object's first
// bytes and closes read, then stores the object.
type peekingBackend struct {
	backends.Backend
	once sync.Once
	read chan struct{}
}

func (b *peekingBackend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	var p [16]byte
	if _, err := body.ReadAt(p[:], 0); err != nil {
		return err
	}
	b.once.Do(func() { close(b.read) })
	return b.Backend.Put(ctx, name, body, size)
}

// gatedChanges gives its changes, in append order; each time a read
// (from change 0 on) reaches change gateAt, it waits, up to a few
// seconds, for gate to close, and notes whether it had.
type gatedChanges struct {
	changes []format.KeyedChange
	gateAt  int
	gate    chan struct{}
	mu      sync.Mutex
	reads   int
	open    []bool // per read: whether the gate was open when it reached gateAt
}

func (g *gatedChanges) Len() int { return len(g.changes) }

func (g *gatedChanges) ReadChanges(i int, dst []format.KeyedChange) int {
	g.mu.Lock()
	if i == 0 {
		g.reads++
		g.open = append(g.open, false)
	}
	read := g.reads
	g.mu.Unlock()
	if i <= g.gateAt && i+len(dst) > g.gateAt && read > 1 {
		// The first read counts the changes before the Put starts: only
		// later ones wait.
		open := false
		select {
		case <-g.gate:
			open = true
		case <-time.After(2 * time.Second):
		}
		g.mu.Lock()
		g.open[read-1] = open
		g.mu.Unlock()
	}
	return copy(dst, g.changes[min(i, len(g.changes)):])
}

// TestUploadPutsWhileEncoding: without compression, the Put of a batch's
// object starts, and reads the object's first bytes, before the encoder
// has read the last changes of the batch for the last time: in format
// version 2 within a frame (a chunk at a time), in version 1 a frame at a
// time. With compression, the object is encoded first.
func TestUploadPutsWhileEncoding(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 10)
	many := func(n int) []format.KeyedChange {
		cs := make([]format.KeyedChange, n)
		for i := range cs {
			cs[i] = format.KeyedChange{KeyGroup: int32(i % 128), Data: data}
		}
		return cs
	}
	for _, tc := range []struct {
		name     string
		opts     uploader.Options
		frames   int // change sets: the gated one is the last
		gateAt   int
		overlaps bool
	}{
		{"version 2, one frame", uploader.Options{FormatVersion: format.Version2}, 1, 3000, true},
		{"version 1, two frames", uploader.Options{}, 2, 10, true},
		{"version 1, one frame", uploader.Options{}, 1, 3000, false},
		{"version 2, compressed", uploader.Options{FormatVersion: format.Version2, Compression: true}, 1, 3000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := &peekingBackend{Backend: dstltest.NewBackend(), read: make(chan struct{})}
			tc.opts.JobID = "job"
			u := uploader.NewBackend(be, tc.opts)
			gated := &gatedChanges{changes: many(4000), gateAt: tc.gateAt, gate: be.read}
			task := &uploader.Task{LogID: [16]byte{1}}
			for i := range tc.frames - 1 {
				task.ChangeSets = append(task.ChangeSets, &format.ChangeSet{LogID: task.LogID, SequenceNumber: uint64(i), AppendedFrom: changeList(many(50))})
			}
			task.ChangeSets = append(task.ChangeSets, &format.ChangeSet{LogID: task.LogID, SequenceNumber: uint64(tc.frames), AppendedFrom: gated})
			out, err := u.Upload(t.Context(), []*uploader.Task{task})
			if err != nil {
				t.Fatal(err)
			}
			if last := gated.open[len(gated.open)-1]; last != tc.overlaps {
				t.Fatalf("the Put read the object before the encoder's last read of the changes: %v, want %v (reads: %v)", last, tc.overlaps, gated.open)
			}
			checkObject(t, be, out)
		})
	}
}

type changeList []format.KeyedChange

func (l changeList) Len() int { return len(l) }

func (l changeList) ReadChanges(i int, dst []format.KeyedChange) int {
	return copy(dst, l[min(i, len(l)):])
}

// checkObject checks that every result of out decodes from the object.
func checkObject(t *testing.T, b backends.Backend, out *uploader.Output) {
	t.Helper()
	obj := out.Objects[0]
	r, err := b.Get(t.Context(), obj.Name, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(r)
	r.Close()
	if err != nil || int64(len(data)) != obj.Size {
		t.Fatalf("object of %d bytes (%v), output says %d", len(data), err, obj.Size)
	}
	if _, _, err := format.DecodeObject(obj.Name, data); err != nil {
		t.Fatal(err)
	}
	for _, tr := range out.Tasks {
		for i, res := range tr.Results {
			cs, err := format.DecodeFrame(obj.Name, res.Offset, data[res.Offset:res.Offset+res.Length])
			if err != nil {
				t.Fatal(err)
			}
			want := &format.ChangeSet{LogID: tr.Task.LogID, SequenceNumber: tr.Task.ChangeSets[i].SequenceNumber, Groups: tr.Task.ChangeSets[i].ByGroup()}
			if cs.SequenceNumber != want.SequenceNumber || len(cs.Groups) != len(want.Groups) {
				t.Fatalf("result %+v decodes to change set %d of %d groups, want %d of %d", res, cs.SequenceNumber, len(cs.Groups), want.SequenceNumber, len(want.Groups))
			}
		}
	}
}

// crcBackend is a backend whose Put checks the body's CRC32C against its
// bytes.
type crcBackend struct {
	backends.Backend
	puts, withCRC atomic.Int64
	wrong         atomic.Int64
}

func (b *crcBackend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	b.puts.Add(1)
	if c, ok := body.(interface{ CRC32C() (uint32, bool) }); ok {
		if crc, ok := c.CRC32C(); ok {
			b.withCRC.Add(1)
			data := make([]byte, size)
			if _, err := body.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) != crc {
				b.wrong.Add(1)
			}
		}
	}
	return b.Backend.Put(ctx, name, body, size)
}

// TestUploadGivesCRC32C: every object the uploader puts gives the
// backend its CRC32C, from the encoder (put while encoded, encoded first
// when small or compressed, or prepared ahead), and it is right; so
// through the engine's tracking of the body.
func TestUploadGivesCRC32C(t *testing.T) {
	for _, tc := range []struct {
		o    uploader.Options
		size int // of a change: objects of 256 KiB or more are put while they are encoded
	}{
		{uploader.Options{}, 300}, {uploader.Options{}, 300 << 10},
		{uploader.Options{Compression: true}, 300 << 10},
		{uploader.Options{FormatVersion: format.Version2}, 300}, {uploader.Options{FormatVersion: format.Version2}, 300 << 10},
		{uploader.Options{FormatVersion: format.Version2, Compression: true}, 300 << 10},
	} {
		o := tc.o
		be := &crcBackend{Backend: dstltest.NewBackend()}
		u := uploader.NewBackend(be, o)
		tasks := func() []*uploader.Task {
			return []*uploader.Task{{LogID: [16]byte{1}, ChangeSets: []*format.ChangeSet{changeSet(1, 3, 0, "a", strings.Repeat("b", tc.size)), changeSet(1, 4, 7, "c")}}}
		}
		ctx := uploader.WithBodyTracker(t.Context(), func(b io.ReaderAt, n int64) io.ReaderAt { return trackedBody{b} })
		if _, err := u.Upload(ctx, tasks()); err != nil {
			t.Fatal(err)
		}
		p, err := u.Prepare(t.Context(), tasks())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Upload(ctx); err != nil {
			t.Fatal(err)
		}
		p.Release()
		if be.puts.Load() != 2 || be.withCRC.Load() != 2 || be.wrong.Load() != 0 {
			t.Fatalf("%+v, changes of %d bytes: %d puts, %d with a CRC32C, %d of them wrong", o, tc.size, be.puts.Load(), be.withCRC.Load(), be.wrong.Load())
		}
	}
}

// trackedBody passes ReadAt and CRC32C on, as the engine's tracking of an
// attempt's reads does.
type trackedBody struct{ r io.ReaderAt }

func (b trackedBody) ReadAt(p []byte, off int64) (int, error) { return b.r.ReadAt(p, off) }

func (b trackedBody) CRC32C() (uint32, bool) {
	c, ok := b.r.(interface{ CRC32C() (uint32, bool) })
	if !ok {
		return 0, false
	}
	return c.CRC32C()
}

// fickle gives other changes from its second read on.
type fickle struct {
	first, then changeList
	mu          sync.Mutex
	reads       int
}

func (f *fickle) Len() int { return len(f.first) }

func (f *fickle) ReadChanges(i int, dst []format.KeyedChange) int {
	f.mu.Lock()
	if i == 0 {
		f.reads++
	}
	reads := f.reads
	f.mu.Unlock()
	if reads == 1 {
		return f.first.ReadChanges(i, dst)
	}
	return f.then.ReadChanges(i, dst)
}

// TestUploadEncoderFails: a change set the encoder rejects once the Put
// of an object large enough to be put while it is encoded has started
// (its reader gives other changes than it counted) fails the upload with
// the encoder's error, which says it cannot be retried
// (format.ErrInvalidChangeSet), and leaves nothing stored: on a backend
// in memory and on local disk (whose portable layer reports the body's
// failure), and on one that stores without reading (whose object is
// deleted). The uploader encodes the next batch.
func TestUploadEncoderFails(t *testing.T) {
	lb, err := local.Open(t.Context(), local.DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	kc := func(kg int32, s string) format.KeyedChange { return format.KeyedChange{KeyGroup: kg, Data: []byte(s)} }
	for _, version := range []int{format.Version1, format.Version2} {
		for name, be := range map[string]backends.Backend{"memory": dstltest.NewBackend(), "local": lb, "ignores the body": &ignoringBackend{Backend: dstltest.NewBackend()}} {
			u := uploader.NewBackend(be, uploader.Options{JobID: "job", FormatVersion: version})
			bad := &fickle{first: changeList{kc(0, "a"), kc(1, "b")}, then: changeList{kc(0, "a"), kc(1, "bb")}}
			out, err := u.Upload(t.Context(), []*uploader.Task{{LogID: [16]byte{1}, ChangeSets: []*format.ChangeSet{
				changeSet(1, 0, 0, strings.Repeat("x", 300<<10)), {LogID: [16]byte{1}, SequenceNumber: 1, AppendedFrom: bad}}}})
			if !errors.Is(err, format.ErrInvalidChangeSet) || out != nil {
				t.Fatalf("version %d, %s: Upload = %+v, %v; want ErrInvalidChangeSet", version, name, out, err)
			}
			var names []string
			if err := be.List(t.Context(), "job/", func(oi backends.ObjectInfo) error {
				names = append(names, oi.Name)
				return nil
			}); err != nil || len(names) != 0 {
				t.Fatalf("version %d, %s: objects after a failed upload: %v, %v", version, name, names, err)
			}
			out, err = u.Upload(t.Context(), []*uploader.Task{{LogID: [16]byte{2}, ChangeSets: []*format.ChangeSet{changeSet(2, 0, 3, "next")}}})
			if err != nil {
				t.Fatalf("version %d, %s: the next upload: %v", version, name, err)
			}
			if _, ok := be.(*ignoringBackend); !ok {
				checkObject(t, be, out)
			}
			if err := u.Discard(t.Context(), out.Objects[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// ignoringBackend stores an empty object, whatever the body.
type ignoringBackend struct{ backends.Backend }

func (b *ignoringBackend) Put(ctx context.Context, name string, _ io.ReaderAt, _ int64) error {
	return b.Backend.Put(ctx, name, bytes.NewReader(nil), 0)
}
