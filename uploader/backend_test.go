package uploader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/uploader"
)

func changeSet(log byte, sqn uint64, kg int32, changes ...string) *format.ChangeSet {
	g := format.Group{KeyGroup: kg}
	for _, c := range changes {
		g.Changes = append(g.Changes, []byte(c))
	}
	return &format.ChangeSet{LogID: [16]byte{log}, SequenceNumber: sqn, Groups: []format.Group{g}}
}

// TestBackendUpload: a batch of tasks goes into one object under the job's
// prefix, each change set at the offset and length its result names, in
// the order of its task.
func TestBackendUpload(t *testing.T) {
	for _, o := range []uploader.Options{{}, {Compression: true}, {FormatVersion: format.Version2}, {FormatVersion: format.Version2, Compression: true}} {
		compression := o.Compression
		t.Run(fmt.Sprintf("version=%d/%s", max(o.FormatVersion, 1), map[bool]string{false: "plain", true: "compressed"}[compression]), func(t *testing.T) {
			mem := dstltest.NewBackend()
			u := uploader.NewBackend(mem, uploader.Options{JobID: "job", Compression: compression, BufferSize: 64, Concurrency: 2, FormatVersion: o.FormatVersion})
			a := &uploader.Task{LogID: [16]byte{1}, ChangeSets: []*format.ChangeSet{changeSet(1, 3, 0, "a", "b"), changeSet(1, 4, 1, "c")}}
			b := &uploader.Task{LogID: [16]byte{2}, ChangeSets: []*format.ChangeSet{changeSet(2, 0, 5, strings.Repeat("x", 1000))}}
			out, err := u.Upload(t.Context(), []*uploader.Task{a, b})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Objects) != 1 || len(out.Tasks) != 2 {
				t.Fatalf("output %+v: want one object and two task results", out)
			}
			obj := out.Objects[0]
			if objname.Parse("job/", obj.Name).Kind != objname.Log {
				t.Fatalf("object %q is no log object of the job", obj.Name)
			}
			r, err := mem.Get(t.Context(), obj.Name, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(r)
			r.Close()
			if int64(len(data)) != obj.Size {
				t.Fatalf("object of %d bytes, output says %d", len(data), obj.Size)
			}
			for _, tr := range out.Tasks {
				if len(tr.Results) != len(tr.Task.ChangeSets) {
					t.Fatalf("%d results for %d change sets", len(tr.Results), len(tr.Task.ChangeSets))
				}
				for i, res := range tr.Results {
					want := tr.Task.ChangeSets[i]
					if res.Object != obj.Name || res.SequenceNumber != want.SequenceNumber {
						t.Fatalf("result %+v for change set %d", res, want.SequenceNumber)
					}
					got, err := format.DecodeFrame(obj.Name, res.Offset, data[res.Offset:res.Offset+res.Length])
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("decoded %+v at offset %d, want %+v", got, res.Offset, want)
					}
				}
			}
			if err := u.Discard(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
			if _, err := mem.Get(t.Context(), obj.Name, 0, -1); !errors.Is(err, backends.ErrNotFound) {
				t.Fatalf("Get after Discard = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestBackendUploadFailure: a failed put is the attempt's error, with no
// output.
func TestBackendUploadFailure(t *testing.T) {
	mem := dstltest.NewBackend()
	boom := errors.New("boom")
	mem.SetFault(dstltest.FailAll(dstltest.OpPut, boom))
	u := uploader.NewBackend(mem, uploader.Options{})
	out, err := u.Upload(t.Context(), []*uploader.Task{{ChangeSets: []*format.ChangeSet{changeSet(1, 0, 0, "a")}}})
	if !errors.Is(err, boom) || out != nil {
		t.Fatalf("Upload = %+v, %v; want no output and the put's error", out, err)
	}
}

// TestTrackBody: outside an attempt the body is returned as it is; within
// one, through the attempt's tracker, which sees the object's size.
func TestTrackBody(t *testing.T) {
	body := bytes.NewReader([]byte("abc"))
	if got := uploader.TrackBody(context.Background(), body, 3); got != body {
		t.Fatal("TrackBody changed the body outside an attempt")
	}
	var size int64
	tracked := strings.NewReader("tracked")
	ctx := uploader.WithBodyTracker(context.Background(), func(b io.ReaderAt, n int64) io.ReaderAt {
		size = n
		return tracked
	})
	if got := uploader.TrackBody(ctx, body, 3); got != tracked || size != 3 {
		t.Fatalf("TrackBody = %v (size %d), want the tracker's body for 3 bytes", got, size)
	}
}

// TestBackendPrepare: a prepared batch is put by each attempt under a name
// of its own, with the same bytes and offsets, and after its release the
// uploader encodes the next batch in the same buffer.
func TestBackendPrepare(t *testing.T) {
	mem := dstltest.NewBackend()
	u := uploader.NewBackend(mem, uploader.Options{JobID: "job", Concurrency: 1})
	task := &uploader.Task{LogID: [16]byte{1}, ChangeSets: []*format.ChangeSet{changeSet(1, 3, 0, "a", "b"), changeSet(1, 4, 1, "c")}}
	p, err := u.Prepare(t.Context(), []*uploader.Task{task})
	if err != nil {
		t.Fatal(err)
	}
	var objects [][]byte
	var names []string
	for range 2 {
		out, err := p.Upload(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Objects) != 1 || len(out.Tasks) != 1 || out.Tasks[0].Task != task || len(out.Tasks[0].Results) != 2 {
			t.Fatalf("output %+v: want one object and the task's two results", out)
		}
		name := out.Objects[0].Name
		r, err := mem.Get(t.Context(), name, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(r)
		r.Close()
		for i, res := range out.Tasks[0].Results {
			if res.Object != name {
				t.Fatalf("result %d names %q, the attempt wrote %q", i, res.Object, name)
			}
			got, err := format.DecodeFrame(name, res.Offset, data[res.Offset:res.Offset+res.Length])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, task.ChangeSets[i]) {
				t.Fatalf("decoded %+v, want %+v", got, task.ChangeSets[i])
			}
		}
		objects, names = append(objects, data), append(names, name)
	}
	if names[0] == names[1] || !bytes.Equal(objects[0], objects[1]) {
		t.Fatalf("attempts wrote %q and %q: want two names, the same bytes", names[0], names[1])
	}
	p.Release()
	p.Release() // a second release does nothing
	// The released buffer serves the next batch, which is whole.
	other := &uploader.Task{LogID: [16]byte{2}, ChangeSets: []*format.ChangeSet{changeSet(2, 0, 5, strings.Repeat("y", 100))}}
	out, err := u.Upload(t.Context(), []*uploader.Task{other})
	if err != nil {
		t.Fatal(err)
	}
	r, err := mem.Get(t.Context(), out.Objects[0].Name, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	r.Close()
	res := out.Tasks[0].Results[0]
	if got, err := format.DecodeFrame(res.Object, res.Offset, data[res.Offset:res.Offset+res.Length]); err != nil || !reflect.DeepEqual(got, other.ChangeSets[0]) {
		t.Fatalf("next batch decoded %+v, %v", got, err)
	}
}

// TestBackendPrepareError: a change set that cannot be encoded fails
// Prepare with an error naming it and its log, and leaves nothing to
// release.
func TestBackendPrepareError(t *testing.T) {
	u := uploader.NewBackend(dstltest.NewBackend(), uploader.Options{JobID: "job"})
	bad := changeSet(7, 9, 0, "a")
	bad.Groups = append(bad.Groups, bad.Groups[0]) // key group 0 twice
	p, err := u.Prepare(t.Context(), []*uploader.Task{{LogID: [16]byte{7}, ChangeSets: []*format.ChangeSet{bad}}})
	if err == nil || p != nil {
		t.Fatalf("Prepare = %v, %v; want an error", p, err)
	}
	if !errors.Is(err, format.ErrInvalidChangeSet) || !strings.Contains(err.Error(), "change set 9 of log 07") {
		t.Fatalf("error %q is no ErrInvalidChangeSet naming change set 9 of log 07", err)
	}
}

// TestBackendUploadAfterRelease: a prepared object put after its release
// fails, rather than storing an empty object its results would claim.
func TestBackendUploadAfterRelease(t *testing.T) {
	mem := dstltest.NewBackend()
	u := uploader.NewBackend(mem, uploader.Options{JobID: "job", Concurrency: 1})
	p, err := u.Prepare(t.Context(), []*uploader.Task{{LogID: [16]byte{1}, ChangeSets: []*format.ChangeSet{changeSet(1, 1, 0, "a")}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if out, err := p.Upload(t.Context()); err == nil {
		t.Fatalf("Upload after Release stored %+v", out.Objects)
	}
	var names []string
	if err := mem.List(t.Context(), "", func(oi backends.ObjectInfo) error {
		names = append(names, oi.Name)
		return nil
	}); err != nil || len(names) != 0 {
		t.Fatalf("objects after an upload after Release: %v, %v", names, err)
	}
}
