package readfile

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

func TestWithin(t *testing.T) {
	data := make([]byte, 3*PrefixBytes+17)
	rand.New(rand.NewSource(1)).Read(data)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	var seenSize int64
	got, err := Within(path, ir.Limits{}, func(p []byte, size int64) error {
		seen, seenSize = append([]byte{}, p...), size
		return nil
	})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v; want the file's %d", len(got), err, len(data))
	}
	if !bytes.Equal(seen, data[:PrefixBytes]) || seenSize != int64(len(data)) {
		t.Errorf("check saw %d bytes of a %d-byte file", len(seen), seenSize)
	}
	bad := errors.New("bad prefix")
	if _, err := Within(path, ir.Limits{}, func([]byte, int64) error { return bad }); !errors.Is(err, bad) {
		t.Errorf("a failing check: %v", err)
	}
	if _, err := Within(path, ir.Limits{MaxFileBytes: int64(len(data)) - 1}, nil); !errors.Is(err, ir.ErrLimit) {
		t.Errorf("over the file limit: %v", err)
	}
	if _, err := Within(t.TempDir(), ir.Limits{}, nil); err == nil {
		t.Error("a folder read as a file")
	}
}
