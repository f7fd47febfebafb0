package engine

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sample(t testing.TB) *Engine {
	rng := rand.New(rand.NewSource(1))
	weights := make([]byte, 1000)
	rng.Read(weights)
	so := make([]byte, 333)
	rng.Read(so)
	return &Engine{
		Meta: Metadata{
			KilnVersion: "0.1.0", ModelName: "m", Precision: "fp32",
			Target:     Target{Triple: "x86_64-unknown-linux-gnu", CPU: "native", Features: []string{"avx512f"}},
			Inputs:     []Binding{{Name: "x", DType: "float", Shape: []int64{1, 64}, Index: 0}},
			Outputs:    []Binding{{Name: "y", DType: "float", Shape: []int64{1, 10}, Index: 1}},
			ArenaBytes: 4096,
		},
		Plan:    []byte("graph text"),
		Weights: weights,
		Code:    map[string][]byte{"x86_64-unknown-linux-gnu": so},
	}
}

func encode(t testing.TB, e *Engine) []byte {
	t.Helper()
	b, err := e.Encode()
	require.NoError(t, err)
	return b
}

// testKey is a fixed key pair, so signed encodings are reproducible.
func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func TestRoundTripIsByteIdentical(t *testing.T) {
	e := sample(t)
	a := encode(t, e)
	assert.Equal(t, a, encode(t, e), "encoding twice must give identical bytes")

	d, err := Decode(a)
	require.NoError(t, err)
	assert.Equal(t, e.Meta, d.Meta)
	assert.Equal(t, e.Plan, d.Plan)
	assert.Equal(t, e.Weights, d.Weights)
	assert.Equal(t, e.Code, d.Code)
	assert.Nil(t, d.Signer)
	f, err := Unmarshal(a)
	require.NoError(t, err)
	first := uintptrOffset(a, f.Sections[0].Data)
	assert.Equal(t, sha256.Sum256(a[:first]), d.Checksum, "the digest is the SHA-256 of every byte before the first section")
	assert.Equal(t, a, encode(t, d))

	s1, err := e.EncodeSigned(testKey(7))
	require.NoError(t, err)
	s2, err := e.EncodeSigned(testKey(7))
	require.NoError(t, err)
	assert.Equal(t, s1, s2, "signed encodings are deterministic too")
	assert.Equal(t, a[:len(a)-trailerSize], s1[:len(s1)-signedTrailerSize], "signing changes the trailer only")
	ds, err := Decode(s1)
	require.NoError(t, err)
	assert.Equal(t, testKey(7).Public(), ds.Signer)
	assert.Equal(t, d.Checksum, ds.Checksum)
}

func TestSectionsAreAligned(t *testing.T) {
	buf := encode(t, sample(t))
	f, err := Unmarshal(buf)
	require.NoError(t, err)
	for _, s := range f.Sections {
		off := int(uintptrOffset(buf, s.Data))
		assert.Zero(t, off%Align, "section %q at offset %d", s.Name, off)
	}
}

func uintptrOffset(buf, sub []byte) int {
	if len(sub) == 0 {
		return 0
	}
	for i := range buf {
		if &buf[i] == &sub[0] {
			return i
		}
	}
	return -1
}

func TestCorruptSectionIsNamed(t *testing.T) {
	buf := encode(t, sample(t))
	f, err := Unmarshal(buf)
	require.NoError(t, err)
	for _, s := range f.Sections {
		if len(s.Data) == 0 {
			continue
		}
		bad := append([]byte(nil), buf...)
		off := uintptrOffset(buf, s.Data)
		bad[off+len(s.Data)/2] ^= 0x40
		_, err := Decode(bad)
		require.Error(t, err, s.Name)
		assert.True(t, errors.Is(err, ErrChecksum), "%v", err)
		assert.Contains(t, err.Error(), `section "`+s.Name+`"`)
	}
}

// regions are the names a refusal may give the damaged part of a file.
var regions = []string{"bad magic", "format", "header", "section table", `section "`, "padding", "trailer", "truncated"}

