// Package engine is kiln's engine file format: one file holding everything
// needed to run a compiled model, in checksummed sections, ending in a
// trailer that holds the file's digest and, optionally, an ed25519
// signature of it.
//
// Layout (all integers little-endian):
//
//	header   magic "KILNENG\x00" | format version u32 | section count u32 |
//	         kiln version (u16 length + bytes) | SHA-256 of the header's bytes before it
//	table    per section: name (u16 length + bytes) | offset u64 | length u64 |
//	         the SHA-256 of each ChunkSize chunk of its data, in order (the last
//	         one may be short; an empty section has one, of nothing);
//	         then the SHA-256 of the table's entries
//	padding  zeros up to the first section
//	sections in name order, each starting at a 64-byte aligned offset, zero padded
//	         to the next; nothing after the last one but the trailer
//	trailer  "KILNSUM\x00" | signature kind u32 (0 none, 1 ed25519) | 0 u32 |
//	         the digest: SHA-256 of every byte before the first section (header,
//	         table and padding; up to the trailer when there are no sections) |
//	         for ed25519: public key (32 bytes) | signature (64 bytes) of
//	         SignatureContext followed by the digest
//
// The digest covers every byte before the trailer: the head it hashes
// holds every chunk's hash, the layout is fixed (each section at the first
// aligned offset after the one before, the trailer right after the last)
// and all padding must be zero. So a signature of the digest vouches for
// the whole file, as one of a whole-file SHA-256 would, while the chunks,
// hashed apart, let a loader verify a large engine on all its cores. `head
// -c N E.kiln | sha256sum`, N the first section's offset, prints the
// digest. The per-region checksums name what is damaged, down to the chunk.
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
	"runtime/debug"
	"slices"
	"sort"
)

// Magic starts every engine file.
const Magic = "KILNENG\x00"

// FormatVersion is the version this package writes and the only one it
// reads: 2 added the header, table and whole-file checksums, the trailer
// and signatures; 3 replaced each section's checksum by its chunks' and
// the whole-file checksum by the digest of the head.
const FormatVersion = 3

// Align is the alignment of every section's start (and so of the weights).
const Align = 64

// ChunkSize is the span of data each of a section's checksums covers: a
// loader's cores verify chunks side by side, and a chunk is small enough
// to stay in a core's cache while it is hashed and copied.
const ChunkSize = 256 << 10

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

// SignatureContext precedes the digest in the signed message, so a kiln
// engine signature cannot be taken for one over anything else (v1 signed
// format 2's whole-file checksum).
const SignatureContext = "kiln engine signature v2\x00"

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
	// Checksum is the file's digest (set by Parse): the SHA-256 of the
	// head, which holds every chunk's checksum.
	Checksum [sha256.Size]byte
	// Signer is the public key whose signature the file carries (set by
	// Parse; nil: unsigned). Parse has verified the signature against it;
	// whether that key is one to trust is the caller's call (see
	// VerifySigner).
	Signer ed25519.PublicKey
	// bodyLen is where the trailer starts.
	bodyLen int
	// sums are each section's chunk checksums, offs its offsets in the
	// file (set by Parse).
	sums [][][sha256.Size]byte
	offs []int
}

// HasCode reports whether the file holds code for the target triple.
func (f *File) HasCode(triple string) bool {
	return slices.ContainsFunc(f.Sections, func(s Section) bool { return s.Name == codePrefix+triple })
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
	body, digest := f.marshalBody()
	return appendTrailer(body, digest, nil)
}

// MarshalSigned encodes the file with an ed25519 signature of its digest.
func (f *File) MarshalSigned(key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("signing key: %d bytes, want an ed25519 private key (%d)", len(key), ed25519.PrivateKeySize)
	}
	body, digest := f.marshalBody()
	return appendTrailer(body, digest, key), nil
}

// chunks is the number of checksums of a section of n bytes.
func chunks(n uint64) uint64 { return max(1, n/ChunkSize+min(1, n%ChunkSize)) }

func (f *File) marshalBody() ([]byte, [sha256.Size]byte) {
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
		tableSize += 2 + len(s.Name) + 8 + 8 + int(chunks(uint64(len(s.Data))))*sha256.Size
	}
	offset := alignUp(tableStart + tableSize)
	head := offset
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
		for c := range int(chunks(uint64(len(s.Data)))) {
			sum := sha256.Sum256(s.Data[c*ChunkSize : min((c+1)*ChunkSize, len(s.Data))])
			hdr.Write(sum[:])
		}
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
	return out, sha256.Sum256(out[:head])
}

// appendTrailer appends the trailer for body, whose digest is digest,
// signed when key is set.
func appendTrailer(body []byte, digest [sha256.Size]byte, key ed25519.PrivateKey) []byte {
	out := append(body, trailerMagic...)
	kind := uint32(sigNone)
	if key != nil {
		kind = sigEd25519
	}
	out = binary.LittleEndian.AppendUint32(out, kind)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = append(out, digest[:]...)
	if key != nil {
		out = append(out, key.Public().(ed25519.PublicKey)...)
		out = append(out, ed25519.Sign(key, signedMessage(digest))...)
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

// Unmarshal parses and verifies an engine file held in memory: Parse, then
// Verify. Section data alias buf.
func Unmarshal(buf []byte) (*File, error) {
	f, err := Parse(buf)
	if err != nil {
		return nil, err
	}
	if err := f.Verify(); err != nil {
		return nil, err
	}
	return f, nil
}

// Parse reads and checks an engine file's structure: magic, format
// version, the header's and the section table's checksums, the table's
// layout, zero padding, the trailer, the digest and a signature when there
// is one. It reads the head, the padding and the trailer, not the
// sections' data: those alias buf unverified until Verify checks them in
// place, or Read and Detach as they copy them out. Errors name the damaged
// region. A fault reading buf (a mapped file cut short under the mapping)
// is an error, not a crash.
func Parse(buf []byte) (f *File, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer catchFault(&err)
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

	f = &File{KilnVersion: kilnVersion}
	type entry struct {
		name   string
		off, n uint64
	}
	tableStart := r.pos
	entries := make([]entry, 0, count)
	for i := uint32(0); i < count && r.err == nil; i++ {
		var e entry
		e.name = r.string()
		e.off, e.n = r.u64(), r.u64()
		k := chunks(e.n)
		if r.err != nil || k > uint64((len(buf)-r.pos)/sha256.Size) {
			r.err = ErrTruncated // more checksums than the file has bytes left for
			break
		}
		sums := make([][sha256.Size]byte, k)
		for j := range sums {
			copy(sums[j][:], r.bytes(sha256.Size))
		}
		entries = append(entries, e)
		f.sums = append(f.sums, sums)
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
	head := next // the digest's span: up to the first section
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
		f.Sections = append(f.Sections, Section{Name: e.name, Data: buf[e.off : e.off+e.n : e.off+e.n]})
		f.offs = append(f.offs, int(e.off))
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
	if sha256.Sum256(buf[:head]) != f.Checksum {
		return nil, fmt.Errorf("%w in the trailer: its digest does not match the header and section table", ErrChecksum)
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
// signature (nil: unsigned). Parse verifies both.
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
