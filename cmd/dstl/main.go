// Command dstl runs, measures, inspects and cleans up a dstl changelog
// storage.
//
// Usage:
//
//	dstl demo [flags]                              run a checkpoint-crash-recover cycle and verify it
//	dstl bench --base-path URL [flags]             measure the engine beside the SDK on one backend
//	dstl cost [flags]                              a job's requests and price a month, batched and not, from a measured run
//	dstl inspect [flags] OBJECT-URL|FILE           list the change sets in an object, and check them
//	dstl inspect [flags] --handle FILE [BASE-PATH] show what a handle points to (and check it)
//	dstl gc --base-path URL --grace DUR --keep FILE...  delete old objects no kept handle references
//	dstl checkpoints --base-path URL [--job-id ID] list a job's checkpoint catalog: generations and checkpoints
//	dstl checkpoints show N --base-path URL [...]  show checkpoint N: its parts, key groups, metadata, objects
//	dstl backends [--json]                         list the registered backends and their options
//
// Run "dstl COMMAND --help" for a command's flags. Exit codes: 0 success;
// 1 the command ran and found a problem (the demo's recovered state
// differs, inspect found damaged data, gc found a kept handle's object
// missing, checkpoints found a damaged catalog object, cost's estimate of
// its run is off the counted requests); 2 bad command line or configuration (a base path that is no
// valid URL, an unknown scheme or backend, a bad URL parameter); 3 the command could not run (storage
// unreachable, a file unreadable, ...).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"regexp"

	_ "github.com/dstlgo/dstl/backends/all"
	"github.com/dstlgo/dstl/internal/flagusage"
)

// Exit codes, the same for every command.
const (
	exitOK      = 0
	exitFailed  = 1 // the command ran and found a problem (verification failed, damaged data)
	exitUsage   = 2 // bad command line or configuration
	exitRuntime = 3 // the command could not run (storage unreachable, ...)
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"demo", "[flags]", "run writers through checkpoints, crash, recover and verify the state", runDemo},
		{"bench", "--base-path URL [flags]", "measure append, upload, batching, recovery and persist latency beside the SDK", runBench},
		{"cost", "[flags]", "estimate a job's requests, stored bytes and price a month, batched and not, from a measured run", runCost},
		{"inspect", "[flags] OBJECT-URL|FILE", "list an object's change sets and check them; or, with --handle, a handle's", runInspect},
		{"gc", "--base-path URL --grace DUR --keep FILE...", "delete a job's objects older than the grace period that no kept handle references", runGC},
		{"checkpoints", "--base-path URL [--job-id ID] [show N]", "list a job's checkpoint catalog, or show one checkpoint's parts", runCheckpoints},
		{"backends", "[--json]", "list the registered backends, their URL schemes and options", runBackends},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	level, err := logLevel(os.Getenv(logLevelEnv))
	if err != nil {
		fmt.Fprintf(stderr, "dstl: %v\n", err)
		return exitUsage
	}
	// What the library and the SDKs log goes to stderr, at level or above.
	// Setting slog's default redirects package log's too: both are put
	// back on return.
	prevLogger, prevOut, prevFlags := slog.Default(), log.Writer(), log.Flags()
	defer func() {
		slog.SetDefault(prevLogger)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	}()
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			usage(stderr)
			return exitUsage
		}
		if len(args) > 1 && args[0] == "help" { // dstl help COMMAND
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
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

// logLevelEnv names the environment variable of the level of the log
// records that the commands print.
const logLevelEnv = "DSTL_LOG_LEVEL"

// logLevel parses the value of logLevelEnv: debug, info, warn or error
// (the default, when it is empty).
func logLevel(v string) (slog.Level, error) {
	if v == "" {
		return slog.LevelError, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		return 0, fmt.Errorf("%s=%q: want debug, info, warn or error", logLevelEnv, v)
	}
	return l, nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "dstl: a durable short-term log for stream processors' state changes")
	fmt.Fprintln(w, "\nUsage: dstl COMMAND [flags]\n\nCommands:")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s %s\n", width, c.name, c.summary)
		fmt.Fprintf(w, "  %-*s   dstl %s %s\n", width, "", c.name, c.args)
	}
	fmt.Fprint(w, `
Run 'dstl COMMAND --help' for a command's flags and their defaults. Flags
take one dash or two. Commands that print reports take --json for a
machine-readable one on stdout; progress goes to stderr, and only when it
is a terminal. A command that fails prints one line per distinct failure
on stderr, its cause first. What the library and the storage SDKs log
(retried attempts, the SDKs' warnings) is not printed unless DSTL_LOG_LEVEL
is debug, info or warn (default error); dstl demo --verbose prints its
storage's warnings too.

Exit codes:
  0  success
  1  the command ran and found a problem: the demo's recovered state
     differs, inspect found damaged data or a handle file that does not
     decode, gc found an object of a kept handle missing (and deleted
     nothing) or a kept handle file that does not decode, checkpoints
     found a damaged catalog object, a restored part gone, or no
     checkpoint N to show, cost's estimate of its run is more than 5 %
     off a request count its counter saw
  2  bad command line or configuration: unknown command or flag, bad
     value, a base path that is no valid URL, an unknown URL scheme or
     backend, an unknown or bad URL parameter
  3  the command could not run: storage unreachable, file unreadable,
     gc's deletes failed, ...
`)
}

// newFlagSet returns the flag set of a command, whose --help prints
// synopsis, then about, then the flags with their defaults.
func newFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("dstl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: dstl %s %s\n\n%s\n\nFlags:\n", name, synopsis, about)
		flagusage.PrintFlags(fs)
	}
	return fs
}

// parseFlags parses a command's flags; it returns the exit code to end with
// when parsing ended the command (--help, or an error, which is one line:
// the usage is printed for --help only).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	code, ok := parseInterspersed(fs, args, nil)
	if ok && fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return exitUsage, false
	}
	return code, ok
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, which it appends to *positional (when
// positional is nil, the first positional argument ends parsing and
// fs.Args() holds the rest). "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string, positional *[]string) (int, bool) {
	// The flag package prints an error with the whole usage: the error is
	// printed here instead, on a line of its own, and the usage only when
	// asked for.
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()
	for {
		if err := fs.Parse(args); err != nil {
			fs.SetOutput(out)
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return exitOK, false
			}
			fmt.Fprintf(out, "%s: %s (see %s --help)\n", fs.Name(), flagError(err), fs.Name())
			return exitUsage, false
		}
		if positional == nil || fs.NArg() == 0 {
			return 0, true
		}
		rest := fs.Args()
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			*positional = append(*positional, rest...) // everything after "--"
			return 0, true
		}
		*positional = append(*positional, rest[0])
		args = rest[1:]
	}
}

// flagDashRE matches the flag package's errors up to the dash before the
// flag's name.
var flagDashRE = regexp.MustCompile(`^(flag provided but not defined: |invalid value "(?:[^"\\]|\\.)*" for flag |invalid boolean value "(?:[^"\\]|\\.)*" for |flag needs an argument: )-`)

// flagError returns the message of an error of the flag package with the
// flag's name in the commands' style, two dashes: "--price".
func flagError(err error) string {
	return flagDashRE.ReplaceAllString(err.Error(), "${1}--")
}
