package main

import (
	"flag"

	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// requireSignedFlag declares --require-signed on a subcommand.
func requireSignedFlag(fs *flag.FlagSet) *string {
	return fs.String("require-signed", "", "refuse the engine unless it is signed by the ed25519 public `KEY` file (from cc keygen)")
}

// loadEngine loads an engine, requiring a signature by the key in pubPath
// when it is set.
func loadEngine(path, pubPath string) (*runtime.Engine, error) {
	return loadEngineWith(path, pubPath, runtime.LoadOptions{})
}

// loadEngineWith is loadEngine with options.
func loadEngineWith(path, pubPath string, opts runtime.LoadOptions) (*runtime.Engine, error) {
	if pubPath != "" {
		key, err := engine.ReadPublicKeyFile(pubPath)
		if err != nil {
			return nil, cli.FileError(pubPath, err)
		}
		opts.RequireSigned = key
	}
	return runtime.LoadWith(path, opts)
}
