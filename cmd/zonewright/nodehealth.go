package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/workflows"
)

// nodeHealthFlags registers the node-health timings shared by serve and
// dev; the returned function parses them into c once the flags are parsed.
func nodeHealthFlags(fs *flag.FlagSet, c *controlplane.Config) func() error {
	grace := fs.String("node-grace-period", env("ZW_NODE_GRACE_PERIOD", workflows.DefaultNodeGracePeriod.String()),
		"a node without a heartbeat for this long is NotReady and tainted (env ZW_NODE_GRACE_PERIOD)")
	evict := fs.String("node-eviction-timeout", env("ZW_NODE_EVICTION_TIMEOUT", workflows.DefaultNodeEvictionTimeout.String()),
		"a node NotReady for this long has its pods evicted (env ZW_NODE_EVICTION_TIMEOUT)")
	return func() error {
		for _, f := range []struct {
			name, val string
			into      *time.Duration
		}{{"--node-grace-period", *grace, &c.NodeGracePeriod}, {"--node-eviction-timeout", *evict, &c.NodeEvictionTimeout}} {
			d, err := time.ParseDuration(f.val)
			if err != nil || d <= 0 {
				return fmt.Errorf("%s %q: want a positive duration such as 40s or 5m", f.name, f.val)
			}
			*f.into = d
		}
		return nil
	}
}
