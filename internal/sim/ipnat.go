package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ipnat (spec §10): -F flushes the sessions, then -C the rules, then the
// rules of -f FILE ("-" is stdin) are added (or removed with -r) one by
// one, then -s and -l print. A refused rule is reported on stderr and
// does not change the exit status (§10.5).
//
// Each IP stack has its NAT table in its own file, nat/STACK.json, guarded
// by nat/STACK.lock, so NAT costs nothing to the other commands and one
// stack's rules cost nothing to another's. The global zone's rules are
// also realised: in isolation mode by the node's kernel (natkernel.go),
// whose connection tracking holds the sessions; on the shared loopback
// its rdr rules by the node's NAT daemon (natd.go), which adds the
// sessions to the table.

// NATTable is one IP stack's IPFilter NAT state.
type NATTable struct {
	// Gen changes with every change of the rule set; FlushGen with every
	// -F. The NAT daemon converges on them.
	Gen      uint64          `json:"gen"`
	FlushGen uint64          `json:"flush_gen"`
	NextID   int             `json:"next_id"`
	Rules    []*NATRuleEntry `json:"rules"`
	Sessions []*NATSession   `json:"sessions"`
	Added    uint64          `json:"added"`
	Expired  uint64          `json:"expired"`
}

// NATRuleEntry is one loaded rule.
type NATRuleEntry struct {
	ID   int    `json:"id"`
	Text string `json:"text"` // the normalised rule, its identity
	Hits uint64 `json:"hits"`
	// Deleted: removed while sessions used it; not listed, kept until
	// they end (nat_siocdelnat, spec §10.6).
	Deleted bool `json:"deleted,omitempty"`
}

// NATSession is one active translation.
type NATSession struct {
	ID         int    `json:"id"`
	Rule       int    `json:"rule"`
	Type       string `json:"type"` // RDR, MAP, BIMAP, MAP-BLOCK
	Proto      string `json:"proto"`
	In         string `json:"in"` // the backend
	InPort     int    `json:"in_port"`
	Out        string `json:"out"` // the original destination
	OutPort    int    `json:"out_port"`
	Remote     string `json:"remote"` // the client
	RemotePort int    `json:"remote_port"`
	// Owner is the NAT daemon forwarding the session.
	Owner int `json:"owner,omitempty"`
}

func (h *host) natDir() string { return filepath.Join(h.root, "nat") }

// natStackFile names a stack's file: the zone's name; `ZONE@G` for the
// global-zone-controlled stack of ZONE (-G), `@` being no zone name's.
func (h *host) natPath(stack string) string {
	return filepath.Join(h.natDir(), stack+".json")
}

func (h *host) readNAT(stack string) (*NATTable, []byte, error) {
	t := &NATTable{}
	b, err := os.ReadFile(h.natPath(stack))
	if errors.Is(err, os.ErrNotExist) {
		return t, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read nat: %w", err)
	}
	if err := json.Unmarshal(b, t); err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", h.natPath(stack), err)
	}
	return t, b, nil
}

// viewNAT reads a stack's table; the file is replaced by rename, so no
// lock is needed.
func (h *host) viewNAT(stack string) (*NATTable, error) {
	if !zoneFileOK(strings.TrimSuffix(stack, "@G")) {
		return nil, fmt.Errorf("bad IP stack name %q", stack)
	}
	t, _, err := h.readNAT(stack)
	return t, err
}

// updateNAT changes a stack's table under its lock; fn returns false to
// leave it unchanged.
func (h *host) updateNAT(stack string, fn func(t *NATTable) bool) error {
	if !zoneFileOK(strings.TrimSuffix(stack, "@G")) {
		return fmt.Errorf("bad IP stack name %q", stack)
	}
	if err := os.MkdirAll(h.natDir(), 0o755); err != nil {
		return fmt.Errorf("nat dir: %w", err)
	}
	l, err := lockFile(filepath.Join(h.natDir(), stack+".lock"), true)
	if err != nil {
		return err
	}
	defer l.release()
	t, orig, err := h.readNAT(stack)
	if err != nil {
		return err
	}
	if !fn(t) {
		return nil
	}
	b, err := marshalState(t)
	if err != nil {
		return err
	}
	if string(b) == string(orig) {
		return nil
	}
	return writeFileAtomic(h.natPath(stack), b)
}

