package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dstlgo/dstl/dstl"
)

// persistHandles runs writers on a local storage under dir with job id
// job: each appends changes and persists once, in an object of its own
// (no batching delay). It returns each writer's handle.
func persistHandles(t *testing.T, dir, job string, writers int) []dstl.Handle {
	t.Helper()
	return persistHandlesVersion(t, dir, job, writers, 1)
}

// persistHandlesVersion is persistHandles with the objects in the format
// version given.
func persistHandlesVersion(t *testing.T, dir, job string, writers, version int) []dstl.Handle {
	t.Helper()
	ctx := context.Background()
	cfg := dstl.DefaultConfig("file://" + dir)
	cfg.JobID = job
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	cfg.FormatVersion = version
	s, err := dstl.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hs := make([]dstl.Handle, writers)
	for i := range writers {
		w, err := s.NewWriter(fmt.Sprintf("op-%d", i), dstl.KeyGroupRange{Start: i * 4, End: i*4 + 3})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AppendMeta(ctx, []byte("meta")); err != nil {
			t.Fatal(err)
		}
		for j := range 50 {
			if err := w.Append(ctx, i*4+j%4, bytes.Repeat([]byte{byte('a' + j%26)}, 100)); err != nil {
				t.Fatal(err)
			}
		}
		f, err := w.Persist(ctx, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.Confirm(r.From, r.To, 1) // the objects are the checkpoint's now: closing deletes nothing
		hs[i] = r.Remote
	}
	return hs
}

// writeHandleFile writes handles to a file in the JSON encoding, one per
// line, or, for one handle and binary, in the binary encoding.
func writeHandleFile(t *testing.T, path string, binary bool, hs ...dstl.Handle) string {
	t.Helper()
	var buf bytes.Buffer
	for _, h := range hs {
		var b []byte
		var err error
		if binary {
			b, err = h.MarshalBinary()
		} else {
			b, err = json.Marshal(h)
			b = append(b, '\n')
		}
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLI runs the command and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// objectPath is the file of a local backend's object.
func objectPath(dir, name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }
