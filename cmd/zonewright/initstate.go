package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/pki"
)

// initState makes what a deployment's control plane shares before any of
// it starts: the cluster CA in --state-dir's tls/ and the key secrets are
// encrypted with. Either is kept when it exists, so running it again (a
// container's init step at every start) changes nothing.
func initState(_ context.Context, args []string) error {
	fs, o := initFlags()
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(o.stateDir, "tls"), controlplane.CACommonName)
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	keyFile := o.encryptionKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(o.stateDir, "encryption.key")
	}
	if _, err := encryption.EnsureKeyFile(keyFile); err != nil {
		return fmt.Errorf("--encryption-key-file: %w", err)
	}
	fmt.Printf("cluster CA %s (SHA-256 %s)\nencryption key %s\n", controlplane.CAFile(o.stateDir), ca.Fingerprint(), keyFile)
	return nil
}

type initOptions struct {
	stateDir, encryptionKeyFile string
}

func initFlags() (*flag.FlagSet, *initOptions) {
	fs := flag.NewFlagSet("init", flag.ExitOnError)
	o := &initOptions{}
	fs.StringVar(&o.stateDir, "state-dir", env("ZW_STATE_DIR", "/var/lib/zonewright"), "the control plane's state directory: the cluster CA is made in its tls/ (ca.crt, ca.key) if missing (env ZW_STATE_DIR)")
	fs.StringVar(&o.encryptionKeyFile, "encryption-key-file", env("ZW_ENCRYPTION_KEY_FILE", ""), "where the secrets' encryption key is made (32 random bytes, base64, mode 0600) if missing; default <state-dir>/encryption.key (env ZW_ENCRYPTION_KEY_FILE)")
	return fs, o
}
