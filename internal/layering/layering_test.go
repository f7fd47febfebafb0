package layering

import (
	"bytes"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kiln-ml/kiln/"

// rules are the imports the layers forbid, each with its reason: a
// package matching from must not depend, directly or through others, on
// one matching forbidden ("x/..." is x and everything under it).
var rules = []struct{ from, forbidden, why string }{
	{"codegen/...", "runtime/...", "codegen does not know how engines are loaded: what it shares with the runtime is in cpuabi and cudacode, and its tuner runs code through the Runner it is given"},
	{"runtime/...", "codegen/...", "an engine is self-contained: the runtime needs no compiler"},
	{"runtime/...", "passes/...", "an engine is self-contained: the runtime needs no compiler"},
	{"runtime/...", "frontend/...", "an engine is self-contained: the runtime reads no models"},
	{"cmd/infer", "codegen/...", "infer never needs LLVM"},
	{"cmd/infer", "github.com/llir/...", "infer never needs LLVM"},
	{"cpuabi", "...", "the contract between codegen/cpu and runtime/cpu imports neither (nor any kiln package)"},
	{"cudacode", "...", "the CUDA code section is plain data both sides import"},
}

// configs are the builds the rules hold in: each platform's files and the
// cuda build tag's differ.
var configs = []struct {
	name string
	env  []string
	tags string
}{
	{"linux/amd64", []string{"GOOS=linux", "GOARCH=amd64"}, ""},
	{"linux/arm64", []string{"GOOS=linux", "GOARCH=arm64"}, ""},
	{"linux/amd64 -tags cuda", []string{"GOOS=linux", "GOARCH=amd64"}, "cuda"},
}

// TestLayering checks every rule in every config against go list's import
// graph and names the chain of imports that breaks one.
func TestLayering(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			imports := importGraph(t, c.env, c.tags)
			for _, r := range rules {
				from := matching(imports, r.from)
				if len(from) == 0 {
					t.Errorf("rule %s ↛ %s: no package matches %s", r.from, r.forbidden, r.from)
				}
				for _, p := range from {
					if chain := pathTo(imports, p, r.forbidden); chain != nil {
						t.Errorf("%s must not depend on %s (%s), but %s", short(p), r.forbidden, r.why, strings.Join(chain, " → "))
					}
				}
			}
		})
	}
}

// TestLayeringFindsAChain: the search finds an indirect dependency and
// names each import on the way, and none where there is none.
func TestLayeringFindsAChain(t *testing.T) {
	imports := map[string][]string{
		module + "a":   {module + "b/c"},
		module + "b/c": {"fmt", module + "d/e"},
		module + "d/e": nil,
		"fmt":          nil,
	}
	assert := func(got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	assert(pathTo(imports, module+"a", "d/..."), "a", "b/c", "d/e")
	assert(pathTo(imports, module+"a", "b/..."), "a", "b/c")
	assert(pathTo(imports, module+"b/c", "a"))
	assert(pathTo(imports, module+"d/e", "..."))
	assert(matching(imports, "b/..."), module+"b/c")
}

// importGraph lists every kiln package and its dependencies with their
// direct imports (test files left out: a test may load what its package
// may not).
func importGraph(t *testing.T, env []string, tags string) map[string][]string {
	t.Helper()
	args := []string{"list", "-deps", "-e", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goTool(t), append(args, module+"...")...)
	cmd.Env = append(cmd.Environ(), append(env, "CGO_ENABLED=0")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		graph[fields[0]] = fields[1:]
	}
	return graph
}

func goTool(t *testing.T) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(goruntime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(p); err != nil {
		t.Skip("no go command to list the packages with")
	}
	return p
}

// matches reports whether package p matches pattern: a kiln path
// relative to the module or another module's full path, "/..." for the
// tree under it, "..." alone for every kiln package.
func matches(p, pattern string) bool {
	if !strings.Contains(strings.SplitN(pattern, "/", 2)[0], ".") {
		pattern = module + pattern
	}
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == tree || strings.HasPrefix(p, tree+"/")
	}
	if pattern == module+"..." {
		return strings.HasPrefix(p, module)
	}
	return p == pattern
}

// matching lists the packages in the graph that match pattern, sorted.
func matching(imports map[string][]string, pattern string) []string {
	var out []string
	for p := range imports {
		if matches(p, pattern) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// pathTo returns the shortest chain of imports from package from to one
// matching forbidden, in short names, or nil.
func pathTo(imports map[string][]string, from, forbidden string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := prev[q]; seen {
				continue
			}
			prev[q] = p
			if matches(q, forbidden) {
				var chain []string
				for at := q; at != ""; at = prev[at] {
					chain = append(chain, short(at))
				}
				slices.Reverse(chain)
				return chain
			}
			queue = append(queue, q)
		}
	}
	return nil
}

func short(p string) string { return strings.TrimPrefix(p, module) }
