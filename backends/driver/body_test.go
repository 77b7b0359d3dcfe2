package driver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// TestBodyInMemory: a body in memory gives its own bytes to View, and a
// copy to Bytes; another body is copied by both.
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
		})
	}
}

// TestBodyClose: after Close, reads of the body fail with ErrBodyClosed
// and record no failure of the caller's body; Close waits for a read in
// progress.
func TestBodyClose(t *testing.T) {
	gate := &gatedReaderAt{r: strings.NewReader("abcdef"), entered: make(chan struct{}), release: make(chan struct{})}
	b := NewBody(gate, 6)
	read := make(chan string)
	go func() {
		p := make([]byte, 3)
		n, err := b.ReadAt(p, 0)
		read <- fmt.Sprintf("%q %v", p[:n], err)
	}()
	<-gate.entered // a read is copying the caller's bytes
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a read was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate.release)
	if got := <-read; got != `"abc" <nil>` {
		t.Fatalf("the read in progress got %s", got)
	}
	<-closed
	if _, err := io.ReadAll(b.Section(0, 6)); !errors.Is(err, ErrBodyClosed) {
		t.Fatalf("a read after Close: %v, want ErrBodyClosed", err)
	}
	if err := b.Err(); err != nil {
		t.Fatalf("Err() = %v after reads past Close: want nil", err)
	}
	m := NewBody(memBody{[]byte("abcdef")}, 6)
	m.Close()
	if p, ok := m.SliceAt(0, 6); ok {
		t.Fatalf("SliceAt after Close = %q", p)
	}
	if _, err := m.View(0, 6); !errors.Is(err, ErrBodyClosed) {
		t.Fatalf("View after Close: %v, want ErrBodyClosed", err)
	}
}

// gatedReaderAt signals each ReadAt on entered and waits for release.
type gatedReaderAt struct {
	r        io.ReaderAt
	entered  chan struct{}
	release  chan struct{}
	signaled bool
}

func (g *gatedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if !g.signaled {
		g.signaled = true
		close(g.entered)
		<-g.release
	}
	return g.r.ReadAt(p, off)
}

// TestBodyNotReadAfterPut: net/http may go on reading a request's body
// after the round trip returned (here the server answers 409 before it
// reads the body, then drains it slowly); once the body is closed, as the
// portable layer does when the driver's Put returns, no byte of the
// caller's is read any more.
func TestBodyNotReadAfterPut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		w.WriteHeader(http.StatusConflict) // an answer before the body is read,
		_ = rc.Flush()
		buf := make([]byte, 1<<20) // then the body, slowly
		for {
			time.Sleep(time.Millisecond)
			if _, err := r.Body.Read(buf); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	data := make([]byte, 64<<20)
	counted := &countingReaderAt{r: bytes.NewReader(data)}
	b := NewBody(counted, int64(len(data)))
	req, err := http.NewRequest(http.MethodPut, srv.URL, b.Section(0, b.Size()))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = b.Size()
	resp, err := srv.Client().Do(req)
	if err == nil {
		// Closed at the end: the connection stays up, and the
		// transport's write loop with it, while the server drains.
		defer resp.Body.Close()
	}
	b.Close() // as Bucket.Put does when the driver's Put returns
	atClose := counted.n.Load()
	time.Sleep(200 * time.Millisecond) // the transport's write loop goes on
	if late := counted.n.Load() - atClose; late > 0 {
		t.Fatalf("%d bytes of the caller's body were read after Close", late)
	}
	if atClose >= int64(len(data)) {
		t.Skipf("the transport read the whole body before the answer (%d bytes): nothing was left to read late", atClose)
	}
}

// countingReaderAt counts the bytes read from r.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}
