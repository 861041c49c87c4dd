package sim_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const natEmpty = "List of active MAP/Redirect filters:\n\nList of active sessions:\n"

// Spec §10.2 and §10.5: what the parser accepts, refuses and warns about.
func TestIpnatGrammarAndMessages(t *testing.T) {
	h := newHost(t)
	for _, c := range []struct {
		name, in       string
		code           int
		stderr, listed string
	}{
		{"sticky without round-robin is dropped with a warning", "rdr net0 10.0.0.5 port 80 -> 10.1.0.1 port 8080 sticky\n", 0,
			"'sticky' for use with round-robin/IP splitting only\n", "rdr net0 10.0.0.5/32 port 80 -> 10.1.0.1 port 8080 tcp\n"},
		{"sticky after round-robin stays", "rdr net0 10.0.0.5 port 80 -> 10.1.0.1 port 8080 round-robin sticky\n", 0,
			"", "rdr net0 10.0.0.5/32 port 80 -> 10.1.0.1 port 8080 tcp round-robin sticky\n"},
		{"a target mask other than on 0", "rdr net0 10.0.0.5/32 port 80 -> 10.0.0.9/32 port 80 tcp\n", 1,
			"Invalid mask for dip error at \"32\", line 1\n", ""},
		{"three targets", "rdr net0 10.0.0.5 port 80 -> 10.1.0.1,10.1.0.2,10.1.0.3 port 80\n", 1,
			"syntax error error at \",\", line 1\n", ""},
		{"options out of order", "\nrdr net0 10.0.0.5 port 80 -> 10.1.0.1 port 80 tag a round-robin\n", 1,
			"syntax error error at \"round-robin\", line 2\n", ""},
		{"a port out of range", "rdr net0 10.0.0.5 port 70000 -> 10.1.0.1 port 80\n", 1,
			"invalid port number error at \"70000\", line 1\n", ""},
		{"a host name", "rdr net0 web port 80 -> 10.1.0.1 port 80\n", 1,
			"Unknown hostname error at \"web\", line 1\n", ""},
		{"a bad octet", "rdr net0 10.0.0.300 port 80 -> 10.1.0.1 port 80\n", 1,
			"Invalid octet string for IP address error at \"10.0.0.300\", line 1\n", ""},
		{"a protocol set twice", "map net0 10.2.0.0/16 -> 0/32 portmap tcp auto udp\n", 1,
			"protocol set twice error at \"udp\", line 1\n", ""},
		{"an unknown proxy is refused by the kernel, exit 0", "rdr net0 10.0.0.5 port 21 -> 10.1.0.1 port 21 proxy nosuch\n", 0,
			"1:ioctl(add/insert nat rule): No such file or directory\n", ""},
		{"a long tag is cut to 16 bytes", "rdr net0 10.0.0.6 port 80 -> 10.1.0.1 port 80 tag abcdefghijklmnopqrstuvwxyz\n", 0,
			"", "rdr net0 10.0.0.6/32 port 80 -> 10.1.0.1 port 80 tcp tag abcdefghijklmnop\n"},
		{"variables, comments, continuations and ;", "WEB = \"10.0.0.7\";\n# comment\nrdr net0 $WEB port 80 \\\n -> 10.1.0.1 port 80; rdr net0 $WEB -> 10.1.0.2 udp\n", 0,
			"", "rdr net0 10.0.0.7/32 port 80 -> 10.1.0.1 port 80 tcp\nrdr net0 10.0.0.7/32 -> 10.1.0.2 udp\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.must("ipnat", "-C")
			r := h.runIn(c.in, "ipnat", "-f", "-")
			if r.code != c.code || r.stderr != c.stderr || r.stdout != "" {
				t.Errorf("got %v\nwant exit %d stderr %q", r, c.code, c.stderr)
			}
			expect(t, h.run("ipnat", "-l"), 0, "List of active MAP/Redirect filters:\n"+c.listed+"\nList of active sessions:\n", "")
		})
	}
}

