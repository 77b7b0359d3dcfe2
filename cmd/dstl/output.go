package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dstlgo/dstl/internal/benchreport"
)

// formatBytes writes n bytes in the largest binary unit below it, with
// three significant digits: "812 B", "1.50 KiB", "64.0 MiB", "2.00 GiB"
// (as the chart tool of dstl bench's reports writes them too).
func formatBytes(n int64) string { return benchreport.FormatBytes(n) }

// formatRate writes a throughput in bytes per second.
func formatRate(bytesPerSecond float64) string {
	return formatBytes(int64(bytesPerSecond)) + "/s"
}

// writeJSON writes v as indented JSON and returns the exit code.
func writeJSON(w io.Writer, stderr io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "dstl: write JSON: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// printer is a report that prints itself as a table for people.
type printer interface{ print(w io.Writer) }

// emit writes a report, as JSON or as a table, and returns the exit code:
// exitFailed when ok is false.
func emit(stdout, stderr io.Writer, asJSON bool, rep printer, ok bool) int {
	if asJSON {
		if code := writeJSON(stdout, stderr, rep); code != exitOK {
			return code
		}
	} else {
		rep.print(stdout)
	}
	if !ok {
		return exitFailed
	}
	return exitOK
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress draws a one-line progress bar, redrawn a few times a second, on
// a terminal; on anything else it draws nothing, so that logs and pipes
// stay clean. Its methods are safe for concurrent use; a nil *progress
// does nothing.
type progress struct {
	w    io.Writer
	mu   sync.Mutex
	step string
	done float64 // 0..1 of the current step
	t0   time.Time
	stop chan struct{}
	wg   sync.WaitGroup
}

// newProgress returns a progress bar on w, or nil when w is not a terminal.
func newProgress(w io.Writer) *progress {
	if !isTerminal(w) {
		return nil
	}
	p := &progress{w: w, t0: time.Now(), stop: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	})
	return p
}

// begin starts a step named step at 0 %.
func (p *progress) begin(step string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.step, p.done = step, 0
	p.mu.Unlock()
}

// set sets the share of the current step that is done, from 0 to 1.
func (p *progress) set(done float64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.done = min(max(done, 0), 1)
	p.mu.Unlock()
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	const width = 30
	n := int(p.done * width)
	fmt.Fprintf(p.w, "\r\x1b[K%-40.40s [%s%s] %3.0f%% %s", p.step, strings.Repeat("=", n), strings.Repeat(" ", width-n),
		p.done*100, time.Since(p.t0).Round(time.Second))
}

// close stops drawing and clears the line.
func (p *progress) close() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	fmt.Fprint(p.w, "\r\x1b[K")
}

// printf writes a message to w, which is the progress bar's writer or not:
// the bar's line is cleared first, under its lock, so that the message
// starts a line of its own; the bar is drawn again below it.
func (p *progress) printf(w io.Writer, format string, args ...any) {
	if p == nil {
		fmt.Fprintf(w, format, args...)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprint(p.w, "\r\x1b[K")
	fmt.Fprintf(w, format, args...)
}
