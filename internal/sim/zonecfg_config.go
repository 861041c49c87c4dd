package sim

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ZoneConfig is a zone's configuration as zonecfg keeps it. Resources other
// than rctls are stored generically (type + properties) in the order they
// were added; capped-cpu and capped-memory swap/locked are rctls, as in
// libzonecfg, so the aliases and the resource views always agree.
type ZoneConfig struct {
	Zonepath        string      `json:"zonepath"`
	Brand           string      `json:"brand"`
	Autoboot        bool        `json:"autoboot"`
	Bootargs        string      `json:"bootargs,omitempty"`
	Pool            string      `json:"pool,omitempty"`
	Limitpriv       string      `json:"limitpriv,omitempty"`
	SchedulingClass string      `json:"scheduling-class,omitempty"`
	IPType          string      `json:"ip-type"`
	Hostid          string      `json:"hostid,omitempty"`
	FSAllowed       string      `json:"fs-allowed,omitempty"`
	CappedMemory    uint64      `json:"capped-memory-physical,omitempty"` // bytes
	Resources       []*Resource `json:"resources"`
	Rctls           []*Rctl     `json:"rctls"`
}

// Resource is one fs, net, device, attr, dataset, dedicated-cpu or admin
// resource.
type Resource struct {
	Type    string            `json:"type"`
	Props   map[string]string `json:"props"`
	Options []string          `json:"options,omitempty"` // fs options
}

// Rctl is a resource control with its values.
type Rctl struct {
	Name   string      `json:"name"`
	Values []RctlValue `json:"values"`
}

// RctlValue is one (priv,limit,action) triple.
type RctlValue struct {
	Priv   string `json:"priv"`
	Limit  string `json:"limit"`
	Action string `json:"action"`
}

func (v RctlValue) String() string {
	return fmt.Sprintf("(priv=%s,limit=%s,action=%s)", v.Priv, v.Limit, v.Action)
}

func (c *ZoneConfig) clone() *ZoneConfig {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("clone zone config: %v", err))
	}
	out := &ZoneConfig{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("clone zone config: %v", err))
	}
	return out
}

// resources returns the resources of one type, in order.
func (c *ZoneConfig) resources(rt string) []*Resource {
	var out []*Resource
	for _, r := range c.Resources {
		if r.Type == rt {
			out = append(out, r)
		}
	}
	return out
}

func (c *ZoneConfig) removeResource(r *Resource) {
	out := c.Resources[:0]
	for _, x := range c.Resources {
		if x != r {
			out = append(out, x)
		}
	}
	c.Resources = out
}

