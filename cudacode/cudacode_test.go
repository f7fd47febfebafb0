package cudacode

import (
	"strings"
	"testing"
)

func valid() *Module {
	return &Module{Version: Version, PTXArch: "sm_80", PTX: ".version 7.0\n.target sm_80\n.visible .entry k000_Relu(\n",
		Cubins:       []Cubin{{Arch: "sm_80", Data: []byte("\x7fELF....")}},
		WeightsBytes: 0, ArenaBytes: 512, Kernels: []Launch{{Name: "k000_Relu", Grid: 1, Block: 256}},
		Slots: []Slot{{Name: "x", DType: "float", Dims: []int64{4}, Bytes: 16}, {Name: "y", Output: true, DType: "float", Dims: []int64{4}, Bytes: 16, Offset: 256}}}
}

// TestParse: a module round-trips, and each malformed field is refused
// naming it (the loader checks before any driver call).
func TestParse(t *testing.T) {
	data, err := valid().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data); err != nil {
		t.Fatalf("a valid module: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(m *Module)
		want string
	}{
		{"version", func(m *Module) { m.Version = 9 }, "version 9"},
		{"arch", func(m *Module) { m.PTXArch = "sm80" }, "PTX is not for"},
		{"ptx target", func(m *Module) { m.PTXArch = "sm_90" }, "PTX is not for"},
		{"cubin", func(m *Module) { m.Cubins[0].Data = []byte("text") }, "is not a cubin"},
		{"repeated cubin", func(m *Module) { m.Cubins = append(m.Cubins, m.Cubins[0]) }, "repeated"},
		{"no kernels", func(m *Module) { m.Kernels = nil }, "no kernels"},
		{"block", func(m *Module) { m.Kernels[0].Block = 2048 }, "bad launch"},
		{"grid", func(m *Module) { m.Kernels[0].Grid = 0 }, "bad launch"},
		{"name", func(m *Module) { m.Kernels[0].Name = "k; rm" }, "bad launch"},
		{"missing entry", func(m *Module) { m.Kernels[0].Name = "k001_Add" }, `no kernel "k001_Add"`},
		{"slot", func(m *Module) { m.Slots[1].Offset = 500 }, "outside the 512-byte arena"},
		{"negative", func(m *Module) { m.ArenaBytes = -1 }, "negative"},
	} {
		m := valid()
		c.edit(m)
		data, _ := m.Marshal()
		if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := Parse([]byte(`{"version":1,"extra":2}`)); err == nil {
		t.Error("an unknown field was accepted")
	}
}

// FuzzParse: no input makes Parse panic.
func FuzzParse(f *testing.F) {
	data, _ := valid().Marshal()
	f.Add(data)
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, b []byte) { Parse(b) })
}
