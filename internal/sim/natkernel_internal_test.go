package sim

import (
	"os/exec"
	"strings"
	"testing"
)

// The rules become the nftables rules the kernel applies as IPFilter
// would: a chain of round-robin rules one DNAT cycling through each
// rule's next target, a rule that never moves held once first, ranges
// offset-wise, the from/to form, map's SNAT and masquerade; what cannot be
// realised is said. Where nft is installed, the script is valid nft.
func TestNATRulesBecomeNftables(t *testing.T) {
	rules := []string{
		"rdr zwgw0 10.96.0.1/32 port 80 -> 10.88.1.2,10.88.1.3 port 8080 tcp round-robin",
		"rdr zwgw0 10.96.0.1/32 port 80 -> 10.88.1.4 port 8080 tcp round-robin",
		"rdr zwgw0 10.96.0.2/32 port 53 -> 10.88.1.5 port 5353 tcp/udp round-robin",
		"rdr zwgw0 10.96.0.2/32 port 53 -> 10.88.1.6 port 5353 tcp/udp",
		"rdr zwgw0 10.96.0.2/32 port 53 -> 10.88.1.7 port 5353 tcp/udp round-robin",
		"rdr zwgw0 10.96.0.3/32 port 80-81 -> 10.88.1.8 port 8080 tcp",
		"rdr zwgw0 from 10.0.0.0/8 to 10.96.0.4/32 port = 443 -> 10.88.1.9 port 443 tcp",
		"map zwgw0 10.88.1.0/24 -> 10.88.1.1/32 portmap tcp/udp 10000:20000",
		"map net0 10.88.1.0/24 -> 0/32",
		"bimap net0 10.88.1.10/32 -> 192.0.2.10/32",
	}
	var tbl NATTable
	for _, text := range rules {
		r, ok := parseNATRule(text)
		if !ok {
			t.Fatalf("%q does not parse", text)
		}
		if msg := tbl.addRule(r); msg != "" {
			t.Fatalf("%q: %s", text, msg)
		}
	}
	script, unrealised := nftRuleset(&tbl)
	for _, want := range []string{
		`iifname "zwgw0" ip daddr 10.96.0.1/32 tcp dport 80 dnat ip to numgen inc mod 4 map { 0 : 10.88.1.2 . 8080, 1 : 10.88.1.4 . 8080, 2 : 10.88.1.3 . 8080, 3 : 10.88.1.4 . 8080 }`,
		`iifname "zwgw0" ip daddr 10.96.0.2/32 meta l4proto { tcp, udp } th dport 53 dnat to 10.88.1.6:5353`,
		`iifname "zwgw0" ip daddr 10.96.0.3/32 tcp dport 80 dnat to 10.88.1.8:8080`,
		`iifname "zwgw0" ip daddr 10.96.0.3/32 tcp dport 81 dnat to 10.88.1.8:8081`,
		`iifname "zwgw0" ip saddr 10.0.0.0/8 ip daddr 10.96.0.4/32 tcp dport 443 dnat to 10.88.1.9:443`,
		`oifname "zwgw0" ip saddr 10.88.1.0/24 meta l4proto { tcp, udp } snat to 10.88.1.1:10000-20000`,
		`oifname "net0" ip saddr 10.88.1.0/24 masquerade`,
	} {
		if !strings.Contains(script, "\t\t"+want+"\n") {
			t.Errorf("the script lacks\n\t%s\n%s", want, script)
		}
	}
	if len(unrealised) != 1 || !strings.HasPrefix(unrealised[0], "bimap ") {
		t.Errorf("unrealised: %q, want the bimap", unrealised)
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Logf("nft is not installed: the script's syntax is not checked (%v)", err)
		return
	}
	cmd := exec.Command("nft", "-c", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("nft -c refuses the script: %v\n%s\n%s", err, out, script)
	}
}
