package ksana_test

import (
	"bufio"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoDocRendersOverview runs `go doc` on every library package and checks
// that what a reader sees opens with the overview written in the package's
// doc.go and shows each of its # sections. A stray blank line between two
// comment blocks of doc.go makes go doc keep only the last block, silently.
func TestGoDocRendersOverview(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc on every package")
	}
	out, err := exec.Command("go", "list", "-json=ImportPath,Name,Dir", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p struct{ ImportPath, Name, Dir string }
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Name == "main" {
			continue
		}
		checked++
		t.Run(p.ImportPath, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(p.Dir, "doc.go"))
			if err != nil {
				t.Fatalf("every library package has a doc.go: %v", err)
			}
			paragraph, headings := docSource(string(src))
			if paragraph == "" {
				t.Fatalf("doc.go has no package comment")
			}
			rendered, err := exec.Command("go", "doc", p.ImportPath).Output()
			if err != nil {
				t.Fatalf("go doc %s: %v", p.ImportPath, err)
			}
			lines := strings.Split(string(rendered), "\n")
			// The first line is "package x // import ...", the overview follows.
			text := normalize(strings.Join(lines[1:], " "))
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
	if checked < 10 {
		t.Fatalf("checked %d library packages, want every one (at least 10)", checked)
	}
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
