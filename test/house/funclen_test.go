package house

import (
	"go/ast"
	"testing"
)

// maxFuncLines is the longest a function may be, counted from its func
// keyword to its closing brace (its doc comment not included).
const maxFuncLines = 80

// funcName is fn's name as a reader finds it: Recv.Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr: // generic receiver T[P]
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

func TestNoFunctionOver80Lines(t *testing.T) {
	fset, files := parseInternal(t)
	for _, sf := range files {
		for _, d := range sf.file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines, over %d: split it into functions that each do one step", sf.path, start.Line, funcName(fn), n, maxFuncLines)
			}
		}
	}
}