func TestIpnatOptionsAndStacks(t *testing.T) {
	h := newHost(t)
	usage := "Usage: " + filepath.Join(h.bin, "ipnat") + " [-CdFhlnrRsv] [-f filename] [-G|-z zonename]\n"
	expect(t, h.run("ipnat"), 1, "", usage)
	expect(t, h.run("ipnat", "-x"), 1, "", "ipnat: illegal option -- x\n"+usage)
	// An unreadable file is reported, and the run goes on with exit 0.
	expect(t, h.run("ipnat", "-f", "/nonexistent/ipnat.conf", "-l"), 0, natEmpty,
		"fopen(/nonexistent/ipnat.conf) failed: No such file or directory\n")
	expect(t, h.run("ipnat", "-z", "a", "-G", "b", "-l"), 1, "", "Only one of -G and -z may be set\n")
	expect(t, h.run("ipnat", "-G", "global", "-l"), 1, "", "-G cannot be used with the global zone\n")
	expect(t, h.run("ipnat", "-z", "nosuch", "-l"), 1, "", "Could not find running zone: nosuch\n")
	// -l with a change opens the device read-only: EPERM, exit 0.
	expect(t, h.runIn("rdr net0 10.0.0.5 port 80 -> 10.1.0.1 port 80\n", "ipnat", "-CF", "-l", "-f", "-"), 0, natEmpty,
		"ioctl(SIOCFLNAT): Not owner\nioctl(SIOCCNATL): Not owner\n1:ioctl(add/insert nat rule): Not owner\n")
	// -n parses only; -v prints each rule normalised.
	expect(t, h.runIn("rdr net0 10.0.0.5 port http -> 10.1.0.1 port 8080\n", "ipnat", "-nv", "-f", "-"), 0,
		"rdr net0 10.0.0.5/32 port 80 -> 10.1.0.1 port 8080 tcp\n", "")
	expect(t, h.run("ipnat", "-l"), 0, natEmpty, "")
}

// Spec §10.6: rules are applied one by one; a refused rule does not stop
// the run, a parse error does, and what came before stays.
func TestIpnatNonAtomicApplyAndRemove(t *testing.T) {
	h := newHost(t)
	h.mustIn("rdr net0 10.0.0.2 port 80 -> 10.1.0.1 port 80\n", "ipnat", "-f", "-")
	in := "rdr net0 10.0.0.1 port 80 -> 10.1.0.1 port 80\n" +
		"rdr net0 10.0.0.2 port 80 -> 10.1.0.1 port 80\n" + // already loaded
		"rdr net0 10.0.0.3 port 80 -> 10.1.0.1 port 80\n" +
		"rdr net0 10.0.0.4 port 80 -> 10.1.0.1 port eighty\n" +
		"rdr net0 10.0.0.5 port 80 -> 10.1.0.1 port 80\n"
	expect(t, h.runIn(in, "ipnat", "-f", "-"), 1, "",
		"2:ioctl(add/insert nat rule): File exists\ninvalid port number error at \"eighty\", line 4\n")
	rule := func(n int) string { return fmt.Sprintf("rdr net0 10.0.0.%d/32 port 80 -> 10.1.0.1 port 80 tcp\n", n) }
	expect(t, h.run("ipnat", "-l"), 0, "List of active MAP/Redirect filters:\n"+rule(2)+rule(1)+rule(3)+"\nList of active sessions:\n", "")
	// -r removes; a rule that is not loaded is reported, exit 0.
	expect(t, h.runIn(rule(1)+rule(9), "ipnat", "-r", "-f", "-"), 0, "", "2:ioctl(delete nat rule): No such process\n")
	expect(t, h.run("ipnat", "-l", "-h"), 0, "List of active MAP/Redirect filters:\n0 "+rule(2)+"0 "+rule(3)+"\nList of active sessions:\n", "")
	expect(t, h.run("ipnat", "-s"), 0, "mapped\tin\t0\tout\t0\nadded\t0\texpired\t0\nno memory\t0\tbad nat\t0\ninuse\t0\norphans\t0\nrules\t2\nwilds\t0\n", "")
}

