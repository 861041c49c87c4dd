package pgserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The cluster asks every connection, on its socket and on loopback, for
// the superuser's password (SCRAM): anything that runs on this machine,
// a pod's process included, reaches loopback, and a cluster that trusts
// it hands over every secret and the control plane itself.

// PasswordFile is where the superuser's password of the cluster in
// dataDir is kept (mode 0600, beside the data directory: initdb wants an
// empty one, and its owner is the postgres user).
func PasswordFile(dataDir string) string { return filepath.Clean(dataDir) + ".password" }

// hbaConf lets in nobody without the password.
const hbaConf = `# Written by zonewright's pgserver at every start: the password of
# PasswordFile, over the socket and loopback alike.
local all all scram-sha-256
host  all all 127.0.0.1/32 scram-sha-256
host  all all ::1/128 scram-sha-256
`

// ensurePassword returns the superuser's password, setting one first on
// a cluster that has none yet (new, or made when clusters trusted
// loopback): set in single-user mode, before the server listens, then
// pg_hba.conf, then the file, so that a crash in between leaves either
// the old trust or a password that the next start sets again.
func ensurePassword(ctx context.Context, cfg Config) (string, error) {
	file := PasswordFile(cfg.DataDir)
	b, err := os.ReadFile(file)
	password := strings.TrimSpace(string(b))
	switch {
	case err == nil && password != "":
	case err == nil || errors.Is(err, os.ErrNotExist):
		password = rand.Text() // base32: nothing to quote
		cmd := exec.CommandContext(ctx, filepath.Join(cfg.BinDir, "postgres"), "--single", "-D", cfg.DataDir, User)
		cmd.Stdin = strings.NewReader("ALTER USER " + User + " PASSWORD '" + password + "';\n")
		cmd.SysProcAttr = asPostgres()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("set the PostgreSQL password: %w\n%s", err, out.String())
		}
	default:
		return "", fmt.Errorf("read the PostgreSQL password: %w", err)
	}
	hba := filepath.Join(cfg.DataDir, "pg_hba.conf")
	if cur, err := os.ReadFile(hba); err != nil || string(cur) != hbaConf {
		if err := os.WriteFile(hba, []byte(hbaConf), 0o600); err != nil {
			return "", fmt.Errorf("pg_hba.conf: %w", err)
		}
		if err := chownForPostgres(hba); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the PostgreSQL password: %w", err)
	}
	return password, nil
}
