package sim_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stop-all stops every NAT daemon of the node, including one it cannot
// find through the pid file (lost, or overwritten by a later daemon).
func TestStopAllStopsEveryNatd(t *testing.T) {
	h := newHost(t)
	a := backend(t, "127.0.0.2", "A")
	h.mustIn(rdrRule(clusterIP(9), 80, a), "ipnat", "-f", "-")
	pidFile := filepath.Join(h.root, "run", "natd.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || !alive(pid) {
		t.Fatalf("no natd running (pid file %q)", b)
	}
	os.Remove(pidFile)
	h.node().Run(t, "stop-all")
	waitFor(t, 3*time.Second, "natd to stop", func() bool { return !alive(pid) })
}
