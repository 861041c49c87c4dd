package pgserver

import (
	"fmt"
	"os"
	"os/user"
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