func (h *simHost) mustIn(stdin, cmd string, args ...string) string {
	h.t.Helper()
	r := h.runIn(stdin, cmd, args...)
	if r.code != 0 || r.stderr != "" {
		h.t.Fatalf("%s %s: %v", cmd, strings.Join(args, " "), r)
	}
	return r.stdout
}

// clusterIP is an address of 127.96.0.0/16 of this test process's own,
// so concurrent runs do not share forwarders.
func clusterIP(n int) string {
	return fmt.Sprintf("127.96.%d.%d", os.Getpid()%250+1, n)
}

// backend is an HTTP server on a loopback address that answers its name.
func backend(t *testing.T, addr, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp4", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

// get fetches url on a new connection; "" when it fails.
func get(url string) string {
	resp, err := noKeepAlive.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func rdrRule(vip string, port int, backendAddr string) string {
	host, bport, _ := net.SplitHostPort(backendAddr)
	return fmt.Sprintf("rdr net0 %s/32 port %d -> %s port %s tcp round-robin tag test\n", vip, port, host, bport)
}

// The spec's load balancing (§10.3), realised: one round-robin rule per
// backend alternates new connections; removing a rule stops new
// connections to its backend; -CF stops forwarding.
func TestIpnatForwardsRoundRobin(t *testing.T) {
	h := newHost(t)
	a := backend(t, "127.0.0.2", "A")
	b := backend(t, "127.0.0.3", "B")
	vip := clusterIP(1)
	url := "http://" + vip + ":80/"
	h.mustIn(rdrRule(vip, 80, a)+rdrRule(vip, 80, b), "ipnat", "-f", "-")
	var got []string
	for i := 0; i < 6; i++ {
		got = append(got, get(url))
	}
	if strings.Join(got, "") != "ABABAB" {
		t.Errorf("round-robin gave %q, want ABABAB", got)
	}
	if out := h.must("ipnat", "-l", "-h"); !strings.Contains(out, "3 rdr net0 "+vip+"/32 port 80 -> 127.0.0.2") ||
		!strings.Contains(out, "3 rdr net0 "+vip+"/32 port 80 -> 127.0.0.3") {
		t.Errorf("hit counts:\n%s", out)
	}
	// Removing B's rule: every new connection goes to A at once.
	h.mustIn(rdrRule(vip, 80, b), "ipnat", "-r", "-f", "-")
	for i := 0; i < 4; i++ {
		if g := get(url); g != "A" {
			t.Fatalf("after removing B: got %q", g)
		}
	}
	// The requests' sessions may not all have ended yet (a loaded
	// machine closes them late): any number of them is flushed.
	if r := h.run("ipnat", "-CF"); r.code != 0 || !regexp.MustCompile(`^\d+ entries flushed from NAT table\n4 entries flushed from NAT list\n$`).MatchString(r.stdout) {
		t.Errorf("ipnat -CF: %v", r)
	}
	if _, err := net.DialTimeout("tcp4", vip+":80", time.Second); err == nil {
		t.Errorf("a connection was accepted after -CF")
	}
}

// Two targets in one rule alternate (IPN_SPLIT), without round-robin.
func TestIpnatForwardsSplitRule(t *testing.T) {
	h := newHost(t)
	a := backend(t, "127.0.0.2", "A")
	ahost, aport, _ := net.SplitHostPort(a)
	// The same port on two addresses: a second server on 127.0.0.3.
	ln, err := net.Listen("tcp4", "127.0.0.3:"+aport)
	if err != nil {
		t.Skipf("port %s busy on 127.0.0.3: %v", aport, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "B") })}
	go srv.Serve(ln)
	defer srv.Close()
	vip := clusterIP(2)
	h.mustIn(fmt.Sprintf("rdr net0 %s port 8080 -> %s,127.0.0.3 port %s\n", vip, ahost, aport), "ipnat", "-f", "-")
	var got []string
	for i := 0; i < 4; i++ {
		got = append(got, get("http://"+vip+":8080/"))
	}
	if strings.Join(got, "") != "ABAB" {
		t.Errorf("split rule gave %q, want ABAB", got)
	}
	// With sticky, a client stays on the target it got first.
	sticky := clusterIP(10)
	h.mustIn(fmt.Sprintf("rdr net0 %s port 8080 -> %s,127.0.0.3 port %s sticky\n", sticky, ahost, aport), "ipnat", "-f", "-")
	got = nil
	for i := 0; i < 4; i++ {
		got = append(got, get("http://"+sticky+":8080/"))
	}
	if strings.Join(got, "") != "AAAA" {
		t.Errorf("sticky split rule gave %q, want AAAA", got)
	}
}

