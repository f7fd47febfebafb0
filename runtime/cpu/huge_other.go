//go:build !linux

package cpu

import "math"

// Buffer is n zeroed, 64-byte aligned bytes (huge pages on Linux only).
type Buffer struct{ Bytes []byte }

// NewBuffer returns n zeroed bytes. Only Linux checks the size against
// the memory that can be had first (Available).
func NewBuffer(n int64) (*Buffer, error) { return &Buffer{Bytes: AlignedBytes(n)}, nil }

// Available reads no bound outside Linux.
func Available() (int64, string) { return math.MaxInt64, "" }

// Free is a no-op: the Go heap owns the memory.
func (b *Buffer) Free() {}

// CollapseLater is a no-op: there are no huge pages to move to.
func (b *Buffer) CollapseLater() {}