// Every single flipped bit anywhere in the file, signed or not, is refused
// with an error that names a region and never an empty or unprintable
// section name.
func TestEveryFlippedByteIsRefused(t *testing.T) {
	unsigned := encode(t, sample(t))
	signed, err := sample(t).EncodeSigned(testKey(1))
	require.NoError(t, err)
	for _, buf := range [][]byte{unsigned, signed} {
		for i := range buf {
			for _, bit := range []byte{0x01, 0x80} {
				bad := append([]byte(nil), buf...)
				bad[i] ^= bit
				_, err := Decode(bad)
				require.Error(t, err, "byte %d bit %#x", i, bit)
				msg := err.Error()
				assert.NotContains(t, msg, `section ""`, "byte %d", i)
				for _, r := range msg {
					require.True(t, r >= 0x20 && r < 0x7f, "byte %d: unprintable message %q", i, msg)
				}
				named := false
				for _, r := range regions {
					named = named || strings.Contains(msg, r)
				}
				assert.True(t, named, "byte %d: %q names no region", i, msg)
			}
		}
	}
}

func TestIntegrityRefusals(t *testing.T) {
	buf := encode(t, sample(t))

	// The kiln version string in the header (offset 19 is inside "0.1.0").
	bad := append([]byte(nil), buf...)
	bad[19] ^= 1
	_, err := Decode(bad)
	assert.ErrorIs(t, err, ErrChecksum)
	assert.ErrorContains(t, err, "in the header")

	// The padding between the section table and the first section, and
	// after a section.
	f, err := Unmarshal(buf)
	require.NoError(t, err)
	first := uintptrOffset(buf, f.Sections[0].Data)
	bad = append([]byte(nil), buf...)
	bad[first-1] = 0xff
	_, err = Decode(bad)
	assert.ErrorContains(t, err, "padding after the section table is not zero")
	end := uintptrOffset(buf, f.Sections[0].Data) + len(f.Sections[0].Data)
	require.NotZero(t, end%Align, "the test needs padding after the first section")
	bad = append([]byte(nil), buf...)
	bad[end] = 1
	_, err = Decode(bad)
	assert.ErrorContains(t, err, `padding after section "`+f.Sections[0].Name+`" is not zero`)

	// Bytes appended after the trailer.
	for _, extra := range [][]byte{{0}, []byte("appended"), make([]byte, 4096)} {
		_, err = Decode(append(append([]byte(nil), buf...), extra...))
		assert.ErrorIs(t, err, ErrTrailingData)
		assert.ErrorContains(t, err, "follow the trailer")
	}
	// A section table edited, then its checksum recomputed: the checksum
	// passes and the layout check refuses it.
	tableStart := len(Magic) + 4 + 4 + 2 + len("0.1.0") + sha256.Size
	bad = append([]byte(nil), buf...)
	nameLen := int(binary.LittleEndian.Uint16(bad[tableStart:]))
	offAt := tableStart + 2 + nameLen
	binary.LittleEndian.PutUint64(bad[offAt:], binary.LittleEndian.Uint64(bad[offAt:])+Align)
	tableEnd := tableStart
	for range f.Sections {
		n := int(binary.LittleEndian.Uint16(bad[tableEnd:]))
		tableEnd += 2 + n + 8 + 8 + sha256.Size
	}
	sum := sha256.Sum256(bad[tableStart:tableEnd])
	copy(bad[tableEnd:], sum[:])
	_, err = Decode(bad)
	assert.ErrorIs(t, err, ErrBadSection)
	assert.ErrorContains(t, err, "starts at byte")

	// Every cut is refused.
	for n := 0; n < len(buf); n++ {
		_, err := Decode(buf[:n])
		require.Error(t, err, "cut at %d", n)
	}
	// The trailer's digest.
	bad = append([]byte(nil), buf...)
	bad[len(bad)-1] ^= 1
	_, err = Decode(bad)
	assert.ErrorIs(t, err, ErrChecksum)
	assert.ErrorContains(t, err, "in the trailer: its digest does not match")
}

// Section names are validated after the table's checksum passes, and a bad
// name is described, never echoed when unprintable.
func TestSectionNames(t *testing.T) {
	for name, want := range map[string]string{
		"":           "empty section name",
		"\x01\xffab": "not printable ASCII",
		"extra":      `unknown section "extra"`,
		"code/":      `unknown section "code/"`,
		"code/X86":   `unknown section "code/X86"`,
	} {
		f := &File{KilnVersion: "0.1.0", Sections: []Section{{Name: name, Data: []byte("x")}}}
		_, err := Unmarshal(f.Marshal())
		assert.ErrorIs(t, err, ErrBadSection, "%q", name)
		assert.ErrorContains(t, err, want, "%q", name)
		assert.NotContains(t, err.Error(), "\x01")
	}
	f := &File{KilnVersion: "0.1.0\x00", Sections: []Section{{Name: "meta", Data: []byte("x")}}}
	_, err := Unmarshal(f.Marshal())
	assert.ErrorIs(t, err, ErrBadHeader)

	empty, err := Unmarshal((&File{KilnVersion: "0.1.0"}).Marshal())
	require.NoError(t, err, "a file without sections is well formed (Decode refuses it)")
	assert.Empty(t, empty.Sections)
}

