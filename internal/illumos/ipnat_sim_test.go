package illumos_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
)

// Apply reads the set back: a rule the kernel refused (exit 0 from ipnat)
// is reported missing; a rule already loaded is not.
func TestIpnatApplyDetectsRefusedRules(t *testing.T) {
	ctx := ctxT(t)
	nat := newNode(t, "node1").host.Ipnat()
	web := &illumos.RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.96.0.20/32"), ExtPort: 80,
		IntAddrs: []netip.Addr{netip.MustParseAddr("10.88.0.5"), netip.MustParseAddr("10.88.0.6")}, IntPort: 8080,
		Proto: "tcp", RoundRobin: true, Sticky: true, Tag: "svc-web"}
	web2 := &illumos.RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.96.0.20/32"), ExtPort: 80,
		IntAddrs: []netip.Addr{netip.MustParseAddr("10.88.0.7")}, IntPort: 8080, Proto: "tcp", RoundRobin: true, Tag: "svc-web"}
	must(t, "load", nat.Load(ctx, []illumos.NATRule{web}))

	bad := illumos.RawRule("rdr net0 10.96.0.21/32 port 21 -> 10.88.0.8 port 21 tcp proxy nosuch")
	missing, err := nat.Apply(ctx, []illumos.NATRule{web, web2, bad})
	must(t, "apply", err)
	if !reflect.DeepEqual(missing, []illumos.NATRule{bad}) {
		t.Errorf("missing = %#v, want the rule with an unknown proxy", missing)
	}
	rules, err := nat.List(ctx)
	must(t, "list", err)
	if !reflect.DeepEqual(rules, []illumos.NATRule{web, web2}) {
		t.Errorf("rules = %#v", rules)
	}

	// Load reports the refusal ipnat's exit status hides.
	err = nat.Load(ctx, []illumos.NATRule{web2})
	wantKind(t, "load a duplicate", err, illumos.ErrAlreadyExists)
	var refused illumos.RefusedRules
	if !errors.As(err, &refused) || len(refused) != 1 || refused[0].Message != "File exists" {
		t.Errorf("refused = %#v", refused)
	}
	wantKind(t, "load an unknown proxy", nat.Load(ctx, []illumos.NATRule{bad}), illumos.ErrInvalid)
	// Removal of a rule that is not loaded: ErrNotFound; the rest goes.
	wantKind(t, "remove", nat.Remove(ctx, []illumos.NATRule{bad, web}), illumos.ErrNotFound)
	rules, err = nat.List(ctx)
	must(t, "list after remove", err)
	if !reflect.DeepEqual(rules, []illumos.NATRule{web2}) {
		t.Errorf("after remove = %#v", rules)
	}
	// A parse error is invalid, with exit 1.
	wantKind(t, "a syntax error", nat.Load(ctx, []illumos.NATRule{illumos.RawRule("rdr net0 10.0.0.1 port 80 -> 10.0.0.2 port eighty")}), illumos.ErrInvalid)
	// Three targets cannot be one rule.
	three := *web2
	three.IntAddrs = []netip.Addr{netip.MustParseAddr("10.88.0.1"), netip.MustParseAddr("10.88.0.2"), netip.MustParseAddr("10.88.0.3")}
	wantKind(t, "three targets", nat.Load(ctx, []illumos.NATRule{&three}), illumos.ErrInvalid)
}

// Listing parses sessions; FlushSessions counts them; rules stay.
func TestIpnatListingSessions(t *testing.T) {
	ctx := ctxT(t)
	nat := newNode(t, "node1").host.Ipnat()
	ln, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ln)
	defer srv.Close()
	backend := netip.MustParseAddrPort(ln.Addr().String())
	vip := netip.MustParseAddr(fmt.Sprintf("127.97.%d.1", os.Getpid()%250+1))
	rule := &illumos.RdrRule{Interface: "net0", ExtAddr: netip.PrefixFrom(vip, 32), ExtPort: 80,
		IntAddrs: []netip.Addr{backend.Addr()}, IntPort: int(backend.Port()), Proto: "tcp", RoundRobin: true, Tag: "t1"}
	missing, err := nat.Apply(ctx, []illumos.NATRule{rule})
	if err != nil || len(missing) != 0 {
		t.Fatalf("apply: %v, missing %v", err, missing)
	}
	c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(vip, 80).String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := netip.MustParseAddrPort(c.LocalAddr().String())
	want := illumos.NATSession{Type: "RDR", In: backend, Out: netip.AddrPortFrom(vip, 80), Remote: client}
	var l illumos.NATListing
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if l, err = nat.Listing(ctx); err != nil || len(l.Sessions) > 0 {
			break
		}
	}
	must(t, "listing", err)
	if !reflect.DeepEqual(l.Sessions, []illumos.NATSession{want}) || len(l.Rules) != 1 {
		t.Errorf("listing = %+v, want session %+v", l, want)
	}
	n, err := nat.FlushSessions(ctx)
	if err != nil || n != 1 {
		t.Errorf("FlushSessions = %d, %v", n, err)
	}
	must(t, "flush rules", nat.FlushRules(ctx))
	if l, err := nat.Listing(ctx); err != nil || len(l.Rules)+len(l.Sessions) != 0 {
		t.Errorf("after flushes: %+v, %v", l, err)
	}
}
