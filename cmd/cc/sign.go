package main

import (
	"crypto/ed25519"

	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// signingKey reads build --sign's private key before the build starts, so
// that a missing or wrong key costs no build. No key: nil.
func signingKey(path, emit string) (ed25519.PrivateKey, error) {
	if path == "" {
		return nil, nil
	}
	if emit != "engine" {
		return nil, cli.Usagef("--sign signs engines; --emit %s writes none", emit)
	}
	key, err := engine.ReadPrivateKeyFile(path)
	if err != nil {
		return nil, cli.FileError(path, err)
	}
	return key, nil
}

// keyFiles lists --sign's key among the build's inputs, so that no output
// may overwrite it.
func keyFiles(path string) []cli.File {
	if path == "" {
		return nil
	}
	return []cli.File{{Path: path, Role: "the --sign key"}}
}

// signed returns the engine file signed with key (as it is when key is
// nil): its trailer then holds the key's signature of the file's digest,
// which covers every byte before the trailer.
func signed(eng []byte, key ed25519.PrivateKey) ([]byte, error) {
	if key == nil {
		return eng, nil
	}
	return engine.Sign(eng, key)
}