// Sessions outlive the rules that made them (§10.6); -F cuts them.
func TestIpnatSessionsOutliveRules(t *testing.T) {
	h := newHost(t)
	echo, err := net.Listen("tcp4", "127.0.0.4:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	vip := clusterIP(3)
	rule := rdrRule(vip, 7000, echo.Addr().String())
	h.mustIn(rule, "ipnat", "-f", "-")
	c, err := net.DialTimeout("tcp4", vip+":7000", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	roundTrip := func(msg string) error {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, msg+"\n"); err != nil {
			return err
		}
		line, err := rd.ReadString('\n')
		if err == nil && line != msg+"\n" {
			err = fmt.Errorf("echo %q", line)
		}
		return err
	}
	if err := roundTrip("one"); err != nil {
		t.Fatal(err)
	}
	_, eport, _ := net.SplitHostPort(echo.Addr().String())
	chost, cport, _ := net.SplitHostPort(c.LocalAddr().String())
	session := fmt.Sprintf("RDR %-15s %-5s <- -> %-15s %-5d [%s %s]\n", "127.0.0.4", eport, vip, 7000, chost, cport)
	expect(t, h.run("ipnat", "-l"), 0, "List of active MAP/Redirect filters:\n"+rule+"\nList of active sessions:\n"+session, "")
	// The rule goes; the session and its connection stay.
	h.mustIn(rule, "ipnat", "-r", "-f", "-")
	expect(t, h.run("ipnat", "-l"), 0, "List of active MAP/Redirect filters:\n\nList of active sessions:\n"+session, "")
	expect(t, h.run("ipnat", "-s"), 0, "mapped\tin\t1\tout\t0\nadded\t1\texpired\t0\nno memory\t0\tbad nat\t0\ninuse\t1\norphans\t0\nrules\t1\nwilds\t0\n", "")
	if err := roundTrip("two"); err != nil {
		t.Fatalf("the session died with its rule: %v", err)
	}
	if _, err := net.DialTimeout("tcp4", vip+":7000", time.Second); err == nil {
		t.Errorf("a new connection was accepted without a rule")
	}
	// -F drops the session, and its traffic stops.
	expect(t, h.run("ipnat", "-F"), 0, "1 entries flushed from NAT table\n", "")
	if err := roundTrip("three"); err == nil {
		t.Errorf("the connection survived -F")
	}
	expect(t, h.run("ipnat", "-l"), 0, natEmpty, "")
}

// A backend that refuses: the client is reset promptly.
func TestIpnatForwardRefusedBackend(t *testing.T) {
	h := newHost(t)
	ln, _ := net.Listen("tcp4", "127.0.0.5:0")
	dead := ln.Addr().String()
	ln.Close()
	vip := clusterIP(4)
	h.mustIn(rdrRule(vip, 80, dead), "ipnat", "-f", "-")
	start := time.Now()
	c, err := net.DialTimeout("tcp4", vip+":80", time.Second)
	if err == nil {
		// The reset may come after the handshake or race it.
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err = c.Read(make([]byte, 1))
	}
	if err == nil || !strings.Contains(err.Error(), "reset") || time.Since(start) > time.Second {
		t.Errorf("read after a refused backend: %v after %v", err, time.Since(start))
	}
}

// UDP rdr: each client flow goes to a backend and its replies come back
// from the ClusterIP.
func TestIpnatForwardsUDP(t *testing.T) {
	h := newHost(t)
	pc, err := net.ListenPacket("udp4", "127.0.0.6:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("re:"), buf[:n]...), from)
		}
	}()
	vip := clusterIP(5)
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	h.mustIn(fmt.Sprintf("rdr net0 %s port 53 -> 127.0.0.6 port %s udp\n", vip, port), "ipnat", "-f", "-")
	c, err := net.Dial("udp4", vip+":53")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	c.Write([]byte("q"))
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "re:q" {
		t.Fatalf("udp answer %q, %v", buf[:n], err)
	}
	if out := h.must("ipnat", "-l"); !strings.Contains(out, "RDR 127.0.0.6 ") {
		t.Errorf("no UDP session:\n%s", out)
	}
}

