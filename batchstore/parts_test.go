package batchstore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoPartReachesAnothersFields: the store's parts (buffer, roster,
// demand, evictor) ask one another through methods, never by reading or
// writing another part's fields (s.buf.held from a roster method): each
// part's fields are its own, and only the Store's own methods (the shell)
// read them all. Read from the source, so that a new reach fails here.
func TestNoPartReachesAnothersFields(t *testing.T) {
	parts := map[string]string{"buffer": "buf", "roster": "ros", "demand": "dem", "evictor": "ev"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Body == nil {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			recv, ok := star.X.(*ast.Ident)
			own, isPart := parts[recv.Name]
			if !ok || !isPart {
				continue
			}
			checked++
			calls := map[*ast.SelectorExpr]bool{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
						calls[sel] = true
					}
				}
				return true
			})
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || calls[sel] {
					return true
				}
				inner, ok := sel.X.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if isStore(inner.X) && inner.Sel.Name != own {
					for _, p := range parts {
						if inner.Sel.Name == p {
							t.Errorf("%s: (%s).%s reads s.%s.%s: another part's field", fset.Position(sel.Pos()), recv.Name, fn.Name.Name, p, sel.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d methods of the parts: the source was not found", checked)
	}
}

// isStore says whether e names the Store: s, or a part's s (ro.s).
func isStore(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "s"
	case *ast.SelectorExpr:
		return x.Sel.Name == "s"
	}
	return false
}