// dropNAT forgets the stacks of a zone leaving the kernel: its exclusive
// IP stack goes with it.
func (h *host) dropNAT(zone string) {
	for _, s := range []string{zone, zone + "@G"} {
		os.Remove(h.natPath(s))
	}
}

// natStacks lists the stacks that have a table (for `illumos-sim state`).
func (h *host) natStacks() map[string]*NATTable {
	out := map[string]*NATTable{}
	entries, _ := os.ReadDir(h.natDir())
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		if t, err := h.viewNAT(strings.TrimSuffix(n, ".json")); err == nil {
			out[strings.TrimSuffix(n, ".json")] = t
		}
	}
	return out
}

// listed is the rule set `ipnat -l` shows: deleted rules are hidden.
func (t *NATTable) listed() []*NATRuleEntry {
	var out []*NATRuleEntry
	for _, r := range t.Rules {
		if !r.Deleted {
			out = append(out, r)
		}
	}
	return out
}

func (t *NATTable) ruleInUse(id int) bool {
	for _, s := range t.Sessions {
		if s.Rule == id {
			return true
		}
	}
	return false
}

// reap frees deleted rules no session uses any more.
func (t *NATTable) reap() {
	var keep []*NATRuleEntry
	for _, r := range t.Rules {
		if !r.Deleted || t.ruleInUse(r.ID) {
			keep = append(keep, r)
		}
	}
	t.Rules = keep
}

// addRule loads a rule; the error is the errno text the kernel gives.
func (t *NATTable) addRule(r *NATRule) string {
	text := r.String()
	for _, e := range t.listed() {
		if e.Text == text {
			return "File exists"
		}
	}
	if r.Proxy != "" && !knownProxies[strings.ToLower(r.Proxy)] {
		return "No such file or directory"
	}
	t.NextID++
	t.Rules = append(t.Rules, &NATRuleEntry{ID: t.NextID, Text: text})
	t.Gen++
	return ""
}

// removeRule unloads a rule; one that sessions use is only marked.
func (t *NATTable) removeRule(r *NATRule) string {
	text := r.String()
	for i, e := range t.Rules {
		if e.Deleted || e.Text != text {
			continue
		}
		if t.ruleInUse(e.ID) {
			e.Deleted = true
		} else {
			t.Rules = append(t.Rules[:i], t.Rules[i+1:]...)
		}
		t.Gen++
		return ""
	}
	return "No such process"
}

// clearRules is -C: every rule goes; sessions are kept (spec §10.1).
func (t *NATTable) clearRules() {
	for _, r := range t.Rules {
		r.Deleted = true
	}
	t.reap()
	t.Gen++
}

// flushSessions is -F: every session goes; it returns how many.
func (t *NATTable) flushSessions() int {
	n := len(t.Sessions)
	t.Sessions = nil
	t.Expired += uint64(n)
	t.FlushGen++
	t.reap()
	return n
}

func ipnatUsage(inv *invocation) int {
	name := "ipnat"
	if filepath.Base(inv.argv0) == "ipnat" {
		name = inv.argv0
	}
	inv.errf("Usage: %s [-CdFhlnrRsv] [-f filename] [-G|-z zonename]", name)
	return 1
}

// ipnatOpts is one run's options.
type ipnatOpts struct {
	clear, flush, list, hits, remove, dry, stats, verbose bool
	file                                                  string
	hasFile                                               bool
	stack                                                 string
}