func TestRefusals(t *testing.T) {
	buf := encode(t, sample(t))

	_, err := Decode([]byte("\x7fELF not an engine at all"))
	assert.ErrorIs(t, err, ErrNotEngine)

	for _, n := range []int{3, len(Magic) + 2, 40, len(buf) / 2, len(buf) - 1} {
		_, err = Decode(buf[:n])
		assert.ErrorIs(t, err, ErrTruncated, "cut at %d", n)
	}

	newer := append([]byte(nil), buf...)
	binary.LittleEndian.PutUint32(newer[len(Magic):], FormatVersion+1)
	_, err = Decode(newer)
	assert.ErrorIs(t, err, ErrTooNew)

	// Formats 1 (no whole-file checksum) and 2 (one checksum per section)
	// are refused with what to do.
	for _, v := range []uint32{1, 2} {
		older := append([]byte(nil), buf...)
		binary.LittleEndian.PutUint32(older[len(Magic):], v)
		_, err = Decode(older)
		assert.ErrorIs(t, err, ErrTooOld)
		assert.ErrorContains(t, err, fmt.Sprintf("format %d, this runtime reads format 3; rebuild the engine with this kiln", v))
	}

	noCode := sample(t)
	noCode.Code = nil
	_, err = Decode(encode(t, noCode))
	assert.ErrorContains(t, err, "no code section")
}

// Metadata that checksums correctly but cannot describe a runnable engine
// is refused with the field named.
func TestMetadataRefusals(t *testing.T) {
	cases := []struct {
		name string
		edit func(m *Metadata)
		want string
	}{
		{"no outputs", func(m *Metadata) { m.Outputs = nil }, "no outputs"},
		{"output index out of range", func(m *Metadata) { m.Outputs[0].Index = 5 }, `output "y" has io index 5, out of range`},
		{"negative index", func(m *Metadata) { m.Inputs[0].Index = -1 }, `input "x" has io index -1`},
		{"shared index", func(m *Metadata) { m.Outputs[0].Index = 0 }, `both have io index 0`},
		{"duplicate name", func(m *Metadata) { m.Outputs[0].Name = "x" }, `output "x" is bound twice`},
		{"empty name", func(m *Metadata) { m.Inputs[0].Name = "" }, "input 0 has name empty"},
		{"control character", func(m *Metadata) { m.Inputs[0].Name = "a\nb" }, "input 0 has name (unprintable"},
		{"negative dim", func(m *Metadata) { m.Outputs[0].Shape = []int64{1, -10} }, "negative dim"},
		{"overflowing shape", func(m *Metadata) { m.Inputs[0].Shape = []int64{1 << 32, 1 << 32} }, "more than 2^63 elements"},
		{"empty dtype", func(m *Metadata) { m.Inputs[0].DType = "" }, "dtype empty"},
		{"negative arena", func(m *Metadata) { m.ArenaBytes = -1 }, "arena_bytes is negative"},
		{"precision", func(m *Metadata) { m.Precision = "fp64" }, `precision "fp64"`},
		{"triple without code", func(m *Metadata) { m.Target.Triple = "aarch64-unknown-linux-gnu" }, `"aarch64-unknown-linux-gnu" has no code section`},
		{"kiln version", func(m *Metadata) { m.KilnVersion = "9.9.9" }, "the header says"},
		{"output default", func(m *Metadata) { m.Outputs[0].Default = []byte{1} }, `output "y": an output cannot have a default value`},
		{"folded and bound", func(m *Metadata) { m.Folded = []string{"x"} }, `folded input "x" is malformed or also bound`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := sample(t)
			c.edit(&e.Meta)
			f, err := e.file()
			require.NoError(t, err)
			f.KilnVersion = "0.1.0"
			_, err = Decode(f.Marshal())
			assert.ErrorIs(t, err, ErrBadMetadata)
			assert.ErrorContains(t, err, c.want)
		})
	}

	// Unknown fields and trailing data in the JSON are refused too.
	for _, meta := range []string{`{"kiln_version": "0.1.0", "arena": 0}`, `{"kiln_version": "0.1.0"} {}`} {
		f, err := sample(t).file()
		require.NoError(t, err)
		f.Sections[0].Data = []byte(meta)
		_, err = Decode(f.Marshal())
		assert.ErrorIs(t, err, ErrBadMetadata, meta)
	}
}

