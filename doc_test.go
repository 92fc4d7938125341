package ksana_test

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoDocRendersOverview renders, as go doc does, the package comment of
// every library package and checks that what a reader sees opens with the
// overview written in the package's doc.go and shows each of its #
// sections. A stray blank line between two comment blocks of doc.go makes
// go doc keep only the last block, silently. The packages are read in
// process with go/build, go/parser and go/doc, the packages go doc itself
// uses: the same files for this platform, the same comment, the same text.
func TestGoDocRendersOverview(t *testing.T) {
	t.Parallel()
	pkgs, err := libraryPackages(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		t.Run(p.ImportPath, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join(p.Dir, "doc.go"))
			if err != nil {
				t.Fatalf("every library package has a doc.go: %v", err)
			}
			paragraph, headings := docSource(string(src))
			if paragraph == "" {
				t.Fatalf("doc.go has no package comment")
			}
			rendered, err := renderDoc(p)
			if err != nil {
				t.Fatalf("render the doc of %s: %v", p.ImportPath, err)
			}
			lines := strings.Split(rendered, "\n")
			text := normalize(strings.Join(lines, " "))
			want := normalize(firstSentence(paragraph))
			if !strings.HasPrefix(text, want) {
				got := text[:min(len(text), len(want)+40)]
				t.Errorf("go doc opens with\n\t%q\nwant the overview's first sentence\n\t%q", got, want)
			}
			shown := map[string]bool{}
			for _, l := range lines {
				if strings.HasPrefix(l, "# ") {
					shown[strings.TrimSpace(l)] = true
				}
			}
			for _, h := range headings {
				if !shown[h] {
					t.Errorf("go doc does not show section %q of doc.go", h)
				}
			}
		})
	}
	if len(pkgs) < 10 {
		t.Fatalf("checked %d library packages, want every one (at least 10)", len(pkgs))
	}
}

// libraryPackages lists the packages of the module rooted at root that
// are not commands, as go list ./... would: directories of testdata, of
// names starting with . or _ and of other modules (bench/) are skipped.
func libraryPackages(root string) ([]*build.Package, error) {
	modPath, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	var pkgs []*build.Package
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != root {
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		p, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		switch {
		case errors.As(err, &noGo):
			return nil
		case err != nil:
			return fmt.Errorf("%s: %w", path, err)
		case p.Name == "main":
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		p.ImportPath = modPath
		if rel != "." {
			p.ImportPath += "/" + filepath.ToSlash(rel)
		}
		pkgs = append(pkgs, p)
		return nil
	})
	return pkgs, err
}

// modulePath reads the module line of a go.mod file.
func modulePath(goMod string) (string, error) {
	src, err := os.ReadFile(goMod)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", goMod)
}

// renderDoc returns the package comment of p as go doc prints it after
// its "package x // import" line: the comment of every file that has one,
// read by go/doc and printed as text, # headings included.
func renderDoc(p *build.Package) (string, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
		if err != nil {
			return "", err
		}
		files = append(files, f)
	}
	d, err := doc.NewFromFiles(fset, files, p.ImportPath)
	if err != nil {
		return "", err
	}
	return string(d.Text(d.Doc)), nil
}

// docSource returns the first paragraph of the comment lines of a doc.go
// and its "# " headings, read from the source as its author wrote it.
func docSource(src string) (first string, headings []string) {
	var para []string
	inFirst := true
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "package ") {
			break
		}
		if !strings.HasPrefix(line, "//") || strings.HasPrefix(line, "//go:") {
			continue
		}
		body := strings.TrimSpace(strings.TrimPrefix(line, "//"))
		if strings.HasPrefix(body, "# ") {
			headings = append(headings, body)
		}
		if inFirst {
			if body == "" && len(para) > 0 {
				inFirst = false
				continue
			}
			para = append(para, body)
		}
	}
	return strings.Join(para, " "), headings
}

// firstSentence cuts text after its first period followed by a space.
func firstSentence(text string) string {
	if i := strings.Index(text, ". "); i >= 0 {
		return text[:i+1]
	}
	return text
}

// normalize drops doc-link brackets and collapses white space, as go doc
// renders [Name] as Name and reflows lines.
func normalize(s string) string {
	s = strings.NewReplacer("[", "", "]", "").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// TestLibraryReadsNoEnvironment: the binaries own their environment. No
// library package (everything but cmd/, examples/ and internal/) calls
// os.Getenv and its kin or exports a FromEnv reader: its constructors take
// Go values.
func TestLibraryReadsNoEnvironment(t *testing.T) {
	t.Parallel()
	reads := map[string]bool{"Getenv": true, "LookupEnv": true, "Environ": true, "ExpandEnv": true}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch path {
			case "cmd", "examples", "internal", "bench", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "os" && reads[n.Sel.Name] {
					t.Errorf("%s: calls os.%s; a library package reads no environment variable", path, n.Sel.Name)
				}
			case *ast.FuncDecl:
				if n.Name.IsExported() && strings.HasSuffix(n.Name.Name, "FromEnv") {
					t.Errorf("%s: exports %s; reading the environment belongs to the binaries", path, n.Name.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