// Two nodes on one machine serve the same ClusterIP:port (SO_REUSEPORT),
// each by its own rules.
func TestIpnatTwoNodesShareClusterIP(t *testing.T) {
	base := t.TempDir()
	n1, n2 := newNamedHost(t, base, "node1"), newNamedHost(t, base, "node2")
	a := backend(t, "127.0.0.2", "A")
	b := backend(t, "127.0.0.3", "B")
	vip := clusterIP(6)
	rules := rdrRule(vip, 80, a) + rdrRule(vip, 80, b)
	n1.mustIn(rules, "ipnat", "-f", "-")
	n2.mustIn(rules, "ipnat", "-f", "-")
	seen := map[string]int{}
	for i := 0; i < 40; i++ {
		seen[get("http://"+vip+":80/")]++
	}
	if seen["A"]+seen["B"] != 40 {
		t.Fatalf("answers %v", seen)
	}
	hits := func(h *simHost) int {
		total := 0
		for _, line := range strings.Split(h.must("ipnat", "-l", "-h"), "\n") {
			var n int
			if _, err := fmt.Sscanf(line, "%d rdr", &n); err == nil {
				total += n
			}
		}
		return total
	}
	h1, h2 := hits(n1), hits(n2)
	if h1+h2 != 40 || h1 == 0 || h2 == 0 {
		t.Errorf("hits node1 %d node2 %d, want both > 0 and 40 in all", h1, h2)
	}
	// One node's -CF leaves the other serving.
	n1.must("ipnat", "-CF")
	for i := 0; i < 10; i++ {
		if g := get("http://" + vip + ":80/"); g != "A" && g != "B" {
			t.Fatalf("node2 alone: got %q", g)
		}
	}
}

// Spec §10.7: a refresh of ipfilter runs ipnat -CF and reloads
// /etc/ipf/ipnat.conf: runtime rules and sessions are gone.
func TestIpnatIpfilterRefresh(t *testing.T) {
	h := newHost(t)
	a := backend(t, "127.0.0.2", "A")
	vip := clusterIP(7)
	h.mustIn(rdrRule(vip, 80, a)+"map net0 10.2.0.0/16 -> 0/32 portmap tcp/udp auto\n", "ipnat", "-f", "-")
	c, err := net.DialTimeout("tcp4", vip+":80", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conf := filepath.Join(h.root, "fs", "etc", "ipf", "ipnat.conf")
	os.MkdirAll(filepath.Dir(conf), 0o755)
	os.WriteFile(conf, []byte("map net0 10.3.0.0/16 -> 0/32\n"), 0o644)
	// Wait for the session of c to be recorded.
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(h.must("ipnat", "-l"), "RDR ") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	expect(t, h.run("svcadm", "refresh", "network/ipfilter"), 0, "", "")
	expect(t, h.run("ipnat", "-l"), 0, "List of active MAP/Redirect filters:\nmap net0 10.3.0.0/16 -> 0.0.0.0/32\n\nList of active sessions:\n", "")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("the session's connection survived the refresh: %v", err)
	}
}

