package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Fault injection. ROOT/faults.json (and, for one call, $ILLUMOS_SIM_FAULTS
// with the same JSON) holds rules keyed by "CMD", "CMD SUB" or
// "CMD SUB ZONE" (e.g. "zfs", "zoneadm install", "zoneadm boot web01");
// the most specific key that matches a call wins:
//
//	{
//	  "seed": 42,
//	  "latency":   {"zoneadm install": "2s"},
//	  "stream_rate": {"zfs send": "1M"},
//	  "fail_rate": {"dladm create-vnic": 0.25},
//	  "fail_next": {"zfs create": {"count": 2, "stderr": "...", "exit": 1},
//	                "zoneadm install": {"count": 1, "brand_exit": 255}},
//	  "hang":      ["zoneadm boot"]
//	}

const faultsFileName = "faults.json"

// FaultConfig is the content of faults.json.
type FaultConfig struct {
	Seed    int64               `json:"seed,omitempty"`
	Latency map[string]Duration `json:"latency,omitempty"`
	// StreamRate caps the bytes per second a command writes to stdout (a
	// zfs send's stream) or reads from stdin (a zfs receive's), as a slow
	// disk or link would.
	StreamRate map[string]string        `json:"stream_rate,omitempty"`
	FailRate   map[string]float64       `json:"fail_rate,omitempty"`
	FailNext   map[string]*FailNextRule `json:"fail_next,omitempty"`
	Hang       []string                 `json:"hang,omitempty"`
}

// FailNextRule fails the next Count matching calls.
type FailNextRule struct {
	Count  int    `json:"count"`
	Stderr string `json:"stderr,omitempty"`
	Exit   int    `json:"exit,omitempty"`
	// BrandExit, for "zoneadm install", lets the install proceed to
	// incomplete and makes the brand hook exit with this status instead
	// (254: back to configured; 255: stays incomplete).
	BrandExit int `json:"brand_exit,omitempty"`
}

// faultPlan is the merged configuration for this call.
type faultPlan struct {
	file *FaultConfig
	env  *FaultConfig
	h    *host
}

// faultCall is what applies to one call.
type faultCall struct {
	h       *host
	seed    int64
	latency time.Duration
	rateCap uint64 // stream_rate, bytes per second
	slept   bool
	hang    bool
	rateKey string
	rate    float64
	nextKey string
	next    *FailNextRule
	fromEnv bool // fail_next came from the environment: not decremented
	name    string
	sub     string
	zone    string
	lastArg string
}

func (h *host) faultsPath() string { return filepath.Join(h.root, faultsFileName) }

func readFaultConfig(path string) (*FaultConfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &FaultConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read faults: %w", err)
	}
	return parseFaultConfig(b, path)
}

func parseFaultConfig(b []byte, where string) (*FaultConfig, error) {
	c := &FaultConfig{}
	if len(strings.TrimSpace(string(b))) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("parse %s: %w", where, err)
	}
	return c, nil
}

