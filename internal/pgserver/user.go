package pgserver

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// PostgreSQL refuses to run as root. When we are root (CI, containers) the
// cluster runs as the unprivileged "postgres" user, or "nobody" without one.
func postgresUser() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return uid, gid, true
	}
	return 0, 0, false
}

func asPostgres() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{}
	if uid, gid, ok := postgresUser(); ok {
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return attr
}

func chownForPostgres(path string) error {
	uid, gid, ok := postgresUser()
	if !ok {
		return nil
	}
	if err := os.Chown(path, uid, gid); err != nil {
		return fmt.Errorf("hand %s to the postgres user: %w", path, err)
	}
	return nil
}

// makeTraversable lets the postgres user reach dir when we run as root:
// every ancestor gets search (x) permission for others, nothing more — no
// listing, no reading. Without it a data directory under /root or a
// private temp dir cannot be used at all.
func makeTraversable(dir string) error {
	if _, _, ok := postgresUser(); !ok {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("let the postgres user reach %s: %w", dir, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
