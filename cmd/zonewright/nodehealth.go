package main

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	nodeagent "github.com/zonewright/zonewright/internal/agent"
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

// warnShortGrace says when the grace period leaves agents with the default
// heartbeat interval too little room: their nodes would flap NotReady.
func warnShortGrace(log *slog.Logger, grace time.Duration) {
	if grace < 2*nodeagent.DefaultHeartbeatInterval {
		log.Warn("the node grace period is shorter than two default agent heartbeats; run agents with a shorter --heartbeat-interval or nodes flap NotReady",
			"gracePeriod", grace, "defaultHeartbeatInterval", nodeagent.DefaultHeartbeatInterval)
	}
}

// devHeartbeat is the heartbeat interval of the dev stack's agents: the
// default, or a quarter of a shorter grace period, so nodes never flap.
func devHeartbeat(grace time.Duration) time.Duration {
	return min(nodeagent.DefaultHeartbeatInterval, max(grace/4, 100*time.Millisecond))
}