func loadFaultPlan(h *host, env map[string]string) (*faultPlan, error) {
	f, err := readFaultConfig(h.faultsPath())
	if err != nil {
		return nil, err
	}
	p := &faultPlan{file: f, h: h}
	if s := env[EnvFaults]; s != "" {
		if p.env, err = parseFaultConfig([]byte(s), EnvFaults); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// faultKeys are the keys a call matches, most specific first.
func faultKeys(name, sub, zone string) []string {
	var keys []string
	if sub != "" && zone != "" {
		keys = append(keys, name+" "+sub+" "+zone)
	}
	if sub != "" {
		keys = append(keys, name+" "+sub)
	}
	return append(keys, name)
}

func (p *faultPlan) forCall(name, sub, zone string) *faultCall {
	fc := &faultCall{h: p.h, name: name, sub: sub, zone: zone}
	keys := faultKeys(name, sub, zone)
	// The environment's rules override the file's, key by key.
	for _, c := range []*FaultConfig{p.file, p.env} {
		if c == nil {
			continue
		}
		if c.Seed != 0 {
			fc.seed = c.Seed
		}
		for _, k := range keys {
			if d, ok := c.Latency[k]; ok {
				fc.latency = time.Duration(d)
				break
			}
		}
		for _, k := range keys {
			if v, ok := c.StreamRate[k]; ok {
				fc.rateCap, _ = parseZfsSize(v)
				break
			}
		}
		for _, k := range keys {
			if r, ok := c.FailRate[k]; ok {
				fc.rateKey, fc.rate = k, r
				break
			}
		}
		for _, k := range keys {
			if r, ok := c.FailNext[k]; ok && r != nil && r.Count > 0 {
				fc.nextKey, fc.next, fc.fromEnv = k, r, c == p.env
				break
			}
		}
		for _, k := range keys {
			if containsStr(c.Hang, k) {
				fc.hang = true
			}
		}
	}
	return fc
}

// before applies hang, latency and injected failures ahead of the command.
// It returns the exit status and true when the call must fail.
func (fc *faultCall) before(inv *invocation) (int, bool) {
	if len(inv.args) > 0 {
		fc.lastArg = inv.args[len(inv.args)-1]
	}
	if fc.hang {
		// Sleep until killed: the caller's timeout must deal with it.
		for {
			time.Sleep(time.Hour)
		}
	}
	if inv.name != "zoneadm" {
		fc.sleep()
	}
	if fc.next != nil && fc.next.BrandExit == 0 {
		if fc.consumeNext() {
			msg := fc.next.Stderr
			if msg == "" {
				msg = fc.transientMessage()
			}
			fmt.Fprintln(inv.stderr, msg)
			if fc.next.Exit != 0 {
				return fc.next.Exit, true
			}
			return fc.transientExit(), true
		}
	}
	if fc.rate > 0 && fc.rollFailure() {
		if inv.name == "route" {
			fmt.Fprintln(inv.stdout, fc.transientMessage())
		} else {
			fmt.Fprintln(inv.stderr, fc.transientMessage())
		}
		return fc.transientExit(), true
	}
	return 0, false
}

// sleep applies the latency once. zoneadm calls it at the point where the
// zone sits in its transient state.
func (fc *faultCall) sleep() {
	if fc == nil || fc.slept || fc.latency <= 0 {
		return
	}
	fc.slept = true
	time.Sleep(fc.latency)
}

// throttle caps what is written through w at the call's stream_rate.
func (fc *faultCall) throttle(w io.Writer) io.Writer {
	if fc == nil || fc.rateCap == 0 {
		return w
	}
	return &throttledWriter{w: w, rate: fc.rateCap, start: time.Now()}
}

// throttleReader caps what is read through r at the call's stream_rate.
func (fc *faultCall) throttleReader(r io.Reader) io.Reader {
	if fc == nil || fc.rateCap == 0 {
		return r
	}
	return &throttledReader{r: r, rate: fc.rateCap, start: time.Now()}
}

// throttledReader reads at most a tenth of a second's worth at a time,
// each once the time for the bytes before it has passed.
type throttledReader struct {
	r     io.Reader
	rate  uint64
	start time.Time
	n     uint64
}

func (t *throttledReader) Read(b []byte) (int, error) {
	due := t.start.Add(time.Duration(float64(t.n) / float64(t.rate) * float64(time.Second)))
	time.Sleep(time.Until(due))
	n, err := t.r.Read(b[:min(len(b), max(int(t.rate/10), 1))])
	t.n += uint64(n)
	return n, err
}

// throttledWriter writes in pieces of a tenth of a second's worth, each
// once the time for the bytes before it has passed.
type throttledWriter struct {
	w     io.Writer
	rate  uint64
	start time.Time
	n     uint64
}

func (t *throttledWriter) Write(b []byte) (int, error) {
	piece := max(int(t.rate/10), 1)
	written := 0
	for len(b) > 0 {
		due := t.start.Add(time.Duration(float64(t.n) / float64(t.rate) * float64(time.Second)))
		time.Sleep(time.Until(due))
		k := min(piece, len(b))
		n, err := t.w.Write(b[:k])
		written += n
		t.n += uint64(n)
		if err != nil {
			return written, err
		}
		b = b[k:]
	}
	return written, nil
}

// brandExit returns an injected brand-hook status for zoneadm install.
func (fc *faultCall) brandExit() int {
	if fc == nil || fc.next == nil || fc.next.BrandExit == 0 {
		return 0
	}
	if !fc.consumeNext() {
		return 0
	}
	return fc.next.BrandExit
}

// consumeNext decrements the fail_next counter in faults.json under the
// host lock, so concurrent calls never both take the last failure.
func (fc *faultCall) consumeNext() bool {
	if fc.fromEnv {
		return true
	}
	took := false
	err := withFaultsFile(fc.h, func(c *FaultConfig) bool {
		r := c.FailNext[fc.nextKey]
		if r == nil || r.Count <= 0 {
			return false
		}
		r.Count--
		if r.Count == 0 {
			delete(c.FailNext, fc.nextKey)
		}
		took = true
		return true
	})
	return err == nil && took
}

// rollFailure draws the next number of the seeded sequence for this key;
// the call counter lives in the host state, so the sequence is the same on
// every run that makes the same calls.
func (fc *faultCall) rollFailure() bool {
	n := 0
	err := fc.h.update(func(st *State) bool {
		if st.FaultCalls == nil {
			st.FaultCalls = map[string]int{}
		}
		n = st.FaultCalls[fc.rateKey]
		st.FaultCalls[fc.rateKey] = n + 1
		return true
	})
	if err != nil {
		return false
	}
	hf := fnv.New64a()
	fmt.Fprintf(hf, "%d/%s/%d", fc.seed, fc.rateKey, n)
	x := splitmix64(hf.Sum64())
	return float64(x>>11)/float64(1<<53) < fc.rate
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// transientMessage is a plausible "try again" failure of each command.
func (fc *faultCall) transientMessage() string {
	const eagain = "Resource temporarily unavailable"
	switch fc.name {
	case "zoneadm":
		if fc.zone != "" {
			return fmt.Sprintf("zoneadm: zone '%s': could not lock the zone: %s", fc.zone, eagain)
		}
		return "zoneadm: could not lock the zone index: " + eagain
	case "zonecfg":
		z := fc.zone
		if z == "" {
			z = "zonecfg"
		}
		return fmt.Sprintf("%s: Could not lock the zone configuration: %s", z, eagain)
	case "zlogin":
		return fmt.Sprintf("zlogin: could not connect to zone %s: %s", fc.sub, eagain)
	case "dladm":
		return fmt.Sprintf("dladm: %s failed: %s", fc.sub, strings.ToLower(eagain))
	case "zfs", "zpool":
		return fmt.Sprintf("cannot %s '%s': %s", fc.sub, fc.lastArg, eagain)
	case "ipadm":
		return fmt.Sprintf("ipadm: %s failed: %s", fc.sub, eagain)
	case "route":
		return fmt.Sprintf("%s: %s", fc.sub, eagain)
	case "ipnat":
		return "ipnat: ioctl(SIOCGNATL): " + eagain
	case "svcs", "svcadm", "svccfg":
		return fc.name + ": Could not bind to repository server: repository server unavailable.  Exiting."
	}
	return fc.name + ": " + eagain
}

// transientExit is the status of an injected transient failure: EAGAIN
// (11) for route, whose status is the errno; 1 for everything else.
func (fc *faultCall) transientExit() int {
	if fc.name == "route" {
		return 11
	}
	return 1
}

// faultSubcommand finds the subcommand of a call for fault matching.
func faultSubcommand(name string, args []string) string {
	withValue := map[string]string{
		"zoneadm": "zuR", "zonecfg": "zfR", "zlogin": "el", "route": "R",
		"svcadm": "", "svccfg": "sf", "dladm": "", "zfs": "", "zpool": "", "ipadm": "",
	}
	spec, ok := withValue[name]
	if !ok {
		return ""
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			if len(a) == 2 && strings.IndexByte(spec, a[1]) >= 0 {
				i++
			}
			continue
		}
		if name == "zonecfg" {
			return strings.Fields(strings.ReplaceAll(a, ";", " ") + " ")[0]
		}
		return a
	}
	return ""
}

// faultZone finds the zone a zoneadm or zonecfg call names with -z.
func faultZone(name string, args []string) string {
	if name != "zoneadm" && name != "zonecfg" {
		return ""
	}
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-z" && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(args[i], "-z") && len(args[i]) > 2:
			return args[i][2:]
		}
	}
	return ""
}