// After stop-all (the daemon is gone with its connections) the next ipnat
// brings the forwarders back and the dead daemon's sessions are gone.
func TestIpnatForwardersComeBackAfterStopAll(t *testing.T) {
	h := newHost(t)
	a := backend(t, "127.0.0.2", "A")
	vip := clusterIP(8)
	h.mustIn(rdrRule(vip, 80, a), "ipnat", "-f", "-")
	c, err := net.DialTimeout("tcp4", vip+":80", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(h.must("ipnat", "-l"), "RDR ") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	h.node().Run(t, "stop-all")
	if g := get("http://" + vip + ":80/"); g != "" {
		t.Fatalf("forwarded after stop-all: %q", g)
	}
	h.must("ipnat", "-l")
	if g := get("http://" + vip + ":80/"); g != "A" {
		t.Errorf("after ipnat -l: got %q, want A", g)
	}
	// The dead daemon's session is gone; the new one's ends with its
	// connection.
	want := "List of active MAP/Redirect filters:\n" + rdrRule(vip, 80, a) + "\nList of active sessions:\n"
	out := ""
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out = h.must("ipnat", "-l"); out == want {
			break
		}
	}
	if out != want {
		t.Errorf("ipnat -l:\n%s\nwant\n%s", out, want)
	}
}

// Concurrent ipnat runs on one stack lose no rule.
func TestIpnatConcurrentAdds(t *testing.T) {
	h := newHost(t)
	var wg sync.WaitGroup
	for i := 1; i <= 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := h.runIn(fmt.Sprintf("map net0 10.%d.0.0/16 -> 0/32\n", i), "ipnat", "-f", "-")
			if r.code != 0 || r.stderr != "" {
				t.Errorf("ipnat %d: %v", i, r)
			}
		}(i)
	}
	wg.Wait()
	if n := strings.Count(h.must("ipnat", "-l"), "\nmap net0 "); n != 8 {
		t.Errorf("%d rules listed, want 8", n)
	}
}

// Each exclusive-IP zone has its own IPF stack: -z ZONE from the global
// zone and ipnat inside the zone share it; -G ZONE is another; the
// zone's stack goes when the zone halts.
func TestIpnatZoneStacks(t *testing.T) {
	h := newHost(t)
	h.must("dladm", "create-vnic", "-l", "net0", "web0")
	h.zoneSetup("web01", "running", "add net; set physical=web0; end")
	rule := "rdr web0 10.0.0.5/32 port 80 -> 10.1.0.1 port 8080 tcp\n"
	h.mustIn(rule, "ipnat", "-z", "web01", "-f", "-")
	listing := "List of active MAP/Redirect filters:\n" + rule + "\nList of active sessions:\n"
	expect(t, h.run("ipnat", "-z", "web01", "-l"), 0, listing, "")
	expect(t, h.runEnv("", []string{"ILLUMOS_SIM_ZONE=web01"}, "ipnat", "-l"), 0, listing, "")
	expect(t, h.runEnv("", []string{"ILLUMOS_SIM_ZONE=web01"}, "ipnat", "-z", "web01", "-l"), 1, "", "Permission denied setting zone: web01\n")
	expect(t, h.run("ipnat", "-G", "web01", "-l"), 0, natEmpty, "")
	expect(t, h.run("ipnat", "-l"), 0, natEmpty, "")
	h.must("zoneadm", "-z", "web01", "halt")
	expect(t, h.run("ipnat", "-z", "web01", "-l"), 1, "", "Could not find running zone: web01\n")
	h.must("zoneadm", "-z", "web01", "boot")
	expect(t, h.run("ipnat", "-z", "web01", "-l"), 0, natEmpty, "")
}

// The from/to form forwards on its `to ADDR/32 port = N`.
func TestIpnatForwardsFromToRule(t *testing.T) {
	h := newHost(t)
	a := backend(t, "127.0.0.2", "A")
	host, port, _ := net.SplitHostPort(a)
	vip := clusterIP(9)
	rule := fmt.Sprintf("rdr net0 from any to %s/32 port = 80 -> %s port %s tcp\n", vip, host, port)
	h.mustIn(rule, "ipnat", "-f", "-")
	expect(t, h.run("ipnat", "-l"), 0, "List of active MAP/Redirect filters:\n"+rule+"\nList of active sessions:\n", "")
	if g := get("http://" + vip + ":80/"); g != "A" {
		t.Errorf("got %q, want A", g)
	}
}
