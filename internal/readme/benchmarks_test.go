package readme_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// reportName is the name of a report of make bench in bench/results:
// DATE-MACHINE.txt.
var reportName = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})-.+\.txt$`)

// TestBenchmarksNewest: docs/BENCHMARKS.md links the newest report in
// bench/results, each of them when several share the newest date.
func TestBenchmarksNewest(t *testing.T) {
	repo := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(repo, "bench", "results"))
	if err != nil {
		t.Fatal(err)
	}
	var newest string
	var names []string // of the newest date
	for _, e := range ents {
		m := reportName.FindStringSubmatch(e.Name())
		switch {
		case m == nil || e.IsDir():
		case m[1] > newest:
			newest, names = m[1], []string{e.Name()}
		case m[1] == newest:
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatal("no report DATE-MACHINE.txt in bench/results")
	}
	for _, name := range names {
		if link := "](../bench/results/" + name + ")"; !strings.Contains(string(doc), link) {
			t.Errorf("docs/BENCHMARKS.md does not link the newest report, bench/results/%s (no %q)", name, link)
		}
	}
}
