package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// A node lives on its lease: heartbeats renew it without writing the Node
// (no change-feed event per heartbeat); a silent agent's lease goes stale
// and node health declares the node NotReady, and its return makes it
// Ready again. The agent reaches the control plane through the API only:
// no database URL in its command line or environment.
func TestNodeLivesOnItsLeaseAndHoldsNoDatabaseURL(t *testing.T) {
	const grace = 4 * time.Second
	c := nodeHealthCluster(t, 1, grace, time.Hour)
	name := c.nodes.Nodes[0].Name

	t.Run("the agent process holds no database URL", func(t *testing.T) {
		pid := c.nodes.Nodes[0].Pid()
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{c.url, "postgres://", "postgresql://", "DATABASE_URL", "--database-url"} {
				if bytes.Contains(b, []byte(bad)) {
					t.Errorf("the agent's %s holds %q:\n%s", f, bad, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
				}
			}
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.Contains(b, []byte("--api-url\x00"+c.api)) {
			t.Errorf("the agent was not given the API URL: %q", b)
		}
	})

	lease := func() time.Time {
		var l model.Lease
		if code := c.get("/api/v1/nodes/"+name+"/lease", &l); code != 200 || l.Spec.RenewTime == nil {
			t.Fatalf("lease of %s: %d %+v", name, code, l)
		}
		return *l.Spec.RenewTime
	}
	c.eventually(30*time.Second, "heartbeats renew the lease and leave the Node unwritten", func() bool {
		n1, _ := c.node(name)
		l1 := lease()
		time.Sleep(3500 * time.Millisecond) // three heartbeats and more
		n2, _ := c.node(name)
		return lease().After(l1) && n1.Metadata.ResourceVersion == n2.Metadata.ResourceVersion
	})

	thaw := c.freeze(0)
	frozen := time.Now()
	c.eventually(grace+15*time.Second, name+" NotReady and tainted once its lease is stale", func() bool {
		n, _ := c.node(name)
		status, tainted := readiness(n)
		return status == model.ConditionUnknown && tainted
	})
	t.Logf("NotReady %s after the agent went silent", time.Since(frozen).Round(100*time.Millisecond))
	if !c.hasEvent(model.KindNode, name, "NodeNotReady", name) {
		t.Fatalf("no NodeNotReady event: %+v", c.eventsOf(model.KindNode, name))
	}

	thaw()
	c.eventually(30*time.Second, name+" Ready and untainted again", func() bool {
		n, _ := c.node(name)
		status, tainted := readiness(n)
		return status == model.ConditionTrue && !tainted
	})
	if !c.hasEvent(model.KindNode, name, "NodeReady", "resumed") {
		t.Errorf("no NodeReady event: %+v", c.eventsOf(model.KindNode, name))
	}
	n, _ := c.node(name)
	if !strings.HasPrefix(n.Spec.PodCIDR, "127.") {
		t.Errorf("pod CIDR %q; want one of the harness's range in 127.0.0.0/8", n.Spec.PodCIDR)
	}
}
