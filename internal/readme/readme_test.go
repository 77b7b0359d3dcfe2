package readme_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// marker precedes each fenced Go block of the README that the test
// builds; it names the file the block goes into.
var marker = regexp.MustCompile(`^<!-- test: ([A-Za-z0-9_.-]+\.go) -->$`)

// TestProgram builds the README's program in a module that requires this
// repository, runs "write" and then "read" as the README tells a newcomer
// to, and checks their output against the comments of the README's
// commands. It fails when the program stops compiling, is not gofmt'ed,
// fails go vet, or prints something else than the README says.
func TestProgram(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := blocks(readme)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["main.go"]; !ok {
		t.Fatal("README.md has no Go block marked <!-- test: main.go -->")
	}
	for name, src := range files {
		formatted, err := format.Source(src)
		if err != nil {
			t.Fatalf("README.md's %s does not parse: %v", name, err)
		}
		if !bytes.Equal(formatted, src) {
			t.Errorf("README.md's %s is not formatted as gofmt formats it", name)
		}
	}

	dir := t.TempDir()
	mod, err := module(repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), mod, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "quickstart")
	goCommand(t, dir, "build", "-o", bin, ".")
	goCommand(t, dir, "vet", ".")

	// The two runs share a working directory, as the README's do.
	work := filepath.Join(dir, "run")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	want, err := expected(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"write", "read"} {
		out := run(t, work, bin, cmd)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := strings.Join(lines, ", "); got != want[cmd] {
			t.Errorf("go run . %s printed\n%s\nthe README says it prints %q", cmd, out, want[cmd])
		}
	}
}

// blocks returns the README's marked Go blocks by file name.
func blocks(readme []byte) (map[string][]byte, error) {
	files := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(readme))
	line := 0
	for sc.Scan() {
		line++
		m := marker.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		name := m[1]
		if _, dup := files[name]; dup {
			return nil, fmt.Errorf("README.md:%d: a second block for %s", line, name)
		}
		if !sc.Scan() || strings.TrimSpace(sc.Text()) != "```go" {
			return nil, fmt.Errorf("README.md:%d: the marker of %s is not followed by a ```go line", line, name)
		}
		line++
		var src bytes.Buffer
		closed := false
		for sc.Scan() {
			line++
			if sc.Text() == "```" {
				closed = true
				break
			}
			src.WriteString(sc.Text())
			src.WriteByte('\n')
		}
		if !closed {
			return nil, fmt.Errorf("README.md: the block of %s is not closed", name)
		}
		files[name] = src.Bytes()
	}
	return files, sc.Err()
}

// command matches the README's lines that run the program, with what
// they print after "#".
var command = regexp.MustCompile("^go run \\. (write|read) +# (.+)$")

// expected returns what the README says each run prints, its lines joined
// with ", ".
func expected(readme []byte) (map[string]string, error) {
	want := map[string]string{}
	for _, l := range strings.Split(string(readme), "\n") {
		if m := command.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			want[m[1]] = m[2]
		}
	}
	for _, cmd := range []string{"write", "read"} {
		if _, ok := want[cmd]; !ok {
			return nil, fmt.Errorf("README.md has no line \"go run . %s   # WHAT IT PRINTS\"", cmd)
		}
	}
	return want, nil
}

// module returns the go.mod of the program's module: it requires this
// repository's module, replaced by the repository, at the repository's
// Go version.
func module(repo string) ([]byte, error) {
	mod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		return nil, err
	}
	path := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(mod)
	version := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if path == nil || version == nil {
		return nil, fmt.Errorf("%s/go.mod: no module or go line", repo)
	}
	return fmt.Appendf(nil, "module quickstart\n\ngo %s\n\nrequire %s v0.0.0\n\nreplace %s => %s\n",
		version[1], path[1], path[1], repo), nil
}

// goCommand runs the go command in dir. The module's requirements are
// completed from the repository's go.sum and the module cache, offline.
func goCommand(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// run runs the program with one argument in dir and returns its
// standard output.
func run(t *testing.T, dir, bin, arg string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, arg)
	cmd.Dir = dir
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run . %s: %v\n%s%s", arg, err, out, stderr.Bytes())
	}
	return string(out)
}
