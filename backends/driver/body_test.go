package driver

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

type failAt struct{ n int64 }

func (f failAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.n {
		return 0, errors.New("bad sector")
	}
	return len(p), nil
}

func TestBody(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        io.ReaderAt
		size     int64
		off, n   int64
		wantErr  string // "" : none
		recorded bool   // whether Err reports it
	}{
		{"whole", strings.NewReader("abcdef"), 6, 0, 6, "", false},
		{"part", strings.NewReader("abcdef"), 6, 2, 3, "", false},
		{"empty body", strings.NewReader(""), 0, 0, 0, "", false},
		{"empty read at the end", strings.NewReader("abc"), 3, 3, 0, "", false},
		{"short body", strings.NewReader("abc"), 6, 0, 6, "body ends after 3 of 6 bytes", true},
		{"failing body", failAt{2}, 6, 0, 6, "reading the body: bad sector", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBody(tc.r, tc.size)
			got, err := b.Bytes(tc.off, tc.n)
			if tc.wantErr == "" {
				if err != nil || int64(len(got)) != tc.n {
					t.Fatalf("Bytes(%d, %d) = %q, %v", tc.off, tc.n, got, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Bytes(%d, %d) = %v, want an error containing %q", tc.off, tc.n, err, tc.wantErr)
			}
			if (b.Err() != nil) != tc.recorded {
				t.Fatalf("Err() = %v, recorded %v", b.Err(), tc.recorded)
			}
			if tc.name == "short body" && !errors.Is(b.Err(), io.ErrUnexpectedEOF) {
				t.Fatalf("Err() = %v, want io.ErrUnexpectedEOF", b.Err())
			}
		})
	}
}

// TestBodySection: a section reads its bytes and ends with io.EOF; a read
// past the body's size ends with io.EOF without recording a failure.
func TestBodySection(t *testing.T) {
	b := NewBody(strings.NewReader("abcdef"), 6)
	got, err := io.ReadAll(b.Section(1, 4))
	if err != nil || string(got) != "bcde" {
		t.Fatalf("Section(1, 4) read %q, %v", got, err)
	}
	p := make([]byte, 4)
	if n, err := b.ReadAt(p, 4); n != 2 || err != io.EOF {
		t.Fatalf("ReadAt past the end = %d, %v; want 2, io.EOF", n, err)
	}
	if b.Err() != nil {
		t.Fatalf("Err() = %v after a read past the size", b.Err())
	}
}

// memBody is a body in memory: it hands out its bytes (see Body.SliceAt).
type memBody struct{ b []byte }

func (m memBody) ReadAt(p []byte, off int64) (int, error) {
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m memBody) SliceAt(off, n int64) ([]byte, bool) {
	if off < 0 || n < 0 || off+n > int64(len(m.b)) {
		return nil, false
	}
	return m.b[off : off+n], true
}

// TestBodyInMemory: a body in memory gives its own bytes to View and to
// Reader (a bytes.Reader, which hands them on without a copy), and a copy
// to Bytes; another body is copied (View, Bytes) or read through a
// section (Reader).
func TestBodyInMemory(t *testing.T) {
	data := []byte("abcdef")
	for _, tc := range []struct {
		name     string
		r        io.ReaderAt
		inMemory bool
	}{
		{"in memory", memBody{data}, true},
		{"a reader", strings.NewReader("abcdef"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBody(tc.r, int64(len(data)))
			for _, read := range []struct {
				name    string
				f       func(off, n int64) ([]byte, error)
				aliases bool
			}{
				{"View", b.View, tc.inMemory},
				{"Bytes", b.Bytes, false},
			} {
				got, err := read.f(1, 4)
				if err != nil || string(got) != "bcde" {
					t.Fatalf("%s(1, 4) = %q, %v", read.name, got, err)
				}
				if aliased := &got[0] == &data[1]; aliased != read.aliases {
					t.Fatalf("%s aliases the caller's bytes: %v, want %v", read.name, aliased, read.aliases)
				}
			}
			r := b.Reader(1, 4)
			if _, isBytes := r.(*bytes.Reader); isBytes != tc.inMemory {
				t.Fatalf("Reader is a %T", r)
			}
			for range 2 { // it seeks, as signing over plain HTTP needs
				if got, err := io.ReadAll(r); err != nil || string(got) != "bcde" {
					t.Fatalf("Reader(1, 4) read %q, %v", got, err)
				}
				if _, err := r.Seek(0, io.SeekStart); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
