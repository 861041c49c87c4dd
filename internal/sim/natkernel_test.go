package sim_test

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/simtest"
)

// echoServer answers each line of each connection with its zone's
// hostname and the address the connection came from.
const echoServer = `exec python3 -c "import socket, threading
def serve(c, peer):
    f = c.makefile('rwb', buffering=0)
    for line in f:
        f.write(socket.gethostname().encode() + b' ' + peer[0].encode() + b' ' + line)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 8080)); s.listen(16)
while True:
    c, peer = s.accept(); threading.Thread(target=serve, args=(c, peer), daemon=True).start()"`

// client is a connection from a zone that sends each line it is given and
// prints the answer, or ERR when none comes.
type client struct {
	in  *bufio.Writer
	out *bufio.Scanner
	cmd *exec.Cmd
}

func (h *simHost) dial(t *testing.T, zone, addr string) *client {
	t.Helper()
	script := fmt.Sprintf(`"import socket, sys
try:
    c = socket.create_connection(('%s', 80), timeout=2)
except OSError as e:
    print('ERR', e, flush=True); sys.exit(0)
print('OK', flush=True)
f = c.makefile('rwb', buffering=0)
for line in sys.stdin:
    try:
        f.write(line.encode()); print(f.readline().decode().strip() or 'ERR closed', flush=True)
    except OSError as e:
        print('ERR', e, flush=True)"`, addr)
	cmd := exec.Command(filepath.Join(h.bin, "zlogin"), zone, "python3", "-u", "-c", script)
	cmd.Env = cleanEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	return &client{in: bufio.NewWriter(stdin), out: bufio.NewScanner(stdout), cmd: cmd}
}

// line reads the client's next line.
func (c *client) line() string {
	if !c.out.Scan() {
		return "ERR ended"
	}
	return c.out.Text()
}

func (c *client) send(s string) string {
	c.in.WriteString(s + "\n")
	c.in.Flush()
	return c.line()
}

// once connects, sends one line and returns the answer (or the error).
func (h *simHost) once(t *testing.T, zone, addr string) string {
	t.Helper()
	c := h.dial(t, zone, addr)
	if l := c.line(); l != "OK" {
		return l
	}
	return c.send("hi")
}

