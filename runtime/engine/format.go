// Package engine is kiln's engine file format: one file holding everything
// needed to run a compiled model, in checksummed sections, ending in a
// trailer that holds the whole file's SHA-256 and, optionally, an ed25519
// signature of it.
//
// Layout (all integers little-endian):
//
//	header   magic "KILNENG\x00" | format version u32 | section count u32 |
//	         kiln version (u16 length + bytes) | SHA-256 of the header's bytes before it
//	table    per section: name (u16 length + bytes) | offset u64 | length u64 | SHA-256 of its data;
//	         then the SHA-256 of the table's entries
//	padding  zeros up to the first section
//	sections in name order, each starting at a 64-byte aligned offset, zero padded
//	         to the next; nothing after the last one but the trailer
//	trailer  "KILNSUM\x00" | signature kind u32 (0 none, 1 ed25519) | 0 u32 |
//	         SHA-256 of every byte before the trailer (the whole-file checksum) |
//	         for ed25519: public key (32 bytes) | signature (64 bytes) of
//	         SignatureContext followed by the whole-file checksum
//
// So `head -c -48 FILE | sha256sum` prints an unsigned engine's checksum
// (-144 for a signed one). The per-region checksums name what is damaged;
// the whole-file checksum is what a signature vouches for.
//
// Section names: "meta" (JSON Metadata), "plan" (the final graph in kiln's
// text IR), "weights" (64-byte aligned constants), "code/<triple>" (an ELF
// shared object per CPU target), "calib" (INT8 scales); no others. Writing
// is deterministic: the same Engine gives the same bytes (ed25519
// signatures are deterministic too).
package engine

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Magic starts every engine file.
const Magic = "KILNENG\x00"

// FormatVersion is the version this package writes and the only one it
// reads: 2 added the header, table and whole-file checksums, the trailer
// and signatures.
const FormatVersion = 2

// Align is the alignment of every section's start (and so of the weights).
const Align = 64

// trailerMagic starts the trailer.
const trailerMagic = "KILNSUM\x00"

// Signature kinds in the trailer.
const (
	sigNone    = 0
	sigEd25519 = 1
)

// Trailer sizes: unsigned, and with an ed25519 key and signature.
const (
	trailerSize       = len(trailerMagic) + 4 + 4 + sha256.Size
	signedTrailerSize = trailerSize + ed25519.PublicKeySize + ed25519.SignatureSize
)

// SignatureContext precedes the whole-file checksum in the signed message,
// so a kiln engine signature cannot be taken for one over anything else.
const SignatureContext = "kiln engine signature v1\x00"

// maxSections bounds the table so a corrupt count cannot make us allocate
// without limit.
const maxSections = 1024

// maxVersionLen bounds the kiln version string.
const maxVersionLen = 64

// Section is one named, checksummed blob.
type Section struct {
	Name string
	Data []byte
}

// File is an engine file's contents before interpretation.
type File struct {
	KilnVersion string
	Sections    []Section
	// Checksum is the whole-file SHA-256 (set by Unmarshal).
	Checksum [sha256.Size]byte
	// Signer is the public key whose signature the file carries (set by
	// Unmarshal; nil: unsigned). Unmarshal has verified the signature
	// against it; whether that key is one to trust is the caller's call
	// (see VerifySigner).
	Signer ed25519.PublicKey
	// bodyLen is where the trailer starts.
	bodyLen int
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

// Marshal encodes the file, unsigned; sections are written in name order
// so the output depends only on the contents.
func (f *File) Marshal() []byte {
	body := f.marshalBody()
	return appendTrailer(body, nil)
}

// MarshalSigned encodes the file with an ed25519 signature of its
// whole-file checksum.
func (f *File) MarshalSigned(key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("signing key: %d bytes, want an ed25519 private key (%d)", len(key), ed25519.PrivateKeySize)
	}
	return appendTrailer(f.marshalBody(), key), nil
}

func (f *File) marshalBody() []byte {
	secs := append([]Section(nil), f.Sections...)
	sort.Slice(secs, func(i, j int) bool { return secs[i].Name < secs[j].Name })

	var hdr bytes.Buffer
	hdr.WriteString(Magic)
	binary.Write(&hdr, binary.LittleEndian, uint32(FormatVersion))
	binary.Write(&hdr, binary.LittleEndian, uint32(len(secs)))
	writeString(&hdr, f.KilnVersion)
	sum := sha256.Sum256(hdr.Bytes())
	hdr.Write(sum[:])
	tableStart := hdr.Len()
	tableSize := sha256.Size
	for _, s := range secs {
		tableSize += 2 + len(s.Name) + 8 + 8 + sha256.Size
	}
	offset := alignUp(tableStart + tableSize)
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
	sum = sha256.Sum256(hdr.Bytes()[tableStart:])
	hdr.Write(sum[:])
	// The trailer follows the last section directly: any cut loses data
	// or the trailer, and anything appended is refused.
	out := make([]byte, end, end+signedTrailerSize)
	copy(out, hdr.Bytes())
	for i, s := range secs {
		copy(out[offsets[i]:], s.Data)
	}
	return out
}

