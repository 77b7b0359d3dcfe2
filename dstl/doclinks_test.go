package dstl_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// docLinkRE matches what is left of a doc link, such as "[Name]" or
// "[pkg.Name]", that godoc could not resolve: it shows as plain text.
var docLinkRE = regexp.MustCompile(`\[\*?[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\]`)

// TestDocLinks: every doc link to an exported name in the package's
// comments names an identifier declared in the package or an imported
// package.
func TestDocLinks(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	files := pkgs["dstl"].Files
	var list []*ast.File
	for _, f := range files {
		list = append(list, f)
	}
	p, err := doc.NewFromFiles(fset, list, "github.com/dstlgo/dstl/dstl", doc.PreserveAST)
	if err != nil {
		t.Fatal(err)
	}
	parse := p.Parser()
	for name, f := range files {
		for _, cg := range f.Comments {
			for _, text := range plainTexts(parse.Parse(cg.Text())) {
				for _, m := range docLinkRE.FindAllString(text, -1) {
					if exported(m) {
						t.Errorf("%s: doc link %s names nothing in the package or its imports", name, m)
					}
				}
			}
		}
	}
}

// exported reports whether the last name of a link such as "[pkg.Name]"
// is exported: links to unexported names, which godoc does not show, are
// left alone.
func exported(link string) bool {
	name := strings.Trim(link, "[]*")
	name = name[strings.LastIndexByte(name, '.')+1:]
	return ast.IsExported(name)
}

// plainTexts returns the plain text of a parsed comment: what is no link.
func plainTexts(d *comment.Doc) []string {
	var out []string
	var walk func([]comment.Text)
	walk = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case comment.Plain:
				out = append(out, string(t))
			case comment.Italic:
				out = append(out, string(t))
			case *comment.Link:
				walk(t.Text)
			}
		}
	}
	for _, b := range d.Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			walk(b.Text)
		case *comment.Heading:
			walk(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if p, ok := c.(*comment.Paragraph); ok {
						walk(p.Text)
					}
				}
			}
		}
	}
	return out
}
