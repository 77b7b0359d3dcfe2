package readme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpening: the README opens with the two commands a newcomer runs,
// "make demo" and "make test", then how to get the library and the
// command, then what dstl is: what "make test" needs besides Go is a
// pointer to CONTRIBUTING.md there, its list further down. The README
// stays at most 250 lines.
func TestOpening(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) > 250 {
		t.Errorf("README.md has %d lines, want at most 250", len(lines))
	}
	if len(lines) < 5 || lines[0] != "# dstl" || lines[2] != "```sh" ||
		!strings.HasPrefix(lines[3], "make demo ") || !strings.HasPrefix(lines[4], "make test ") {
		t.Fatalf("README.md does not open with a block of make demo and make test:\n%s", strings.Join(lines[:min(len(lines), 6)], "\n"))
	}
	for i, line := range lines {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if strings.Contains(line, "Node.js") || strings.Contains(line, "openssl") {
			t.Errorf("README.md:%d: the tools of make test before the first section, between the commands and what dstl is: %s", i+1, line)
		}
	}
}
