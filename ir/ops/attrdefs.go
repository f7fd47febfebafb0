package ops

import "github.com/kiln-ml/kiln/ir"

// Attribute declarations for schema rows: defInt, defFloat and defString
// declare an optional attribute with its default, defInts one without a
// default; declares tells which a row declares.

func defInt(name string, v int64) AttrDef {
	return AttrDef{Name: name, Kind: ir.AttrInt, Default: ir.AttrI(name, v)}
}

func defFloat(name string, v float32) AttrDef {
	return AttrDef{Name: name, Kind: ir.AttrFloat, Default: ir.AttrF(name, v)}
}

func defString(name, v string) AttrDef {
	return AttrDef{Name: name, Kind: ir.AttrString, Default: ir.AttrS(name, v)}
}

func defInts(name string) AttrDef { return AttrDef{Name: name, Kind: ir.AttrInts} }

// declares reports whether the row declares attribute name, for helpers
// shared by rows of different versions (MaxPool gained dilations in v10).
func (a attrs) declares(name string) bool {
	for _, d := range a.schema.Attrs {
		if d.Name == name {
			return true
		}
	}
	return false
}