func (c *ZoneConfig) rctl(name string) *Rctl {
	for _, r := range c.Rctls {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// rctlLimit returns the limit of the first value of an rctl.
func (c *ZoneConfig) rctlLimit(name string) (string, bool) {
	r := c.rctl(name)
	if r == nil || len(r.Values) == 0 {
		return "", false
	}
	return r.Values[0].Limit, true
}

// setAliasRctl sets an aliased rctl to a single privileged value.
func (c *ZoneConfig) setAliasRctl(name, limit string) {
	action := "deny"
	if name == "zone.cpu-shares" {
		action = "none"
	}
	v := RctlValue{Priv: "privileged", Limit: limit, Action: action}
	if r := c.rctl(name); r != nil {
		r.Values = []RctlValue{v}
		return
	}
	c.Rctls = append(c.Rctls, &Rctl{Name: name, Values: []RctlValue{v}})
}

func (c *ZoneConfig) clearRctl(name string) bool {
	for i, r := range c.Rctls {
		if r.Name == name {
			c.Rctls = append(c.Rctls[:i], c.Rctls[i+1:]...)
			return true
		}
	}
	return false
}

// exclusive reports an exclusive-IP zone.
func (c *ZoneConfig) exclusive() bool { return c.IPType == "exclusive" }

// nets returns the net resources' physical links.
func (c *ZoneConfig) netLinks() []string {
	var out []string
	for _, r := range c.resources("net") {
		if p := r.Props["physical"]; p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Aliased rctls: zonecfg global properties that are really rctls.
var rctlAliases = []struct {
	prop, rctl string
	units      bool // the value may carry K/M/G/T
}{
	{"max-lwps", "zone.max-lwps", false},
	{"max-processes", "zone.max-processes", false},
	{"max-shm-memory", "zone.max-shm-memory", true},
	{"max-shm-ids", "zone.max-shm-ids", false},
	{"max-msg-ids", "zone.max-msg-ids", false},
	{"max-sem-ids", "zone.max-sem-ids", false},
	{"max-locked-memory", "zone.max-locked-memory", true},
	{"max-swap", "zone.max-swap", true},
	{"cpu-shares", "zone.cpu-shares", false},
}

// aliasLowLimit is the least value zonecfg sets an aliased rctl to
// (libzonecfg's alias table: 100 for max-lwps and max-processes).
func aliasLowLimit(rctl string) uint64 {
	switch rctl {
	case "zone.max-lwps", "zone.max-processes":
		return 100
	}
	return 0
}

func aliasFor(prop string) (rctl string, units bool, ok bool) {
	for _, a := range rctlAliases {
		if a.prop == prop {
			return a.rctl, a.units, true
		}
	}
	return "", false, false
}

// Global properties in info order.
var globalProps = []string{
	"zonename", "zonepath", "brand", "autoboot", "bootargs", "pool", "limitpriv",
	"scheduling-class", "ip-type", "hostid", "fs-allowed",
}

// Resource types and their properties in info order.
var resourceProps = map[string][]string{
	"fs":            {"dir", "special", "raw", "type", "options"},
	"net":           {"address", "allowed-address", "physical", "defrouter", "global-nic"},
	"device":        {"match"},
	"rctl":          {"name", "value"},
	"attr":          {"name", "type", "value"},
	"dataset":       {"name"},
	"dedicated-cpu": {"ncpus", "importance"},
	"capped-cpu":    {"ncpus"},
	"capped-memory": {"physical", "swap", "locked"},
	"admin":         {"user", "auths"},
}

// optionalInfoProps print in info only when set (OmniOS's global-nic), so
// the common layout stays that of illumos-gate.
var optionalInfoProps = map[string]bool{"global-nic": true}

// resourceOrder is the order info prints resources in.
var resourceOrder = []string{"fs", "net", "device", "dedicated-cpu", "capped-cpu", "capped-memory", "attr", "dataset", "admin", "rctl"}

// singletonResources exist at most once per zone.
var singletonResources = map[string]bool{"dedicated-cpu": true, "capped-cpu": true, "capped-memory": true}

// zonecfgKeywords are the words the zonecfg grammar knows as property or
// resource names; any other word where one is expected is a syntax error.
var zonecfgKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range globalProps {
		m[p] = true
	}
	for rt, ps := range resourceProps {
		m[rt] = true
		for _, p := range ps {
			m[p] = true
		}
	}
	for _, a := range rctlAliases {
		m[a.prop] = true
	}
	for _, p := range []string{"priv", "limit", "action"} {
		m[p] = true
	}
	return m
}()

// knownBrands are the brands the simulated host has installed.
var knownBrands = map[string]bool{
	"ipkg": true, "lipkg": true, "sparse": true, "pkgsrc": true, "lx": true,
	"bhyve": true, "kvm": true, "illumos": true, "emu": true,
	"omicron1": true, "joyent": true, "joyent-minimal": true,
}

// exclusiveOnlyBrands cannot run shared-IP.
var exclusiveOnlyBrands = map[string]bool{"lx": true, "bhyve": true, "kvm": true, "illumos": true, "omicron1": true}

// parseIPPrefix parses ADDR[/PREFIX]; IPv6 needs a prefix.
func parseIPPrefix(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Is6() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, 32), true
}

// parseScaledBytes parses a zonecfg memory value: a number with a required
// K/M/G/T scale (case-insensitive), or a plain byte count when allowPlain.
func parseScaledBytes(s string, allowPlain bool) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	mult := uint64(1)
	last := s[len(s)-1]
	switch last | 0x20 {
	case 'k':
		mult = 1 << 10
	case 'm':
		mult = 1 << 20
	case 'g':
		mult = 1 << 30
	case 't':
		mult = 1 << 40
	default:
		if !allowPlain {
			return 0, false
		}
	}
	num := s
	if mult != 1 {
		num = s[:len(s)-1]
	}
	if num == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || strings.ContainsAny(num, "eExX") {
		return 0, false
	}
	return uint64(f * float64(mult)), true
}

// bytesToUnits renders bytes as zonecfg's bytes_to_units does ("1G", "1.5G").
func bytesToUnits(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10)
	}
	units := "BKMGT"
	up := 0
	var save uint64
	for n >= 1024 && units[up] != 'T' {
		up++
		save = n
		n = (n + 512) >> 10
	}
	if save%1024 != 0 && (save>>10) < 10 {
		return fmt.Sprintf("%2.1f%c", float64(save)/1024, units[up])
	}
	return fmt.Sprintf("%d%c", n, units[up])
}
