// Package layering holds the test of the tree's layers (ARCHITECTURE.md's
// table: data flows from frontends through passes and codegen to the
// runtime, never back): which packages may not import which.
package layering
