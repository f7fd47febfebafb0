package autodiff

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEntriesMirrorOpsFiles holds each op's entry (a define key or a
// notDifferentiable name) to the file named like the ir/ops file that
// defines the op: that file must exist and name the op.
func TestEntriesMirrorOpsFiles(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	entries := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		ops := entryOps(t, file)
		if len(ops) == 0 {
			continue // the package's machinery: autodiff.go, builder.go, ...
		}
		literals := opsFileLiterals(t, file)
		if !assert.NotNil(t, literals, "%s declares %v, but ir/ops has no %s", file, ops, file) {
			continue
		}
		for _, op := range ops {
			entries++
			assert.True(t, literals[op], "%s declares %s, which ir/ops/%s does not define", file, op, file)
		}
	}
	assert.Greater(t, entries, 150, "the entries found: the parse missed the declarations")
}

// entryOps lists the op names a file declares: define's map keys and
// notDifferentiable's names, as string literals.
func entryOps(t *testing.T, file string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn, _ := call.Fun.(*ast.Ident)
		switch {
		case fn != nil && fn.Name == "define" && len(call.Args) == 2:
			if m, ok := call.Args[1].(*ast.CompositeLit); ok {
				for _, e := range m.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						names = append(names, stringLit(kv.Key)...)
					}
				}
			}
		case fn != nil && fn.Name == "notDifferentiable" && len(call.Args) > 2:
			for _, a := range call.Args[2:] {
				names = append(names, stringLit(a)...)
			}
		}
		return true
	})
	return names
}

// opsFileLiterals is the set of string literals in ir/ops/file, nil when
// there is no such file.
func opsFileLiterals(t *testing.T, file string) map[string]bool {
	path := filepath.Join("..", "..", "ir", "ops", file)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	set := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		for _, s := range stringLit(n) {
			set[s] = true
		}
		return true
	})
	return set
}

// stringLit is the value of a string literal node, or nothing.
func stringLit(n ast.Node) []string {
	if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		if s, err := strconv.Unquote(lit.Value); err == nil {
			return []string{s}
		}
	}
	return nil
}
