package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// Resource scope: add, select, remove and end, and storing an edited
// resource into the configuration (spec §4.5).

// resourceExists reports whether a singleton resource is present.
func (c *ZoneConfig) singletonExists(rt string) bool {
	switch rt {
	case "capped-cpu":
		return c.rctl("zone.cpu-cap") != nil
	case "capped-memory":
		return c.CappedMemory > 0 || c.rctl("zone.max-swap") != nil || c.rctl("zone.max-locked-memory") != nil
	}
	return len(c.resources(rt)) > 0
}

func (s *zcSession) cmdAdd(args []zcToken, term string) {
	if s.scope != "" {
		s.addResourceProp(args, term)
		return
	}
	ws, ok := s.words(args)
	if !ok {
		return
	}
	if len(ws) == 0 {
		s.syntaxError(term)
		return
	}
	if len(ws) > 1 {
		s.syntaxError(ws[1])
		return
	}
	rt := ws[0]
	if !zonecfgKeywords[rt] {
		s.syntaxError(rt)
		return
	}
	if !s.initialize() || s.globalReadOnly() {
		return
	}
	if _, ok := resourceProps[rt]; !ok {
		s.zerr("%s: No such resource type", rt)
		return
	}
	if singletonResources[rt] && s.cfg.singletonExists(rt) {
		s.zerr("The %s resource already exists.", rt)
		return
	}
	s.scope, s.resOp = rt, "add"
	s.res = &zcRes{rt: rt, props: map[string]string{}}
	s.resOrig, s.rctlSel = nil, nil
}

