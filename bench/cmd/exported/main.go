// Command exported counts the exported identifiers of a module's packages:
// top-level constants, variables, types and functions, and the exported
// methods of exported types (tests, main packages and testdata aside).
// Packages under internal/ are not importable by other modules and are
// counted apart. With a TYPE argument ("limiter.Limiter") it also counts
// that type's exported methods.
//
//	go -C bench run ./cmd/exported .. limiter.Limiter
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: exported DIR [PKG.Type]")
		os.Exit(2)
	}
	root := os.Args[1]
	counts := map[string]int{}
	methods := map[string]int{}
	filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if info.IsDir() {
			n := info.Name()
			if path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			// A nested module (bench/) is not this module's.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil || f.Name.Name == "main" {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil {
					t := d.Recv.List[0].Type
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					}
					if ix, ok := t.(*ast.IndexExpr); ok {
						t = ix.X
					}
					if id, ok := t.(*ast.Ident); ok && id.IsExported() {
						counts[dir]++
						methods[dir+"."+id.Name]++
					}
					continue
				}
				counts[dir]++
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							counts[dir]++
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								counts[dir]++
							}
						}
					}
				}
			}
		}
		return nil
	})
	var dirs []string
	pub, priv := 0, 0
	for d := range counts {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		in := d == "internal" || strings.HasPrefix(d, "internal/") || strings.Contains(d, "/internal/")
		tag := "importable"
		if in {
			tag = "internal"
			priv += counts[d]
		} else {
			pub += counts[d]
		}
		fmt.Printf("%5d  %-10s %s\n", counts[d], tag, d)
	}
	fmt.Printf("%5d  importable in all\n%5d  internal in all\n", pub, priv)
	if len(os.Args) > 2 {
		fmt.Printf("%5d  methods of %s\n", methods[os.Args[2]], os.Args[2])
	}
}
