// Package engine is kiln's engine file format: one file holding everything
// needed to run a compiled model, in checksummed sections.
//
// Layout (all integers little-endian):
//
//	header   magic "KILNENG\x00" | format version u32 | section count u32 |
//	         kiln version (u16 length + bytes)
//	table    per section: name (u16 length + bytes) | offset u64 | length u64 | SHA-256
//	sections each starting at a 64-byte aligned offset, zero padded
//
// Section names: "meta" (JSON Metadata), "plan" (the final graph in kiln's
// text IR), "weights" (64-byte aligned constants), "code/<triple>" (an ELF
// shared object per CPU target), "calib" (INT8 scales). Writing is
// deterministic: the same Engine gives the same bytes.
package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Magic starts every engine file.
const Magic = "KILNENG\x00"

// FormatVersion is the version this package writes and the newest it reads.
const FormatVersion = 1

// Align is the alignment of every section's start (and so of the weights).
const Align = 64

// maxSections bounds the table so a corrupt count cannot make us allocate
// without limit.
const maxSections = 1024

// Section is one named, checksummed blob.
type Section struct {
	Name string
	Data []byte
}

// File is an engine file's contents before interpretation.
type File struct {
	KilnVersion string
	Sections    []Section
}

// Section returns the named section's data, or nil.
func (f *File) Section(name string) []byte {
	for _, s := range f.Sections {
		if s.Name == name {
			return s.Data
		}
	}
	return nil
}

// Marshal encodes the file; sections are written in name order so the
// output depends only on the contents.
func (f *File) Marshal() []byte {
	secs := append([]Section(nil), f.Sections...)
	sort.Slice(secs, func(i, j int) bool { return secs[i].Name < secs[j].Name })

	var hdr bytes.Buffer
	hdr.WriteString(Magic)
	binary.Write(&hdr, binary.LittleEndian, uint32(FormatVersion))
	binary.Write(&hdr, binary.LittleEndian, uint32(len(secs)))
	writeString(&hdr, f.KilnVersion)
	tableSize := 0
	for _, s := range secs {
		tableSize += 2 + len(s.Name) + 8 + 8 + sha256.Size
	}
	offset := alignUp(hdr.Len() + tableSize)
	offsets := make([]int, len(secs))
	end := offset
	for i, s := range secs {
		offsets[i] = offset
		end = offset + len(s.Data)
		offset = alignUp(end)
	}
	for i, s := range secs {
		writeString(&hdr, s.Name)
		binary.Write(&hdr, binary.LittleEndian, uint64(offsets[i]))
		binary.Write(&hdr, binary.LittleEndian, uint64(len(s.Data)))
		sum := sha256.Sum256(s.Data)
		hdr.Write(sum[:])
	}
	// No padding after the last section: any cut then loses data.
	out := make([]byte, end)
	copy(out, hdr.Bytes())
	for i, s := range secs {
		copy(out[offsets[i]:], s.Data)
	}
	return out
}

func alignUp(n int) int { return (n + Align - 1) / Align * Align }

func writeString(b *bytes.Buffer, s string) {
	binary.Write(b, binary.LittleEndian, uint16(len(s)))
	b.WriteString(s)
}

// Errors a loader can tell apart.
var (
	ErrNotEngine  = errors.New("not a kiln engine (bad magic)")
	ErrTruncated  = errors.New("engine file is truncated")
	ErrTooNew     = errors.New("engine format version is newer than this runtime")
	ErrChecksum   = errors.New("checksum mismatch")
	ErrBadSection = errors.New("malformed section table")
)

// Unmarshal parses and verifies an engine file: magic, format version,
// section table bounds and every section's SHA-256. Section data alias buf.
func Unmarshal(buf []byte) (*File, error) {
	if len(buf) < len(Magic) {
		if bytes.HasPrefix([]byte(Magic), buf) {
			return nil, ErrTruncated
		}
		return nil, ErrNotEngine
	}
	if string(buf[:len(Magic)]) != Magic {
		return nil, ErrNotEngine
	}
	r := reader{buf: buf, pos: len(Magic)}
	version, count := r.u32(), r.u32()
	kilnVersion := r.string()
	if r.err != nil {
		return nil, ErrTruncated
	}
	if version > FormatVersion {
		return nil, fmt.Errorf("%w: format %d, this runtime reads up to %d (rebuild the engine with this kiln, or update infer)", ErrTooNew, version, FormatVersion)
	}
	if version == 0 {
		return nil, fmt.Errorf("%w: format version 0", ErrBadSection)
	}
	if count > maxSections {
		return nil, fmt.Errorf("%w: %d sections", ErrBadSection, count)
	}
	f := &File{KilnVersion: kilnVersion}
	seen := map[string]bool{}
	for i := uint32(0); i < count; i++ {
		name := r.string()
		off, n := r.u64(), r.u64()
		sum := r.bytes(sha256.Size)
		if r.err != nil {
			return nil, ErrTruncated
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: section %q appears twice", ErrBadSection, name)
		}
		seen[name] = true
		if off > uint64(len(buf)) || n > uint64(len(buf))-off {
			return nil, fmt.Errorf("%w: section %q ends at byte %d of %d", ErrTruncated, name, off+n, len(buf))
		}
		data := buf[off : off+n]
		if got := sha256.Sum256(data); !bytes.Equal(got[:], sum) {
			return nil, fmt.Errorf("%w in section %q", ErrChecksum, name)
		}
		f.Sections = append(f.Sections, Section{Name: name, Data: data})
	}
	return f, nil
}

// reader decodes the header, remembering the first overrun.
type reader struct {
	buf []byte
	pos int
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || r.pos+n > len(r.buf) {
		r.err = ErrTruncated
		return nil
	}
	b := r.buf[r.pos : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) string() string {
	b := r.bytes(2)
	if b == nil {
		return ""
	}
	return string(r.bytes(int(binary.LittleEndian.Uint16(b))))
}
