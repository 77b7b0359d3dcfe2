// Package flagusage prints the flags of a command as dstl and the
// examples name them: with two dashes (--flag), which package flag
// accepts as well as one.
package flagusage

import (
	"flag"
	"fmt"
)

// PrintFlags writes the flags of fs with two dashes, their type and their
// default, like flag.PrintDefaults.
func PrintFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		typ, help := flag.UnquoteUsage(f)
		if typ != "" {
			typ = " " + typ
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s", f.Name, typ, help)
		if def := f.DefValue; def != "" && def != "false" && def != "0" {
			if typ == " string" {
				def = fmt.Sprintf("%q", def)
			}
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}

// Set makes fs's usage, which -h and --help print, "Usage of NAME:" and
// its flags as PrintFlags writes them.
func Set(fs *flag.FlagSet) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
		PrintFlags(fs)
	}
}