func runIpnat(inv *invocation) int {
	const spec = "CdFf:G:hlM:N:nrRsvz:"
	if len(inv.args) == 0 {
		return ipnatUsage(inv)
	}
	opts, rest, bad, ok := getopt(inv.args, spec)
	if !ok {
		if strings.IndexByte(spec, bad) >= 0 {
			inv.errf("ipnat: option requires an argument -- %c", bad)
		} else {
			inv.errf("ipnat: illegal option -- %c", bad)
		}
		return ipnatUsage(inv)
	}
	if len(rest) > 0 {
		return ipnatUsage(inv)
	}
	o := ipnatOpts{stack: inv.zone}
	zoneOpt, gOpt := "", ""
	for _, op := range opts {
		switch op.c {
		case 'C':
			o.clear = true
		case 'F':
			o.flush = true
		case 'l':
			o.list = true
		case 'h':
			o.hits = true
		case 'r':
			o.remove = true
		case 'n':
			o.dry = true
		case 's':
			o.stats = true
		case 'v':
			o.verbose = true
		case 'f':
			o.file, o.hasFile = op.val, true
		case 'z':
			zoneOpt = op.val
		case 'G':
			gOpt = op.val
		}
	}
	// The zone stack (ipfzone.c, spec §10.1).
	if zoneOpt != "" && gOpt != "" {
		inv.errf("Only one of -G and -z may be set")
		return 1
	}
	if z := zoneOpt + gOpt; z != "" {
		if gOpt == "global" {
			inv.errf("-G cannot be used with the global zone")
			return 1
		}
		if inv.zone != "global" {
			inv.errf("Permission denied setting zone: %s", z)
			return 1
		}
		if z != "global" {
			zone, _, err := inv.h.readZone(z)
			if err != nil {
				return inv.stateErr(err)
			}
			if zone == nil || zone.State != stateRunning {
				inv.errf("Could not find running zone: %s", z)
				return 1
			}
		}
		o.stack = z
		if gOpt != "" {
			o.stack = z + "@G"
		}
	}
	var input []byte
	if o.hasFile {
		var err error
		switch {
		case o.file == "-" || o.file == "/dev/stdin":
			input, err = io.ReadAll(inv.stdin)
		case inv.zone != "global":
			// The zone's file, with the zone's rights.
			input, err = inv.readZoneFile(o.file)
		default:
			input, err = os.ReadFile(o.file)
		}
		if err != nil {
			// Reported, and the run goes on (spec §10.5).
			inv.errf("fopen(%s) failed: %s", o.file, strerror(err))
			o.hasFile, input = false, nil
		}
	}
	code := 0
	var before, after NATTable
	var err error
	if !o.hasFile && !o.clear && !o.flush {
		// -l and -s only read: the file is replaced by rename, so no lock.
		var t *NATTable
		if t, err = inv.h.viewNAT(o.stack); err == nil {
			before = *t
			code = ipnatApply(inv, t, o, nil, inv.h.sessionsOf(o.stack, t))
			after = *t
		}
	} else {
		err = inv.h.updateNAT(o.stack, func(t *NATTable) bool {
			before = *t
			code = ipnatApply(inv, t, o, input, inv.h.sessionsOf(o.stack, t))
			after = *t
			return !o.dry
		})
	}
	if err != nil {
		return inv.stateErr(err)
	}
	if o.stack == "global" && !o.dry {
		inv.h.realiseNAT(&after, before.Gen != after.Gen || before.FlushGen != after.FlushGen)
	}
	return code
}

// realiseNAT puts the global table in force after an ipnat run (changed:
// the run changed its rules or flushed its sessions): in the node's
// kernel in isolation mode, else by the NAT daemon.
func (h *host) realiseNAT(t *NATTable, changed bool) {
	switch {
	case h.kernelNAT():
		h.syncKernelNAT(t)
	case changed:
		syncNatd(h, t.Gen, t.FlushGen, hasRdr(t.Rules))
	case hasRdr(t.Rules) && !natdRunning(h):
		// Rules without their forwarders (the daemon was stopped): any
		// ipnat brings them back.
		syncNatd(h, t.Gen, t.FlushGen, true)
	}
}

// sessionsOf is where a stack's sessions are.
func (h *host) sessionsOf(stack string, t *NATTable) natSessions {
	if stack == "global" && h.kernelNAT() {
		return kernelSessions{h}
	}
	return tableSessions{t}
}

