package engine

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"

	"github.com/kiln-ml/kiln/internal/readfile"
)

// Signing: an engine is native code, so a deployment may want to run only
// engines its own build signed. The trailer can carry an ed25519 public key
// and its signature of SignatureContext + the file's digest (format.go),
// which covers every byte before the trailer; Parse verifies it whenever it
// is present, and VerifySigner checks that the
// signer is the key the caller trusts.
//
// Key files are PEM, the formats `openssl genpkey -algorithm ed25519` and
// `openssl pkey -pubout` write: a private key is a "PRIVATE KEY" block
// (PKCS #8), a public key a "PUBLIC KEY" block (PKIX SubjectPublicKeyInfo).

// Errors of VerifySigner.
var (
	ErrUnsigned    = errors.New("the engine is not signed")
	ErrWrongSigner = errors.New("the engine is signed by another key")
)

// VerifySigner checks that f carries a valid signature by want.
func (f *File) VerifySigner(want ed25519.PublicKey) error {
	return verifySigner(f.Signer, want)
}

// VerifySigner checks that e (as decoded) carries a valid signature by want.
func (e *Engine) VerifySigner(want ed25519.PublicKey) error {
	return verifySigner(e.Signer, want)
}

func verifySigner(got, want ed25519.PublicKey) error {
	if len(want) != ed25519.PublicKeySize {
		return fmt.Errorf("the required key is not an ed25519 public key (%d bytes)", len(want))
	}
	if got == nil {
		return fmt.Errorf("%w (a signed engine is built with `cc build --sign KEY`); the required key is %s", ErrUnsigned, Fingerprint(want))
	}
	if !got.Equal(want) {
		return fmt.Errorf("%w (%s), not the required key %s", ErrWrongSigner, Fingerprint(got), Fingerprint(want))
	}
	return nil
}

// Sign returns a verified engine file with its trailer replaced by one
// signed with key (whether or not it was signed before).
func Sign(buf []byte, key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("signing key: %d bytes, want an ed25519 private key (%d)", len(key), ed25519.PrivateKeySize)
	}
	f, err := Unmarshal(buf)
	if err != nil {
		return nil, err
	}
	body := make([]byte, f.bodyLen, f.bodyLen+signedTrailerSize)
	copy(body, buf)
	return appendTrailer(body, f.Checksum, key), nil
}

// Fingerprint names a public key: "SHA256:" and the unpadded base64 of the
// SHA-256 of its 32 bytes.
func Fingerprint(key ed25519.PublicKey) string {
	sum := sha256.Sum256(key)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// GenerateKey makes a signing key pair from rand (nil: crypto/rand).
func GenerateKey(r io.Reader) (ed25519.PublicKey, ed25519.PrivateKey, error) {
	if r == nil {
		r = rand.Reader
	}
	return ed25519.GenerateKey(r)
}

// MarshalPrivateKey encodes a private key as a PEM "PRIVATE KEY" block.
func MarshalPrivateKey(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// MarshalPublicKey encodes a public key as a PEM "PUBLIC KEY" block.
func MarshalPublicKey(key ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePrivateKey decodes a PEM "PRIVATE KEY" block holding an ed25519 key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	der, err := pemBlock(data, "PRIVATE KEY", "a private key (.key)")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("not a PKCS #8 private key: %v", err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an ed25519 private key", k)
	}
	return key, nil
}

// ParsePublicKey decodes a PEM "PUBLIC KEY" block holding an ed25519 key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	der, err := pemBlock(data, "PUBLIC KEY", "a public key (.pub)")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("not a PKIX public key: %v", err)
	}
	key, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an ed25519 public key", k)
	}
	return key, nil
}

// maxKeyFile bounds what the key file readers read: a key file is a few
// hundred bytes.
const maxKeyFile = 64 << 10

// ReadPrivateKeyFile reads a private key file (see ParsePrivateKey).
func ReadPrivateKeyFile(path string) (ed25519.PrivateKey, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	key, err := ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// ReadPublicKeyFile reads a public key file (see ParsePublicKey).
func ReadPublicKeyFile(path string) (ed25519.PublicKey, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	key, err := ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

func readKeyFile(path string) ([]byte, error) {
	f, err := readfile.Open(path) // not a named pipe, which would block
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%s: larger than %d bytes, too large for a key file", path, maxKeyFile)
	}
	return data, nil
}

// pemBlock returns the DER of the one PEM block of the given type in data.
func pemBlock(data []byte, typ, what string) ([]byte, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM block: want %s as `cc keygen` writes it", what)
	}
	if block.Type != typ {
		return nil, fmt.Errorf("a PEM %q block, want %q (%s)", block.Type, typ, what)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("data after the PEM %q block", typ)
	}
	return block.Bytes, nil
}