func TestSigning(t *testing.T) {
	key, other := testKey(1), testKey(2)
	pub := key.Public().(ed25519.PublicKey)
	unsigned := encode(t, sample(t))
	signed, err := Sign(unsigned, key)
	require.NoError(t, err)
	direct, err := sample(t).EncodeSigned(key)
	require.NoError(t, err)
	assert.Equal(t, direct, signed, "signing a file gives what encoding signed gives")
	resigned, err := Sign(signed, other)
	require.NoError(t, err)
	assert.Len(t, resigned, len(signed), "re-signing replaces the signature")

	e, err := Decode(signed)
	require.NoError(t, err)
	assert.NoError(t, e.VerifySigner(pub))
	err = e.VerifySigner(other.Public().(ed25519.PublicKey))
	assert.ErrorIs(t, err, ErrWrongSigner)
	assert.ErrorContains(t, err, Fingerprint(pub))

	u, err := Decode(unsigned)
	require.NoError(t, err)
	assert.ErrorIs(t, u.VerifySigner(pub), ErrUnsigned)

	// A signature or key damaged in the trailer is refused on any load.
	for _, back := range []int{1, ed25519.SignatureSize + 1} {
		bad := append([]byte(nil), signed...)
		bad[len(bad)-back] ^= 1
		_, err := Decode(bad)
		assert.ErrorIs(t, err, ErrBadSignature, "%d bytes from the end", back)
	}
	// So is a signed file whose contents changed with every checksum
	// recomputed: the signature covers the digest.
	edited := sample(t)
	edited.Meta.ArenaBytes = 0
	body := encode(t, edited)
	ef, err := Unmarshal(body)
	require.NoError(t, err)
	sum := ef.Checksum
	body = body[:len(body)-trailerSize]
	forged := append(append([]byte(nil), body...), trailerMagic...)
	forged = binary.LittleEndian.AppendUint32(forged, sigEd25519)
	forged = binary.LittleEndian.AppendUint32(forged, 0)
	forged = append(forged, sum[:]...)
	forged = append(forged, signed[len(signed)-ed25519.PublicKeySize-ed25519.SignatureSize:]...)
	_, err = Decode(forged)
	assert.ErrorIs(t, err, ErrBadSignature)

	_, err = Sign(unsigned, ed25519.PrivateKey("short"))
	assert.Error(t, err)
	_, err = Sign(unsigned[:len(unsigned)-1], key)
	assert.ErrorIs(t, err, ErrTruncated)
}

func TestKeyFiles(t *testing.T) {
	pub, priv, err := GenerateKey(rand.New(rand.NewSource(3)))
	require.NoError(t, err)
	privPEM, err := MarshalPrivateKey(priv)
	require.NoError(t, err)
	pubPEM, err := MarshalPublicKey(pub)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(privPEM, []byte("-----BEGIN PRIVATE KEY-----\n")))
	assert.True(t, bytes.HasPrefix(pubPEM, []byte("-----BEGIN PUBLIC KEY-----\n")))

	gotPriv, err := ParsePrivateKey(privPEM)
	require.NoError(t, err)
	assert.Equal(t, priv, gotPriv)
	gotPub, err := ParsePublicKey(pubPEM)
	require.NoError(t, err)
	assert.Equal(t, pub, gotPub)
	assert.Regexp(t, `^SHA256:[A-Za-z0-9+/]{43}$`, Fingerprint(pub))

	_, err = ParsePublicKey(privPEM)
	assert.ErrorContains(t, err, `want "PUBLIC KEY"`)
	_, err = ParsePrivateKey(pubPEM)
	assert.ErrorContains(t, err, `want "PRIVATE KEY"`)
	_, err = ParsePublicKey([]byte("not a key"))
	assert.ErrorContains(t, err, "no PEM block")
	_, err = ParsePublicKey(append(append([]byte{}, pubPEM...), pubPEM...))
	assert.ErrorContains(t, err, "data after")
}

func FuzzLoadEngine(f *testing.F) {
	buf := encode(f, sample(f))
	signed, err := sample(f).EncodeSigned(testKey(1))
	require.NoError(f, err)
	f.Add(buf)
	f.Add(signed)
	f.Add(buf[:100])
	f.Add([]byte(Magic))
	f.Add((&File{KilnVersion: "0.1.0"}).Marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err == nil && e == nil {
			t.Fatal("nil engine without error")
		}
		if err == nil && !bytes.HasPrefix(data, []byte(Magic)) {
			t.Fatal("accepted a file without the magic")
		}
	})
}
