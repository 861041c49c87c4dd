package illumos

import (
	"fmt"
	"strconv"
	"strings"
)

// ZoneInfo is `zonecfg info` output: the typed configuration, and every
// property and resource as printed, for what ZoneConfig does not model.
type ZoneInfo struct {
	Config ZoneConfig
	// Props are the global properties (zonename, zonepath, bootargs, pool,
	// aliased rctls like max-lwps...), brackets removed, empty when unset.
	Props map[string]string
	// Resources are the resources in printed order; unset properties
	// ("<prop> not specified") are absent from Props.
	Resources []InfoResource
}

// InfoResource is one resource of `zonecfg info`.
type InfoResource struct {
	Type  string // fs, net, device, capped-cpu, capped-memory, attr, dataset, rctl...
	Props map[string]string
}

// ParseZonecfgInfo parses `zonecfg -z Z info` (spec 4.7): global
// "name: value" lines, then resources, each a "type:" header followed by
// TAB-indented "prop: value" or "prop not specified" lines. Bracketed
// lines ("[max-lwps: 2000]", "[ncpus: 1.50]") are aliases and read like the
// others; a value containing blanks may be double-quoted.
func ParseZonecfgInfo(out string) (ZoneInfo, error) {
	info := ZoneInfo{Props: map[string]string{}}
	var cur *InfoResource
	for n, raw := range strings.Split(out, "\n") {
		line := strings.TrimRight(raw, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		indented := line[0] == '\t' || line[0] == ' '
		body := strings.TrimSpace(line)
		if strings.HasPrefix(body, "[") && strings.HasSuffix(body, "]") {
			body = body[1 : len(body)-1]
		}
		if indented {
			if cur == nil {
				return ZoneInfo{}, fmt.Errorf("line %d: resource property outside a resource: %q", n+1, line)
			}
			if strings.HasSuffix(body, " not specified") {
				continue
			}
			k, v, ok := strings.Cut(body, ":")
			if !ok || k == "" {
				return ZoneInfo{}, fmt.Errorf("line %d: not a property: %q", n+1, line)
			}
			cur.Props[k] = infoValue(v)
			continue
		}
		k, v, ok := strings.Cut(body, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return ZoneInfo{}, fmt.Errorf("line %d: not a property or resource: %q", n+1, line)
		}
		if strings.TrimSpace(v) == "" && isResourceType(k) {
			info.Resources = append(info.Resources, InfoResource{Type: k, Props: map[string]string{}})
			cur = &info.Resources[len(info.Resources)-1]
			continue
		}
		cur = nil
		info.Props[k] = infoValue(v)
	}
	cfg, err := configFromInfo(info)
	if err != nil {
		return ZoneInfo{}, err
	}
	info.Config = cfg
	return info, nil
}

// isResourceType reports the resource headers of `zonecfg info`. A global
// property with an empty value ("pool: ") is not one of them.
func isResourceType(k string) bool {
	switch k {
	case "fs", "net", "device", "rctl", "attr", "dataset", "dedicated-cpu",
		"capped-cpu", "capped-memory", "admin", "security-flags", "inherit-pkg-dir":
		return true
	}
	return false
}

// infoValue trims the separator blank and removes the quotes zonecfg puts
// around values with blanks.
func infoValue(v string) string {
	v = strings.TrimPrefix(v, " ")
	v = strings.TrimRight(v, " ")
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	return v
}

func configFromInfo(info ZoneInfo) (ZoneConfig, error) {
	p := info.Props
	cfg := ZoneConfig{
		Name:      p["zonename"],
		Brand:     p["brand"],
		Zonepath:  p["zonepath"],
		Autoboot:  p["autoboot"] == "true",
		IPType:    IPType(p["ip-type"]),
		LimitPriv: p["limitpriv"],
	}
	// In a fixed order, so that of two bad values the same one is named.
	for _, f := range []struct {
		prop string
		dst  *uint64
	}{{"max-processes", &cfg.MaxProcesses}, {"max-lwps", &cfg.MaxLWPs}} {
		prop, dst := f.prop, f.dst
		if v := p[prop]; v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return ZoneConfig{}, fmt.Errorf("%s %q: %w", prop, v, err)
			}
			*dst = n
		}
	}
	var bhyve BhyveConfig
	hasBhyve := false
	for _, r := range info.Resources {
		lifted, err := cfg.addInfoResource(r, &bhyve)
		if err != nil {
			return ZoneConfig{}, err
		}
		hasBhyve = hasBhyve || lifted
	}
	if hasBhyve {
		cfg.Bhyve = &bhyve
	}
	return cfg, nil
}

