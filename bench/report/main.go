// Command report draws the charts of a dstl bench report: an SVG per
// section of dstl bench and an index.html that shows them. It is a tool of
// the dstl repository, in a Go module of its own, so that the dstl module
// requires no chart or browser package: make bench runs it after its
// runs, and make bench-report runs it for any saved report.
//
// Usage, from the repository's root:
//
//	make bench-report REPORT=FILE.json [CHARTS=DIR]
//
// or from this directory:
//
//	go run . --in FILE --out DIR
//
// Exit codes: 0 success; 1 the file is no bench report; 2 bad command
// line; 3 the charts could not be written (a file unreadable, a directory
// not writable, ...).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Exit codes, as dstl's.
const (
	exitOK      = 0
	exitFailed  = 1 // the file is no bench report
	exitUsage   = 2 // bad command line
	exitRuntime = 3 // the charts could not be written
)

const about = `Draws charts of a bench report: an SVG per section of dstl bench, made from
the JSON that dstl bench --save writes or the one that make bench writes
(an object of such reports by backend run name), and an index.html that
shows them with links to the JSON and, when there is one beside it, the
text report. Everything is written into --out, which is created; nothing
is fetched and no browser is needed.

The charts: (b) the engine's upload throughput over the SDK's put, per
backend and object size; (c) objects written per second against the
writers persisting together; (d) recovery read throughput over the SDK's
get; (e) persist latency, p50 with a whisker to p99, per backend, in (b)
and (c); (f) sustained logging over the backend's parallel Put, per backend and
writer count (when the report has that section).

From the repository's root, make bench-report REPORT=FILE.json [CHARTS=DIR]
runs this command (CHARTS defaults to the report's path without .json).`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command with the arguments args and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the JSON report to draw (required)")
	out := fs.String("out", "", "the `DIR`ectory to write the SVG charts and index.html into (required)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run . --in FILE --out DIR\n\n%s\n\nFlags:\n", about)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "report: unexpected arguments %q\n", fs.Args())
		return exitUsage
	case *in == "":
		fmt.Fprintln(stderr, "report: --in is required")
		return exitUsage
	case *out == "":
		fmt.Fprintln(stderr, "report: --out is required")
		return exitUsage
	}
	data, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintf(stderr, "report: --in: %v\n", err)
		return exitRuntime
	}
	runs, err := decodeBenchRuns(data)
	if err != nil {
		fmt.Fprintf(stderr, "report: --in %s: %v\n", *in, err)
		return exitFailed
	}
	charts, err := writeBenchCharts(runs, *in, *out)
	if err != nil {
		fmt.Fprintf(stderr, "report: %v\n", err)
		return exitRuntime
	}
	for _, c := range charts {
		fmt.Fprintln(stdout, filepath.Join(*out, c.File))
	}
	fmt.Fprintln(stdout, filepath.Join(*out, "index.html"))
	return exitOK
}
