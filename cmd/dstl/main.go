// Command dstl runs, measures and inspects a dstl changelog storage.
//
// Usage:
//
//	dstl demo [flags]      run a checkpoint-crash-recover cycle and verify it
//	dstl backends          list the registered backends
//
// Run "dstl COMMAND -h" for a command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	_ "github.com/dstlgo/dstl/backends/all"
)

// exit codes
const (
	exitOK      = 0
	exitFailed  = 1 // the command ran and found a problem (verification failed)
	exitUsage   = 2 // bad command line
	exitRuntime = 3 // the command could not run (storage unreachable, ...)
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"demo", "run writers through checkpoints, crash, recover and verify the state", runDemo},
		{"backends", "list the registered backends and their URL schemes", runBackends},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "dstl: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "dstl: a durable short-term log for stream processors' state changes")
	fmt.Fprintln(w, "\nUsage: dstl COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'dstl COMMAND -h' for a command's flags.")
}

// parseFlags parses a command's flags; it returns the exit code to end with
// when parsing ended the command (-h, or an error).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return exitUsage, false
	}
	return 0, true
}
