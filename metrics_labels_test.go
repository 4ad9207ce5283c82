package dlqdump

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FailReasons and QuarantineReasons list every reason this package passes
// to MetricsWriter.Fail and .Quarantine: read from its source, so that a
// new reason cannot be added without its series being created up front.
func TestMetricsReasonsListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	lit := func(e ast.Expr) (string, bool) {
		bl, ok := e.(*ast.BasicLit)
		if !ok || bl.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(bl.Value)
		return s, err == nil
	}
	fails, quars := map[string]bool{}, map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				var fn string
				if ok {
					fn = sel.Sel.Name
				} else if id, ok := n.Fun.(*ast.Ident); ok {
					fn = id.Name
				}
				if len(n.Args) == 0 {
					return true
				}
				s, ok := lit(n.Args[0])
				if !ok {
					return true
				}
				switch fn {
				case "Fail":
					fails[s] = true
				case "quarantineWhole", "Quarantine":
					quars[s] = true
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "label" {
					if s, ok := lit(n.Value); ok {
						quars[s] = true
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if id.Name == "refusalReasons" && i < len(n.Values) {
						if cl, ok := n.Values[i].(*ast.CompositeLit); ok {
							for _, e := range cl.Elts {
								if s, ok := lit(e); ok {
									fails[s] = true
								}
							}
						}
					}
				}
			}
			return true
		})
	}
	if len(fails) < 5 || len(quars) < 3 {
		t.Fatalf("found only %v and %v in the source: is the scan broken?", fails, quars)
	}
	for s := range fails {
		if !slices.Contains(FailReasons, s) {
			t.Errorf("Fail(%q) is called but FailReasons lacks it", s)
		}
	}
	for s := range quars {
		if !slices.Contains(QuarantineReasons, s) {
			t.Errorf("Quarantine(%q, ...) is called but QuarantineReasons lacks it", s)
		}
	}
	for _, s := range FailReasons {
		if !fails[s] {
			t.Errorf("FailReasons lists %q, which nothing passes", s)
		}
	}
	for _, s := range QuarantineReasons {
		if !quars[s] {
			t.Errorf("QuarantineReasons lists %q, which nothing passes", s)
		}
	}
}