// ipnatApply does one run's work on the table, in ipnat's fixed order.
func ipnatApply(inv *invocation, t *NATTable, o ipnatOpts, input []byte, sessions natSessions) int {
	// -l and -s open the device read-only: every change then fails with
	// EPERM and the exit status stays 0 (spec §10.1).
	readOnly := (o.list || o.stats) && (o.hasFile || o.clear || o.flush)
	if o.flush {
		switch {
		case o.dry:
			inv.outf("0 entries flushed from NAT table")
		case readOnly:
			inv.errf("ioctl(SIOCFLNAT): Not owner")
		default:
			inv.outf("%d entries flushed from NAT table", sessions.flush())
		}
	}
	if o.clear {
		switch {
		case o.dry:
			inv.outf("0 entries flushed from NAT list")
		case readOnly:
			inv.errf("ioctl(SIOCCNATL): Not owner")
		default:
			t.clearRules()
			// The kernel's count is always 4 (spec §10.1).
			inv.outf("4 entries flushed from NAT list")
		}
	}
	code := 0
	if o.hasFile {
		p := newNATParser(string(input), func(msg string) { inv.errf("%s", msg) })
		for {
			r, line, err := p.Next()
			if err != nil {
				// Earlier rules stay loaded (spec §10.6).
				inv.errf("%s", err)
				code = 1
				break
			}
			if r == nil {
				break
			}
			if o.verbose {
				inv.outf("%s", r)
			}
			if o.dry {
				continue
			}
			what, msg := "add/insert nat rule", ""
			if o.remove {
				what = "delete nat rule"
			}
			switch {
			case readOnly:
				msg = "Not owner"
			case o.remove:
				msg = t.removeRule(r)
			default:
				msg = t.addRule(r)
			}
			if msg != "" {
				// N is the rule's own line, which spec §10.5 allows.
				inv.errf("%d:ioctl(%s): %s", line, what, msg)
			}
		}
	}
	var active []*NATSession
	if o.stats || o.list {
		active = sessions.list()
	}
	if o.stats {
		inv.outf("mapped\tin\t%d\tout\t%d", t.Added, 0)
		inv.outf("added\t%d\texpired\t%d", t.Added, t.Expired)
		inv.outf("no memory\t0\tbad nat\t0")
		inv.outf("inuse\t%d", len(active))
		inv.outf("orphans\t0")
		inv.outf("rules\t%d", len(t.Rules))
		inv.outf("wilds\t0")
	}
	if o.list {
		inv.outf("List of active MAP/Redirect filters:")
		for _, r := range t.listed() {
			if o.hits {
				inv.outf("%d %s", r.Hits, r.Text)
			} else {
				inv.outf("%s", r.Text)
			}
		}
		inv.outf("")
		inv.outf("List of active sessions:")
		for _, s := range active {
			inv.outf("%s", s.line())
		}
	}
	return code
}

// line is the session as printactivenat.c prints it (spec §10.4).
func (s *NATSession) line() string {
	if s.Proto != "tcp" && s.Proto != "udp" {
		return fmt.Sprintf("%s %-15s <- -> %-15s [%s]", s.Type, s.In, s.Out, s.Remote)
	}
	return fmt.Sprintf("%s %-15s %-5d <- -> %-15s %-5d [%s %d]", s.Type, s.In, s.InPort, s.Out, s.OutPort, s.Remote, s.RemotePort)
}

func hasRdr(rules []*NATRuleEntry) bool {
	for _, r := range rules {
		if strings.HasPrefix(r.Text, "rdr ") {
			return true
		}
	}
	return false
}

// ipfilterReload is the ipfilter method's load_ipnat, run by `svcadm
// refresh|restart network/ipfilter` in the global zone: `ipnat -CF`, then
// the rules of /etc/ipf/ipnat.conf (spec §10.7). Runtime rules and every
// session are gone afterwards. (On a host the reload is asynchronous;
// here it is done when svcadm returns.)
func ipfilterReload(h *host) error {
	conf, _ := os.ReadFile(filepath.Join(h.root, "fs", "etc", "ipf", "ipnat.conf"))
	var t2 NATTable
	err := h.updateNAT("global", func(t *NATTable) bool {
		h.sessionsOf("global", t).flush()
		t.clearRules()
		p := newNATParser(string(conf), nil)
		for {
			r, _, err := p.Next()
			if err != nil || r == nil {
				break
			}
			t.addRule(r)
		}
		t2 = *t
		return true
	})
	if err != nil {
		return err
	}
	h.realiseNAT(&t2, true)
	return nil
}
