package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// engineExt marks engine files, which inspect describes from their
// metadata without loading their code.
const engineExt = ".kiln"

// engineInfo is inspect's view of an engine: its metadata, the size of
// each section, the file's digest and the signer.
type engineInfo struct {
	File     string          `json:"file"`
	Meta     engine.Metadata `json:"metadata"`
	Sections map[string]int  `json:"section_bytes"`
	SHA256   string          `json:"sha256"`
	Signed   bool            `json:"signed"`
	// Signer is the fingerprint of the key whose signature the file
	// carries (verified); empty when unsigned.
	Signer string `json:"signer,omitempty"`
}

func inspectEngine(path string, asJSON bool, w io.Writer) error {
	buf, err := readEngine(path)
	if err != nil {
		return cli.FileError(path, err)
	}
	f, err := engine.Unmarshal(buf)
	if err != nil {
		return cli.FileError(path, err)
	}
	e, err := engine.DecodeFile(f)
	if err != nil {
		return cli.FileError(path, err)
	}
	// The loader's consistency checks, without loading the code: an engine
	// that infer would refuse is refused here too.
	if err := runtime.Validate(e); err != nil {
		return cli.FileError(path, err)
	}
	info := engineInfo{File: path, Meta: e.Meta, Sections: map[string]int{}, SHA256: hex.EncodeToString(f.Checksum[:]), Signed: f.Signer != nil}
	if f.Signer != nil {
		info.Signer = engine.Fingerprint(f.Signer)
	}
	for _, s := range f.Sections {
		info.Sections[s.Name] = len(s.Data)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	m := e.Meta
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-12s %s\n", label, terminalSafe(fmt.Sprintf(format, args...)))
	}
	row("engine", "%s (format %d, kiln %s)", path, engine.FormatVersion, f.KilnVersion)
	row("model", "%s, source sha256 %s", m.ModelName, m.SourceSHA256)
	row("precision", "%s", m.Precision)
	if code := e.Code[cudacode.Triple]; code != nil {
		mod, _ := cudacode.Parse(code) // Validate parsed it
		row("target", "%s, --gpu %s", m.Target.Triple, m.Target.CPU)
		row("ptx", "%s bytes for %s (newer GPUs JIT-compile it)", commas(int64(len(mod.PTX))), mod.PTXArch)
		for _, c := range mod.Cubins {
			row("cubin", "%s, %s bytes", c.Arch, commas(int64(len(c.Data))))
		}
		if len(mod.Cubins) == 0 {
			row("cubin", "none (built without ptxas: make deps-cuda)")
		}
	} else {
		row("target", "%s, --cpu %s, needs %s", m.Target.Triple, m.Target.CPU, strings.Join(m.Target.Features, " "))
	}
	for i, b := range m.Inputs {
		label := ""
		if i == 0 {
			label = "inputs"
		}
		note := ""
		if b.Default != nil {
			note = " (optional: its initializer is the default)"
		}
		row(label, "%s %s%s", b.Name, b.ShapeString(), note)
	}
	if n := len(m.Folded); n > 0 {
		row("", "(and %d inputs with initializer defaults compiled as constants: %s)", n, ir.FormatList(quoted(m.Folded)))
	}
	for i, b := range m.Outputs {
		label := ""
		if i == 0 {
			label = "outputs"
		}
		row(label, "%s %s%s", b.Name, b.ShapeString(), debugNote(b.Debug))
	}
	for i, p := range m.Pinned {
		label := ""
		if i == 0 {
			label = "pinned"
		}
		row(label, "%s %s%v (compiled as a constant: cc build --value)", p.Name, p.DType, p.Shape)
	}
	for i, sy := range m.Symbols {
		label := ""
		if i == 0 {
			label = "dynamic"
		}
		row(label, "%s from %d to %d, tuned at %d", sy.Name, sy.Min, sy.Max, sy.Opt)
	}
	planned := ""
	if len(m.Symbols) > 0 {
		planned = ", at the dynamic dims' maxima"
	}
	row("memory", "arena %s bytes (all tensors %s bytes)%s", commas(m.ArenaBytes), commas(m.TensorBytes), planned)
	threads := "any"
	if m.MaxThreads > 0 {
		threads = fmt.Sprint(m.MaxThreads)
	}
	row("threads", "%s", threads)
	row("kernels", "%d steps", len(m.Kernels))
	row("flags", "%s", strings.Join(m.BuildFlags, " "))
	row("sha256", "%s (the digest: every byte but the trailer, verified)", info.SHA256)
	if info.Signed {
		row("signature", "ed25519, key %s (verified)", info.Signer)
	} else {
		row("signature", "none (cc build --sign KEY signs engines)")
	}
	names := make([]string, 0, len(info.Sections))
	for name := range info.Sections {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		label := ""
		if i == 0 {
			label = "sections"
		}
		row(label, "%-28s %s bytes", name, commas(int64(info.Sections[name])))
	}
	return nil
}

// debugNote marks a debug output (cc build --mark-outputs) in the listing.
func debugNote(d *engine.Debug) string {
	switch {
	case d == nil:
		return ""
	case len(d.Scale) > 0:
		return fmt.Sprintf(" (debug: %s quantized, scale %v, zero point %v)", d.Value, d.Scale, d.ZeroPoint)
	}
	return " (debug)"
}

// readEngine reads an engine file whole; a named pipe, which would block,
// or a folder is refused by name.
func readEngine(path string) ([]byte, error) {
	f, err := readfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = ir.QuoteName(n)
	}
	return out
}
