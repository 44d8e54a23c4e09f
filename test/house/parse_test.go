package house

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// internalDir is the tree the rules cover, from this package's directory.
const internalDir = "../../internal"

// sourceFile is one parsed non-test, non-generated Go file under internal/.
type sourceFile struct {
	path string // relative to the repository root
	file *ast.File
}

// parseInternal parses every Go file under internal/ except tests and
// generated zz_ files.
func parseInternal(t *testing.T) (*token.FileSet, []sourceFile) {
	t.Helper()
	fset := token.NewFileSet()
	var out []sourceFile
	err := filepath.WalkDir(internalDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if name == "testdata" || strings.HasPrefix(name, ".") && path != internalDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../..", path)
		out = append(out, sourceFile{path: rel, file: f})
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", internalDir, err)
	}
	if len(out) == 0 {
		t.Fatalf("no Go files under %s: run the test from test/house", internalDir)
	}
	return fset, out
}