// appendTrailer appends the trailer for body, signed when key is set.
func appendTrailer(body []byte, key ed25519.PrivateKey) []byte {
	sum := sha256.Sum256(body)
	out := append(body, trailerMagic...)
	kind := uint32(sigNone)
	if key != nil {
		kind = sigEd25519
	}
	out = binary.LittleEndian.AppendUint32(out, kind)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = append(out, sum[:]...)
	if key != nil {
		out = append(out, key.Public().(ed25519.PublicKey)...)
		out = append(out, ed25519.Sign(key, signedMessage(sum))...)
	}
	return out
}

func signedMessage(sum [sha256.Size]byte) []byte {
	return append([]byte(SignatureContext), sum[:]...)
}

func alignUp(n int) int { return (n + Align - 1) / Align * Align }

func writeString(b *bytes.Buffer, s string) {
	binary.Write(b, binary.LittleEndian, uint16(len(s)))
	b.WriteString(s)
}

// Errors a loader can tell apart.
var (
	ErrNotEngine    = errors.New("not a kiln engine (bad magic)")
	ErrTruncated    = errors.New("engine file is truncated")
	ErrTooNew       = errors.New("engine format version is newer than this runtime")
	ErrTooOld       = errors.New("engine format is too old")
	ErrChecksum     = errors.New("checksum mismatch")
	ErrBadHeader    = errors.New("malformed header")
	ErrBadSection   = errors.New("malformed section table")
	ErrBadTrailer   = errors.New("malformed trailer")
	ErrTrailingData = errors.New("trailing bytes after the engine")
	ErrBadSignature = errors.New("bad signature")
)

// Unmarshal parses and verifies an engine file: magic, format version, the
// header's and the section table's checksums, the table's layout, zero
// padding, every section's checksum, the trailer, the whole-file checksum
// and a signature when there is one. Errors name the damaged region.
// Section data alias buf.
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
	version := r.u32()
	if r.err != nil {
		return nil, fmt.Errorf("%w: the header ends after %d bytes", ErrTruncated, len(buf))
	}
	switch {
	case version > FormatVersion:
		return nil, fmt.Errorf("%w: format %d, this runtime reads format %d (rebuild the engine with this kiln, or update infer)", ErrTooNew, version, FormatVersion)
	case version == 0:
		return nil, fmt.Errorf("%w: format version 0", ErrBadHeader)
	case version < FormatVersion:
		return nil, fmt.Errorf("%w: format %d, this runtime reads format %d; rebuild the engine with this kiln's `cc build`", ErrTooOld, version, FormatVersion)
	}
	count := r.u32()
	kilnVersion := r.string()
	headerEnd := r.pos
	headerSum := r.bytes(sha256.Size)
	if r.err != nil {
		return nil, fmt.Errorf("%w: the header runs past the end of the file (%d bytes)", ErrTruncated, len(buf))
	}
	if got := sha256.Sum256(buf[:headerEnd]); !bytes.Equal(got[:], headerSum) {
		return nil, fmt.Errorf("%w in the header (bytes 0 to %d)", ErrChecksum, r.pos)
	}
	if count > maxSections {
		return nil, fmt.Errorf("%w: %d sections, at most %d", ErrBadHeader, count, maxSections)
	}
	if !printable(kilnVersion, maxVersionLen) {
		return nil, fmt.Errorf("%w: the kiln version is not a short printable ASCII string", ErrBadHeader)
	}

	f := &File{KilnVersion: kilnVersion}
	type entry struct {
		name   string
		off, n uint64
		sum    []byte
	}
	tableStart := r.pos
	entries := make([]entry, 0, count)
	for i := uint32(0); i < count; i++ {
		var e entry
		e.name = r.string()
		e.off, e.n = r.u64(), r.u64()
		e.sum = r.bytes(sha256.Size)
		entries = append(entries, e)
	}
	tableEnd := r.pos
	tableSum := r.bytes(sha256.Size)
	if r.err != nil {
		return nil, fmt.Errorf("%w: the section table runs past the end of the file (%d bytes)", ErrTruncated, len(buf))
	}
	if got := sha256.Sum256(buf[tableStart:tableEnd]); !bytes.Equal(got[:], tableSum) {
		return nil, fmt.Errorf("%w in the section table (bytes %d to %d)", ErrChecksum, tableStart, r.pos)
	}

	// The layout is the one Marshal writes, exactly: names in order, each
	// section at the first aligned offset after the previous one.
	next := uint64(alignUp(r.pos))
	prevEnd, prevName := uint64(r.pos), ""
	for i, e := range entries {
		if err := checkName(e.name); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrBadSection, i, err)
		}
		if i > 0 && e.name <= prevName {
			return nil, fmt.Errorf("%w: section %q follows %q (sections are in name order, each once)", ErrBadSection, e.name, prevName)
		}
		if e.off != next {
			return nil, fmt.Errorf("%w: section %q starts at byte %d, want %d", ErrBadSection, e.name, e.off, next)
		}
		if e.off > uint64(len(buf)) || e.n > uint64(len(buf))-e.off {
			return nil, fmt.Errorf("%w: section %q ends at byte %d of %d", ErrTruncated, e.name, e.off+e.n, len(buf))
		}
		if !allZero(buf[prevEnd:e.off]) {
			return nil, fmt.Errorf("%w: the padding %s is not zero", ErrBadSection, after(prevName))
		}
		f.Sections = append(f.Sections, Section{Name: e.name, Data: buf[e.off : e.off+e.n]})
		prevEnd, prevName = e.off+e.n, e.name
		next = uint64(alignUp(int(prevEnd)))
	}
	if len(entries) == 0 {
		// No sections: the trailer follows the table's padding.
		if next > uint64(len(buf)) {
			return nil, fmt.Errorf("%w: the padding after the section table ends at byte %d of %d", ErrTruncated, next, len(buf))
		}
		if !allZero(buf[prevEnd:next]) {
			return nil, fmt.Errorf("%w: the padding after the section table is not zero", ErrBadSection)
		}
		prevEnd = next
	}
	body := int(prevEnd)
	sig, err := f.readTrailer(buf, body, prevName)
	if err != nil {
		return nil, err
	}

	// The whole-file checksum and the sections' are two passes over the
	// data: they run side by side, so a large engine loads in the time of
	// one where a second core is free.
	whole := make(chan [sha256.Size]byte, 1)
	go func() { whole <- sha256.Sum256(buf[:body]) }()
	for i, s := range f.Sections {
		if got := sha256.Sum256(s.Data); !bytes.Equal(got[:], entries[i].sum) {
			return nil, fmt.Errorf("%w in section %q", ErrChecksum, s.Name)
		}
	}
	if <-whole != f.Checksum {
		return nil, fmt.Errorf("%w in the trailer: the whole-file checksum does not match the file", ErrChecksum)
	}
	if sig != nil {
		if !ed25519.Verify(f.Signer, signedMessage(f.Checksum), sig) {
			return nil, fmt.Errorf("%w: the trailer's signature does not verify against its key %s", ErrBadSignature, Fingerprint(f.Signer))
		}
	}
	f.bodyLen = body
	return f, nil
}

