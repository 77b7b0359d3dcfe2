package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestHelp: "wordcount -h" (and its other spellings) prints the commands
// on stdout and exits 0; each command's -h prints its flags and exits 0;
// an unknown command is a usage error.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // what stdout starts with
		stderr string // what stderr holds
	}{
		{[]string{"-h"}, 0, "Usage: wordcount run|verify [flags]", ""},
		{[]string{"--help"}, 0, "Usage: wordcount run|verify [flags]", ""},
		{[]string{"help"}, 0, "Usage: wordcount run|verify [flags]", ""},
		{nil, 2, "", "Usage: wordcount run|verify [flags]"},
		{[]string{"run", "-h"}, 0, "", "--instances"},
		{[]string{"verify", "-help"}, 0, "", "-scales"},
		{[]string{"count"}, 2, "", `wordcount: unknown command "count" (run, verify)`},
	} {
		var stdout, stderr bytes.Buffer
		code := mainCode(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.HasPrefix(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("wordcount %q: exit %d, stdout %q, stderr %q; want exit %d, stdout from %q, stderr with %q",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}

// TestHelpFlagStyle: the help names the flags with two dashes, as dstl
// does, and no flag with one.
func TestHelpFlagStyle(t *testing.T) {
	oneDash := regexp.MustCompile(`(^|[\s\[(])-[a-z]`)
	for _, tc := range []struct {
		args []string
		flag string // a flag the help names
	}{
		{[]string{"--help"}, "--instances P"},
		{[]string{"run", "-h"}, "  --instances int"},
		{[]string{"verify", "--help"}, "  --disk"},
	} {
		var stdout, stderr bytes.Buffer
		code := mainCode(context.Background(), tc.args, &stdout, &stderr)
		help := stdout.String() + stderr.String()
		if code != 0 || !strings.Contains(help, tc.flag) || oneDash.MatchString(help) {
			t.Errorf("wordcount %q: exit %d, want 0, a help that names %q and no flag with one dash (%q):\n%s",
				tc.args, code, tc.flag, oneDash.FindString(help), help)
		}
	}
}

// TestPartitionsSaid: the help of -records and verify's first line say
// the same number of input partitions, the number that have records.
func TestPartitionsSaid(t *testing.T) {
	var o options
	fs := flag.NewFlagSet("wordcount run", flag.ContinueOnError)
	o.flags(fs, true)
	n := fmt.Sprintf("each of the %d input partitions that have words", nonEmptyPartitions())
	if usage := fs.Lookup("records").Usage; !strings.Contains(usage, n) {
		t.Errorf("-records: %q, want it to say %q", usage, n)
	}
	if line := verifyBanner(verifyOptions{options: options{records: 800, basePath: "b", jobID: "j"}, scales: []layout{{instances: 3, processes: 3}}}, "in memory"); !strings.Contains(line, "800 records in "+n) {
		t.Errorf("verify says %q, want %q", line, "800 records in "+n)
	}
}
