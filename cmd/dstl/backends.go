package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/dstlgo/dstl/dstl"
)

func runBackends(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dstl backends", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fmt.Fprintf(stdout, "%-10s %s\n", "STORAGE", "URL SCHEMES")
	for _, b := range dstl.Backends() {
		fmt.Fprintf(stdout, "%-10s %s\n", b.ID, strings.Join(b.Schemes, ", "))
	}
	return exitOK
}
