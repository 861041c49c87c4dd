package sim

import (
	"io"
	"os"
)

// ipnat: -F then -C, then the rules of -f FILE ("-" is stdin) are added
// (or removed with -r); -l lists rules and sessions. Counters and listings
// go to stdout (spec §10). The simulation has no traffic, so the session
// table is always empty.

func ipnatUsage(inv *invocation) int {
	inv.errf("usage: ipnat [-CdFhlnRrsv] [-G|-z zonename] -f filename")
	return 1
}

func runIpnat(inv *invocation) int {
	opts, rest, bad, ok := getopt(inv.args, "CdFhlnRrsvf:z:G:")
	if !ok {
		if bad != 0 {
			inv.errf("ipnat: illegal option -- %c", bad)
		}
		return ipnatUsage(inv)
	}
	if len(rest) > 0 {
		return ipnatUsage(inv)
	}
	var flushRules, flushSessions, list, remove, dry, stats bool
	file, stack := "", inv.zone
	hasFile := false
	for _, o := range opts {
		switch o.c {
		case 'C':
			flushRules = true
		case 'F':
			flushSessions = true
		case 'l':
			list = true
		case 'r':
			remove = true
		case 'n':
			dry = true
		case 's':
			stats = true
		case 'f':
			file, hasFile = o.val, true
		case 'z', 'G':
			stack = o.val
		}
	}
	if !flushRules && !flushSessions && !list && !stats && !hasFile {
		return ipnatUsage(inv)
	}
	var rules []natLine
	if hasFile {
		var data []byte
		var err error
		if file == "-" {
			data, err = io.ReadAll(inv.stdin)
		} else {
			data, err = os.ReadFile(file)
		}
		if err != nil {
			inv.errf("ipnat: %s: %s", file, strerror(err))
			return 1
		}
		var badLine int
		rules, badLine = parseNATRules(string(data))
		if badLine != 0 {
			inv.errf("ipnat: syntax error on line %d", badLine)
			return 1
		}
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		if stack != "global" {
			if z := st.zone(stack); z == nil || z.State != stateRunning {
				inv.errf("ipnat: open(IPNAT_NAME): No such file or directory")
				code = 1
				return false
			}
		}
		t := st.natTable(stack)
		if flushSessions {
			inv.outf("0 entries flushed from NAT table")
		}
		if flushRules {
			n := len(t.Rules)
			if !dry {
				t.Rules = []string{}
			}
			inv.outf("%d entries flushed from NAT list", n)
		}
		for _, l := range rules {
			text := l.rule.String()
			idx := indexOf(t.Rules, text)
			switch {
			case remove && idx < 0:
				inv.errf("%d:ioctl(delete nat rule): No such process", l.line)
				code = 1
			case remove:
				if !dry {
					t.Rules = append(t.Rules[:idx], t.Rules[idx+1:]...)
				}
			case idx >= 0:
				inv.errf("%d:ioctl(add/insert rule): File exists", l.line)
				code = 1
			case !dry:
				t.Rules = append(t.Rules, text)
			}
		}
		if list {
			inv.outf("List of active MAP/Redirect filters:")
			for _, r := range t.Rules {
				inv.outf("%s", r)
			}
			inv.outf("")
			inv.outf("List of active sessions:")
		}
		if stats {
			inv.outf("mapped\tin\t0\tout\t0")
			inv.outf("added\t0\texpired\t0")
			inv.outf("no memory\t0\tbad nat\t0")
			inv.outf("inuse\t0")
			inv.outf("rules\t%d", len(t.Rules))
			inv.outf("wilds\t0")
		}
		return !dry
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}
