package importrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the path of the dstl module.
const module = "github.com/dstlgo/dstl"

// pkg is what go list says of a package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Module       *struct{ Path string }
}

// graph is the packages of the module and everything they import.
type graph map[string]*pkg

// inModule reports whether the package is one of the dstl module's.
func (p *pkg) inModule() bool { return p.Module != nil && p.Module.Path == module }

// path returns a chain of imports from the package from to the package
// to, which from depends on (without tests), or nil.
func (g graph) path(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var chain []string
			for p := cur; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		if p := g[cur]; p != nil {
			for _, imp := range p.Imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return nil
}

// deps returns the packages the package depends on, without tests,
// sorted.
func (g graph) deps(from string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, imp := range g[p].importsOf(false) {
			if !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(from)
	return slices.Sorted(maps.Keys(seen))
}

// importsOf returns the package's imports, and its tests' with tests.
func (p *pkg) importsOf(tests bool) []string {
	if p == nil {
		return nil
	}
	if !tests {
		return p.Imports
	}
	return slices.Concat(p.Imports, p.TestImports, p.XTestImports)
}

// loadGraph lists the module's packages and their dependencies.
func loadGraph(t *testing.T) graph {
	t.Helper()
	out, err := goCommand(t, "list", "-deps", "-json=ImportPath,Imports,TestImports,XTestImports,Module", module+"/...")
	if err != nil {
		t.Fatal(err)
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		g[p.ImportPath] = p
	}
	if g[module+"/dstl"] == nil {
		t.Fatalf("go list did not list %s/dstl", module)
	}
	return g
}

// goCommand runs the go command with args and returns its standard output.
func goCommand(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// under reports whether the import path is one of the prefixes or a
// package under one of them (a prefix is a path, not a string prefix:
// statestore matches statestore/x, not statestorex).
func under(path string, prefixes ...string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// m returns the import paths of the module's packages of the relative
// paths.
func m(rel ...string) []string {
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = module + "/" + r
	}
	return out
}

var (
	// theLog is the log: the engine, the backends, the uploaders and the
	// conformance suites.
	theLog = m("dstl", "backends", "uploader", "duplicating", "conformance")
	// aboveTheLog is what is built on the log: state stores, the catalog
	// and its collector, Kafka code, simulations, test doubles,
	// commands and examples.
	aboveTheLog = m("statestore", "catalog", "internal/catalogv1", "collect", "kafkastate", "sim", "dstltest", "cmd", "examples")
	// theCatalog is the checkpoint catalog (with its first layout, kept
	// for upgrades) and its collector.
	theCatalog = m("catalog", "internal/catalogv1", "collect")
	// stateAndAbove is what the catalog and the collector must not
	// depend on: the state stores and what is built on them.
	stateAndAbove = m("statestore", "kafkastate", "sim", "dstltest", "cmd", "examples")
	// forTests are the packages meant for tests only.
	forTests = append(m("dstltest", "conformance", "statestore/storetest", "sim", "backends/internal/faultproxy", "examples/internal/exampletest"), "testing")
)

const (
	pebble  = "github.com/cockroachdb/pebble"
	franzGo = "github.com/twmb/franz-go"
)

// rule is one import rule: what it says, the packages it holds for
// (from), whether it is about every package they depend on (deps) or
// about their direct imports, their tests' included, and the import paths
// it forbids.
type rule struct {
	name   string // a short name, for the subtest
	says   string
	from   func(path string) bool
	deps   bool
	forbid func(path string) bool
}

// rules are the import rules of docs/DEPENDENCIES.md.
var rules = []rule{
	{
		name: "log",
		says: "the log (dstl, backends, uploader, duplicating, conformance) depends on no state store, catalog, collector, Kafka code, simulation, test double, command or example, and not on Pebble or franz-go",
		from: func(p string) bool { return under(p, theLog...) },
		deps: true,
		forbid: func(p string) bool {
			return under(p, aboveTheLog...) || under(p, pebble, franzGo)
		},
	},
	{
		name: "catalog-collect",
		says: "catalog (internal/catalogv1 included) and collect depend on no state store and nothing built on one, and not on Pebble or franz-go",
		from: func(p string) bool { return under(p, theCatalog...) },
		deps: true,
		forbid: func(p string) bool {
			return under(p, stateAndAbove...) || under(p, pebble, franzGo)
		},
	},
	{
		name:   "pebble",
		says:   "only statestore and its subpackages import Pebble",
		from:   func(p string) bool { return !under(p, m("statestore")...) },
		forbid: func(p string) bool { return under(p, pebble) },
	},
	{
		name:   "franz-go",
		says:   "only kafkastate and examples/kafkawordcount import franz-go",
		from:   func(p string) bool { return !under(p, m("kafkastate", "examples/kafkawordcount")...) },
		forbid: func(p string) bool { return under(p, franzGo) },
	},
}

// TestImportRules checks each rule against every package of the module.
func TestImportRules(t *testing.T) {
	g := loadGraph(t)
	var paths []string
	for path, p := range g {
		if p.inModule() {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			checked := 0
			for _, path := range paths {
				if !r.from(path) {
					continue
				}
				checked++
				if r.deps {
					// Each forbidden package where a chain of imports
					// first reaches one (not the packages it imports).
					for _, d := range g.deps(path) {
						if !r.forbid(d) {
							continue
						}
						if chain := g.path(path, d); len(chain) > 1 && !r.forbid(chain[len(chain)-2]) {
							t.Errorf("%s depends on %s (%s), but %s", path, d, strings.Join(chain, " → "), r.says)
						}
					}
					continue
				}
				for _, imp := range g[path].importsOf(true) {
					if r.forbid(imp) {
						t.Errorf("%s (or its tests) imports %s, but %s", path, imp, r.says)
					}
				}
			}
			if checked == 0 {
				t.Error("the rule holds for no package: its package list is out of date")
			}
		})
	}
	// Production code imports no package meant for tests. Those packages
	// may import each other.
	t.Run("for-tests", func(t *testing.T) {
		for _, path := range paths {
			if under(path, forTests...) {
				continue
			}
			for _, imp := range g[path].Imports {
				if under(imp, forTests...) {
					t.Errorf("%s imports %s, but production code imports no package meant for tests", path, imp)
				}
			}
		}
	})
}

// TestModuleRequirements: the dstl module requires no module that only the
// bench charts or their browser test need (they are the tool bench/report's,
// a module of its own).
func TestModuleRequirements(t *testing.T) {
	// The go.mod of the module this directory is in.
	modJSON, err := goCommand(t, "mod", "edit", "-json")
	if err != nil {
		t.Fatal(err)
	}
	var mod struct {
		Module  struct{ Path string }
		Require []struct{ Path string }
	}
	if err := json.Unmarshal(modJSON, &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Module.Path != module || len(mod.Require) == 0 {
		t.Fatalf("go.mod of %q, requiring %d modules: not the dstl module's", mod.Module.Path, len(mod.Require))
	}
	for _, r := range mod.Require {
		if under(r.Path, "gonum.org/v1/plot", "github.com/chromedp") {
			t.Errorf("go.mod requires %s, which only the bench charts need", r.Path)
		}
	}
}