// addInfoResource adds r to cfg, in the order printed (an rctl is
// compared with the caps read before it); lifted: r is a bhyve zone's
// attr that went into bhyve instead.
func (cfg *ZoneConfig) addInfoResource(r InfoResource, bhyve *BhyveConfig) (lifted bool, err error) {
	rp := r.Props
	switch r.Type {
	case "fs":
		fs := FS{Dir: rp["dir"], Special: rp["special"], Type: rp["type"]}
		fs.Options = splitInfoList(rp["options"])
		cfg.FS = append(cfg.FS, fs)
	case "net":
		cfg.Nets = append(cfg.Nets, Net{Physical: rp["physical"], AllowedAddress: rp["allowed-address"], Defrouter: rp["defrouter"]})
	case "device":
		cfg.Devices = append(cfg.Devices, rp["match"])
	case "capped-cpu":
		if v := rp["ncpus"]; v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return false, fmt.Errorf("capped-cpu ncpus %q: %w", v, err)
			}
			cfg.CPUCap = f
		}
	case "capped-memory":
		m, err := cappedMemoryFromInfo(rp)
		if err != nil {
			return false, err
		}
		cfg.Memory = m
	case "attr":
		a := Attr{Name: rp["name"], Type: rp["type"], Value: rp["value"]}
		if cfg.Brand == "bhyve" {
			lifted, err := liftBhyveAttr(bhyve, a)
			if err != nil || lifted {
				return lifted, err
			}
		}
		cfg.Attrs = append(cfg.Attrs, a)
	case "dataset":
		cfg.Datasets = append(cfg.Datasets, rp["name"])
	case "rctl":
		r, err := parseRctlValue(rp["name"], rp["value"])
		if err != nil {
			return false, err
		}
		if !aliasOfCap(*cfg, r) {
			cfg.Rctls = append(cfg.Rctls, r)
		}
	}
	return false, nil
}

func cappedMemoryFromInfo(rp map[string]string) (*CappedMemory, error) {
	m := &CappedMemory{}
	for prop, dst := range map[string]*uint64{"physical": &m.Physical, "swap": &m.Swap, "locked": &m.Locked} {
		if v := rp[prop]; v != "" {
			b, err := ParseSize(v)
			if err != nil {
				return nil, fmt.Errorf("capped-memory %s: %w", prop, err)
			}
			*dst = b
		}
	}
	return m, nil
}

// aliasOfCap reports an rctl that zonecfg keeps for a capped-cpu or
// capped-memory setting (zone.cpu-cap = ncpus*100, zone.max-swap,
// zone.max-locked-memory) or an aliased global property (max-processes,
// max-lwps), and may list again as an rctl resource: it is already in
// CPUCap, Memory, MaxProcesses or MaxLWPs.
func aliasOfCap(cfg ZoneConfig, r Rctl) bool {
	switch r.Name {
	case "zone.max-processes":
		return cfg.MaxProcesses == r.Limit
	case "zone.max-lwps":
		return cfg.MaxLWPs == r.Limit
	case "zone.cpu-cap":
		return cfg.CPUCap > 0 && uint64(cfg.CPUCap*100+0.5) == r.Limit
	case "zone.max-swap":
		return cfg.Memory != nil && cfg.Memory.Swap == r.Limit
	case "zone.max-locked-memory":
		return cfg.Memory != nil && cfg.Memory.Locked == r.Limit
	}
	return false
}

// splitInfoList reads an info list value, "[ro,nodevices]" or
// `[ro,"size=10m"]`: items separated by commas outside double quotes.
func splitInfoList(v string) []string {
	v = strings.TrimSpace(v)
	v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	if v == "" {
		return nil
	}
	var items []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			items = append(items, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(items, cur.String())
}

// liftBhyveAttr moves a bhyve attr into b; it reports whether a was one.
func liftBhyveAttr(b *BhyveConfig, a Attr) (bool, error) {
	switch a.Name {
	case "vcpus":
		n, err := strconv.Atoi(a.Value)
		if err != nil {
			return false, nil // not ours to interpret (e.g. "sockets=1,cores=2")
		}
		b.VCPUs = n
	case "ram":
		v, err := parseSizeDefault(a.Value, 20) // bhyve reads a plain number as MiB
		if err != nil {
			return false, fmt.Errorf("bhyve ram %q: %w", a.Value, err)
		}
		b.RAM = v
	case "bootdisk":
		b.BootDisk = a.Value
	case "bootrom":
		b.Bootrom = a.Value
	default:
		return false, nil
	}
	return true, nil
}

// parseRctlValue reads "(priv=privileged,limit=2000,action=deny)".
func parseRctlValue(name, v string) (Rctl, error) {
	r := Rctl{Name: name}
	body := strings.TrimSuffix(strings.TrimPrefix(v, "("), ")")
	for _, kv := range strings.Split(body, ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "priv":
			r.Priv = val
		case "limit":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return Rctl{}, fmt.Errorf("rctl %s: limit %q: %w", name, val, err)
			}
			r.Limit = n
		case "action":
			r.Action = val
		}
	}
	return r, nil
}
