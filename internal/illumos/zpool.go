package illumos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

const zpoolPath = "/usr/sbin/zpool"

// Zpool reads the host's storage pools.
type Zpool struct{ Runner Executor }

// Pool is one row of `zpool list -H -p -o name,size,free`.
type Pool struct {
	Name string
	Size uint64 // bytes
	Free uint64 // bytes
}

// List returns every pool of the host.
func (z Zpool) List(ctx context.Context) ([]Pool, error) {
	const op = "zpool list"
	res, err := run(ctx, z.Runner, op, "", Cmd{Path: zpoolPath, Args: []string{"list", "-H", "-p", "-o", "name,size,free"}})
	if err != nil {
		return nil, err
	}
	pools, err := ParseZpoolList(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, "", err)
	}
	return pools, nil
}

// ParseZpoolList parses `zpool list -H -p -o name,size,free` (TAB
// separated, exact bytes).
func ParseZpoolList(out string) ([]Pool, error) {
	var pools []Pool
	for _, line := range nonEmptyLines(out) {
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[0] == "" {
			return nil, fmt.Errorf("want name, size, free: %q", line)
		}
		size, err1 := strconv.ParseUint(f[1], 10, 64)
		free, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad sizes in %q", line)
		}
		pools = append(pools, Pool{Name: f[0], Size: size, Free: free})
	}
	return pools, nil
}