// readTrailer parses the trailer at body (the end of the last section):
// it sets f.Checksum and, for a signed file, f.Signer, and returns the
// signature (nil: unsigned). Unmarshal verifies both.
func (f *File) readTrailer(buf []byte, body int, last string) ([]byte, error) {
	rest := buf[body:]
	if len(rest) < trailerSize {
		if bytes.HasPrefix(rest, []byte(trailerMagic)) || bytes.HasPrefix([]byte(trailerMagic), rest) {
			return nil, fmt.Errorf("%w: the trailer %s is cut short (%d of %d bytes)", ErrTruncated, after(last), len(rest), trailerSize)
		}
		return nil, fmt.Errorf("%w: no trailer %s", ErrBadTrailer, after(last))
	}
	if string(rest[:len(trailerMagic)]) != trailerMagic {
		return nil, fmt.Errorf("%w: no trailer %s", ErrBadTrailer, after(last))
	}
	kind := binary.LittleEndian.Uint32(rest[8:])
	reserved := binary.LittleEndian.Uint32(rest[12:])
	size := trailerSize
	switch {
	case reserved != 0:
		return nil, fmt.Errorf("%w: reserved field is %d, want 0", ErrBadTrailer, reserved)
	case kind == sigEd25519:
		size = signedTrailerSize
	case kind != sigNone:
		return nil, fmt.Errorf("%w: unknown signature kind %d", ErrBadTrailer, kind)
	}
	if len(rest) < size {
		return nil, fmt.Errorf("%w: the signed trailer is cut short (%d of %d bytes)", ErrTruncated, len(rest), size)
	}
	if len(rest) > size {
		return nil, fmt.Errorf("%w: %d bytes follow the trailer (the engine ends at byte %d)", ErrTrailingData, len(rest)-size, body+size)
	}
	copy(f.Checksum[:], rest[16:16+sha256.Size])
	if kind != sigEd25519 {
		return nil, nil
	}
	f.Signer = ed25519.PublicKey(bytes.Clone(rest[trailerSize : trailerSize+ed25519.PublicKeySize]))
	return rest[trailerSize+ed25519.PublicKeySize:], nil
}

// after names the padding or trailer position after a section.
func after(section string) string {
	if section == "" {
		return "after the section table"
	}
	return fmt.Sprintf("after section %q", section)
}

// checkName accepts the section names this format defines; the error
// quotes a name only when it is printable.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty section name")
	}
	if !printable(name, 128) {
		return errors.New("the section name is not printable ASCII")
	}
	switch name {
	case SectionMeta, SectionPlan, SectionWeights, SectionCalib:
		return nil
	}
	if triple, ok := cutPrefix(name, codePrefix); ok && validTriple(triple) {
		return nil
	}
	return fmt.Errorf("unknown section %q", name)
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}

// validTriple accepts target triples such as x86_64-unknown-linux-gnu.
func validTriple(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// printable reports whether s is non-empty printable ASCII of at most max
// bytes.
func printable(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// reader decodes the header, remembering the first overrun.
type reader struct {
	buf []byte
	pos int
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.buf)-r.pos {
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