// In isolation mode the global zone's NAT rules are realised by the
// node's kernel, as IPFilter realises them on illumos:
//   - a ClusterIP's backend on another node sees the client pod's own
//     address (a userspace forwarder shows the node's);
//   - round-robin rules take turns;
//   - a removed rdr rule stops new connections while an established one
//     goes on, until `ipnat -F` flushes it (spec §10.6), and `ipnat -l`
//     lists it meanwhile;
//   - a pod reaching a ClusterIP whose backend is itself gets no answer
//     without the hairpin map rule, and one with it (spec §10.9);
//   - stop-all leaves no table, and the next ipnat puts it back.
//
// Make syncKernelNAT (internal/sim/natkernel.go) return at once to see it
// fail at the first connection; the flush step fails if kernelSessions'
// flush deletes nothing.
func TestIsolatedNodeRealisesNATInTheKernel(t *testing.T) {
	const network = 204
	fab := isolatedFabric(t, network)
	h1, ns1 := isolatedNode(t, fab, network, 1, echoServer)
	h2, _ := isolatedNode(t, fab, network, 2, "exec sleep 1000")
	// A second server on node 1, for round-robin.
	h1.must("dladm", "create-vnic", "-l", "zwstub0", "pod1")
	h1.zoneSetup("web", "running", fmt.Sprintf("add net; set physical=pod1; set allowed-address=10.%d.1.3/24; set defrouter=10.%d.1.1; end", network, network))
	expect(t, h1.runIn(manifest("server", echoServer, "", true), "zlogin", "web", "svccfg", "import", "/dev/stdin"), 0, "", "")
	h1.must("route", "-p", "add", "-net", fmt.Sprintf("10.%d.2.0/24", network), fmt.Sprintf("10.%d.255.2", network))
	h2.must("route", "-p", "add", "-net", fmt.Sprintf("10.%d.1.0/24", network), fmt.Sprintf("10.%d.255.1", network))

	server1, server2, client := fmt.Sprintf("10.%d.1.2", network), fmt.Sprintf("10.%d.1.3", network), fmt.Sprintf("10.%d.2.2", network)
	rule := fmt.Sprintf("rdr zwgw0 10.96.0.5/32 port 80 -> %s port 8080 tcp\n", server1)
	expect(t, h2.runIn(rule, "ipnat", "-f", "-"), 0, "", "")
	var got string
	waitFor(t, 10*time.Second, "node 2's pod reaching node 1's server through the rdr", func() bool {
		got = h2.once(t, "pod", "10.96.0.5")
		return !strings.HasPrefix(got, "ERR")
	})
	if want := "pod " + client + " hi"; got != want {
		t.Fatalf("the backend answered %q, want %q (it must see the client pod's own address)", got, want)
	}

	// A zone cannot take another zone's address: it is not on its stack.
	if r := h1.run("zlogin", "pod", "python3", "-c", fmt.Sprintf(`"import socket; socket.socket().bind(('%s', 9999))"`, server2)); r.code == 0 ||
		!strings.Contains(r.stderr, "Cannot assign requested address") {
		t.Errorf("zone pod bound zone web's address %s: %s", server2, r)
	}

	// Round-robin rules take turns.
	rr := fmt.Sprintf("rdr zwgw0 10.96.0.6/32 port 80 -> %s port 8080 tcp round-robin\nrdr zwgw0 10.96.0.6/32 port 80 -> %s port 8080 tcp round-robin\n", server1, server2)
	expect(t, h2.runIn(rr, "ipnat", "-f", "-"), 0, "", "")
	var hosts []string
	for range 4 {
		hosts = append(hosts, strings.Fields(h2.once(t, "pod", "10.96.0.6"))[0])
	}
	if strings.Join(hosts, " ") != "pod web pod web" {
		t.Errorf("round-robin rules chose %v, want pod web pod web", hosts)
	}

	// Sessions outlive their rule until flushed.
	open := h2.dial(t, "pod", "10.96.0.5")
	if l := open.line(); l != "OK" {
		t.Fatal(l)
	}
	if l := open.send("one"); l != "pod "+client+" one" {
		t.Fatalf("established connection: %q", l)
	}
	expect(t, h2.runIn(rule, "ipnat", "-r", "-f", "-"), 0, "", "")
	if l := h2.once(t, "pod", "10.96.0.5"); !strings.HasPrefix(l, "ERR") {
		t.Fatalf("a new connection went through the removed rule: %q", l)
	}
	if l := open.send("two"); l != "pod "+client+" two" {
		t.Fatalf("the established connection ended with its rule: %q", l)
	}
	if l := h2.must("ipnat", "-l"); !strings.Contains(l, fmt.Sprintf("RDR %-15s 8080  <- -> 10.96.0.5       80    [%s", server1, client)) {
		t.Errorf("ipnat -l does not list the session:\n%s", l)
	}
	if out := h2.must("ipnat", "-F"); out == "0 entries flushed from NAT table\n" {
		t.Errorf("ipnat -F: %q", out)
	}
	if l := open.send("three"); !strings.HasPrefix(l, "ERR") {
		t.Fatalf("the flushed session still carries traffic: %q", l)
	}

	// Hairpin: node 1's pod reaching its own service.
	self := fmt.Sprintf("rdr zwgw0 10.96.0.7/32 port 80 -> %s port 8080 tcp\n", server1)
	expect(t, h1.runIn(self, "ipnat", "-f", "-"), 0, "", "")
	if l := h1.once(t, "pod", "10.96.0.7"); !strings.HasPrefix(l, "ERR") {
		t.Fatalf("a pod reached itself through its service without the hairpin map: %q", l)
	}
	hairpin := fmt.Sprintf("map zwgw0 10.%d.1.0/24 -> 10.%d.1.1/32 portmap tcp/udp auto\n", network, network)
	expect(t, h1.runIn(hairpin, "ipnat", "-f", "-"), 0, "", "")
	if l, want := h1.once(t, "pod", "10.96.0.7"), fmt.Sprintf("pod 10.%d.1.1 hi", network); l != want {
		t.Fatalf("through the hairpin map: %q, want %q", l, want)
	}

	// stop-all leaves no table; the next ipnat puts it back.
	table := func() string { out, _ := inNS(ns1, "nft", "list", "tables"); return out }
	if !strings.Contains(table(), "ipnat") {
		t.Fatalf("no ipnat table in node 1's namespace: %q", table())
	}
	if out, err := exec.Command(simtest.Bin(t), "stop-all", "--root", h1.root).CombinedOutput(); err != nil {
		t.Fatalf("stop-all: %v\n%s", err, out)
	}
	if got := table(); strings.Contains(got, "ipnat") {
		t.Errorf("stop-all left the table: %q", got)
	}
	h1.must("ipnat", "-l")
	if got := table(); !strings.Contains(got, "ipnat") {
		t.Errorf("ipnat did not put the table back: %q", got)
	}
}
