//go:build !linux

package cpu

// Buffer is n zeroed, 64-byte aligned bytes (huge pages on Linux only).
type Buffer struct{ Bytes []byte }

// NewBuffer returns n zeroed bytes.
func NewBuffer(n int64) *Buffer { return &Buffer{Bytes: AlignedBytes(n)} }

// Free is a no-op: the Go heap owns the memory.
func (b *Buffer) Free() {}

// CollapseLater is a no-op: there are no huge pages to move to.
func (b *Buffer) CollapseLater() {}