// findResources returns the resources of rt whose properties match m.
func (c *ZoneConfig) findResources(rt string, m map[string]string) []*Resource {
	var out []*Resource
	for _, r := range c.resources(rt) {
		ok := true
		for k, v := range m {
			got := r.Props[k]
			if k == "options" {
				got = "[" + strings.Join(r.Options, ",") + "]"
			}
			if got != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

func (c *ZoneConfig) findRctls(m map[string]string) []*Rctl {
	var out []*Rctl
	for _, r := range c.Rctls {
		if n, ok := m["name"]; ok && n != r.Name {
			continue
		}
		out = append(out, r)
	}
	return out
}

func (s *zcSession) cmdSelect(args []zcToken, term string) {
	if len(args) == 0 {
		s.syntaxError(term)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	rt := args[0].text
	m, ok := s.matchPairs(args[1:], term)
	if !ok || !s.initialize() || s.globalReadOnly() {
		return
	}
	if _, ok := resourceProps[rt]; !ok {
		s.zerr("%s: No such resource type", rt)
		return
	}
	res := &zcRes{rt: rt, props: map[string]string{}}
	c := s.cfg
	s.resOrig, s.rctlSel = nil, nil
	switch rt {
	case "capped-cpu":
		lim, ok := c.rctlLimit("zone.cpu-cap")
		if !ok {
			s.zerr("%s: No such resource with that id", rt)
			return
		}
		n, _ := strconv.ParseFloat(lim, 64)
		res.props["ncpus"] = strconv.FormatFloat(n/100, 'f', -1, 64)
	case "capped-memory":
		if !c.singletonExists(rt) {
			s.zerr("%s: No such resource with that id", rt)
			return
		}
		if c.CappedMemory > 0 {
			res.props["physical"] = strconv.FormatUint(c.CappedMemory, 10)
		}
		if v, ok := c.rctlLimit("zone.max-swap"); ok {
			res.props["swap"] = v
		}
		if v, ok := c.rctlLimit("zone.max-locked-memory"); ok {
			res.props["locked"] = v
		}
	case "rctl":
		found := c.findRctls(m)
		if !s.exactlyOne(rt, len(found)) {
			return
		}
		s.rctlSel = found[0]
		res.props["name"] = found[0].Name
		res.values = append([]RctlValue(nil), found[0].Values...)
	default:
		found := c.findResources(rt, m)
		if !s.exactlyOne(rt, len(found)) {
			return
		}
		s.resOrig = found[0]
		for k, v := range found[0].Props {
			res.props[k] = v
		}
		res.options = append([]string(nil), found[0].Options...)
	}
	s.scope, s.res, s.resOp = rt, res, "select"
}

func (s *zcSession) exactlyOne(rt string, n int) bool {
	switch {
	case n == 0:
		s.zerr("%s: No such resource with that id", rt)
		return false
	case n > 1:
		s.zerr("%s: Insufficient specification", rt)
		return false
	}
	return true
}

func (s *zcSession) cmdRemove(args []zcToken, term string) {
	if s.scope != "" {
		s.removeResourceProp(args, term)
		return
	}
	force := false
	if len(args) > 0 && args[0].kind == tkWord && args[0].text == "-F" {
		force = true
		args = args[1:]
	}
	if len(args) == 0 {
		s.syntaxError(term)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	rt := args[0].text
	m, ok := s.matchPairs(args[1:], term)
	if !ok || !s.initialize() || s.globalReadOnly() {
		return
	}
	c := s.cfg
	switch rt {
	case "capped-cpu":
		if !c.clearRctl("zone.cpu-cap") {
			s.zerr("%s: No such resource with that id", rt)
			return
		}
	case "capped-memory":
		if !c.singletonExists(rt) {
			s.zerr("%s: No such resource with that id", rt)
			return
		}
		c.CappedMemory = 0
		c.clearRctl("zone.max-swap")
		c.clearRctl("zone.max-locked-memory")
	case "rctl":
		found := c.findRctls(m)
		if !s.removable(rt, len(found), len(m) > 0, force) {
			return
		}
		for _, r := range found {
			c.clearRctl(r.Name)
		}
	default:
		if _, ok := resourceProps[rt]; !ok {
			s.zerr("%s: No such resource type", rt)
			return
		}
		found := c.findResources(rt, m)
		if !s.removable(rt, len(found), len(m) > 0, force) {
			return
		}
		for _, r := range found {
			c.removeResource(r)
		}
	}
	s.dirty = true
}

// removable applies zonecfg's rules for removing matching resources: none is
// an error; several need a selector or -F (there is no terminal to ask).
func (s *zcSession) removable(rt string, n int, selective, force bool) bool {
	switch {
	case n == 0:
		s.zerr("%s: No such resource with that id", rt)
		return false
	case n > 1 && selective:
		s.zerr("%s: Insufficient specification", rt)
		return false
	case n > 1 && !force:
		s.zerr("Input not from terminal and -F not specified:\nremove command ignored, exiting.")
		return false
	}
	return true
}

// cmdEnd validates the resource being edited and stores it.
func (s *zcSession) cmdEnd() {
	r := s.res
	c := s.cfg
	var problems []string
	need := func(props ...string) {
		for _, p := range props {
			if r.props[p] == "" {
				problems = append(problems, fmt.Sprintf("%s: %s not specified", r.rt, p))
			}
		}
	}
	switch r.rt {
	case "fs":
		need("dir", "special", "type")
		if d := r.props["dir"]; d != "" && !strings.HasPrefix(d, "/") {
			problems = append(problems, fmt.Sprintf("%s: dir must be an absolute path", d))
		}
	case "net":
		need("physical")
		for _, p := range []string{"address", "allowed-address"} {
			if v := r.props[p]; v != "" {
				if _, ok := parseIPPrefix(v); !ok {
					problems = append(problems, fmt.Sprintf("%s: invalid IP address", v))
				}
			}
		}
		if v := r.props["defrouter"]; v != "" {
			if _, ok := parseIPPrefix(v); !ok {
				problems = append(problems, fmt.Sprintf("%s: invalid IP address", v))
			}
		}
		if p := r.props["physical"]; p != "" && c.exclusive() && !validLinkName(p) {
			problems = append(problems, fmt.Sprintf("%s: invalid physical interface name", p))
		}
	case "device":
		need("match")
	case "rctl":
		need("name")
		if n := r.props["name"]; n != "" && !strings.HasPrefix(n, "zone.") {
			problems = append(problems, fmt.Sprintf("%s: invalid rctl name; zone rctls start with 'zone.'", n))
		}
		if len(r.values) == 0 && len(problems) == 0 {
			problems = append(problems, "rctl: value not specified")
		}
	case "attr":
		need("name", "type", "value")
		problems = append(problems, attrProblems(r.props)...)
	case "dataset":
		need("name")
	case "dedicated-cpu", "capped-cpu":
		need("ncpus")
	case "capped-memory":
		if r.props["physical"] == "" && r.props["swap"] == "" && r.props["locked"] == "" {
			problems = append(problems, "No property was specified.  One of physical, swap or locked is required.")
		}
		if r.props["physical"] != "" && r.props["locked"] != "" {
			p, _ := strconv.ParseUint(r.props["physical"], 10, 64)
			l, _ := strconv.ParseUint(r.props["locked"], 10, 64)
			if p < l {
				problems = append(problems, "The locked cap must be less than or equal to the physical cap.")
			}
		}
	case "admin":
		need("user", "auths")
	}
	if len(problems) == 0 && s.resOp == "add" {
		if dup := s.duplicateOf(r); dup != "" {
			problems = append(problems, dup)
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			s.zerr("%s", p)
		}
		return
	}
	s.storeResource(r)
	s.scope, s.res = "", nil
	s.dirty = true
}

// duplicateOf reports an "already exists" conflict for a new resource.
func (s *zcSession) duplicateOf(r *zcRes) string {
	key := map[string]string{"fs": "dir", "net": "physical", "device": "match", "attr": "name", "dataset": "name", "admin": "user"}[r.rt]
	if r.rt == "rctl" {
		if s.cfg.rctl(r.props["name"]) != nil {
			return fmt.Sprintf("An rctl resource with the name '%s' already exists.", r.props["name"])
		}
		return ""
	}
	if key == "" {
		return ""
	}
	for _, x := range s.cfg.resources(r.rt) {
		if x.Props[key] == r.props[key] {
			article := "A"
			if strings.ContainsRune("aeiou", rune(r.rt[0])) {
				article = "An"
			}
			return fmt.Sprintf("%s %s resource with the %s '%s' already exists.", article, r.rt, key, r.props[key])
		}
	}
	return ""
}

// storeResource writes an edited resource into the configuration.
func (s *zcSession) storeResource(r *zcRes) {
	c := s.cfg
	switch r.rt {
	case "capped-cpu":
		f, _ := strconv.ParseFloat(r.props["ncpus"], 64)
		c.setAliasRctl("zone.cpu-cap", strconv.FormatInt(int64(f*100+0.5), 10))
		return
	case "capped-memory":
		c.CappedMemory, _ = strconv.ParseUint(r.props["physical"], 10, 64)
		for prop, rctl := range map[string]string{"swap": "zone.max-swap", "locked": "zone.max-locked-memory"} {
			if v := r.props[prop]; v != "" {
				c.setAliasRctl(rctl, v)
			} else {
				c.clearRctl(rctl)
			}
		}
		return
	case "rctl":
		nr := &Rctl{Name: r.props["name"], Values: append([]RctlValue(nil), r.values...)}
		if s.rctlSel != nil {
			*s.rctlSel = *nr
		} else {
			c.Rctls = append(c.Rctls, nr)
		}
		return
	}
	props := map[string]string{}
	for k, v := range r.props {
		if v != "" {
			props[k] = v
		}
	}
	nr := &Resource{Type: r.rt, Props: props, Options: append([]string(nil), r.options...)}
	if s.resOrig != nil {
		*s.resOrig = *nr
		return
	}
	c.Resources = append(c.Resources, nr)
}
