package main

import (
	"strings"
	"testing"
)

// The node's zone limits come from the agent's flags: a quota as a
// quantity, process limits at zonecfg's floor or none, and defaults that
// bound every zone.
func TestAgentZoneLimitFlags(t *testing.T) {
	parse := func(args ...string) (int64, int64, int64, error) {
		fs, o := agentFlags()
		if err := fs.Parse(append([]string{"--api-url", "https://cp:8443"}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.config()
		return cfg.ZoneQuota, cfg.ZoneMaxProcesses, cfg.ZoneMaxLWPs, err
	}
	q, p, l, err := parse()
	if err != nil || q != 0 || p != 4096 || l != 16384 {
		t.Errorf("defaults: quota %d processes %d lwps %d %v", q, p, l, err)
	}
	q, p, l, err = parse("--zone-quota", "20Gi", "--zone-max-processes", "0", "--zone-max-lwps", "100")
	if err != nil || q != 20<<30 || p != 0 || l != 100 {
		t.Errorf("set: quota %d processes %d lwps %d %v", q, p, l, err)
	}
	for _, bad := range [][]string{{"--zone-quota", "lots"}, {"--zone-quota", "-1Gi"}, {"--zone-max-processes", "99"}, {"--zone-max-lwps", "x"}} {
		if _, _, _, err := parse(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
