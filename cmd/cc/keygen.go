package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/runtime/engine"
)

var keygenCmd = &cli.Command{
	Name:    "keygen",
	Summary: "make an ed25519 key pair for signing engines (cc build --sign)",
	Help: `Writes NAME.key, the private key (PEM "PRIVATE KEY", PKCS #8; mode 0600), and
NAME.pub, the public key (PEM "PUBLIC KEY", PKIX) — the formats of
'openssl genpkey -algorithm ed25519' and 'openssl pkey -pubout', which may make
them too — and prints the public key's fingerprint. Existing files are never
overwritten. Sign engines with 'cc build --sign NAME.key'; run only engines
signed by the key with 'infer run|check|bench --require-signed NAME.pub'.`,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		out := fs.String("out", "", "`NAME` of the key files: writes NAME.key and NAME.pub (required)")
		return func(env *cli.Env, args []string) error {
			if *out == "" {
				return cli.Usagef("--out NAME is required")
			}
			return keygen(env, *out)
		}
	},
}

func keygen(env *cli.Env, name string) error {
	privPath, pubPath := name+".key", name+".pub"
	for _, p := range []string{privPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s: already exists; keygen never overwrites a key (remove it or choose another --out)", p)
		} else if !os.IsNotExist(err) {
			return cli.FileError(p, err)
		}
	}
	pub, priv, err := engine.GenerateKey(nil)
	if err != nil {
		return err
	}
	privPEM, err := engine.MarshalPrivateKey(priv)
	if err != nil {
		return err
	}
	pubPEM, err := engine.MarshalPublicKey(pub)
	if err != nil {
		return err
	}
	var files []*atomicfile.File
	for _, f := range []struct {
		path string
		data []byte
		perm fs.FileMode
	}{{privPath, privPEM, 0o600}, {pubPath, pubPEM, 0o644}} {
		w, err := atomicfile.Create(f.path, f.perm)
		if err != nil {
			for _, w := range files {
				w.Abort()
			}
			return cli.FileError(f.path, err)
		}
		files = append(files, w)
		if _, err := w.Write(f.data); err != nil {
			for _, w := range files {
				w.Abort()
			}
			return cli.FileError(f.path, err)
		}
	}
	if err := atomicfile.CommitAll(files...); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s (private: keep it secret) and %s\nkey fingerprint %s\n", privPath, pubPath, engine.Fingerprint(pub))
	return nil
}
