package sim

import (
	"strconv"
	"strings"
)

// set, clear, and add/remove of list properties: the zone's global
// properties and the properties of the resource being edited (spec §4.6).

func (s *zcSession) cmdSet(args []zcToken, term string) {
	prop, v, ok := s.propAssign(args, term)
	if !ok || !s.initialize() || s.globalReadOnly() {
		return
	}
	if s.scope != "" {
		s.setResourceProp(prop, v)
		return
	}
	s.setGlobalProp(prop, v)
}

func (s *zcSession) installedOrHigher() bool {
	return stateRank(s.zoneState()) >= stateRank(stateInstalled)
}

func (s *zcSession) setGlobalProp(prop string, v zcValue) {
	val, ok := s.simpleValue(prop, v)
	if !ok {
		return
	}
	c := s.cfg
	switch prop {
	case "zonename":
		if s.zoneState() != "" && s.zoneState() != stateConfigured {
			s.zerr("Zone %s already installed; set zonename not allowed.", s.zone)
			return
		}
		if !validZoneName(val) {
			s.zerr("%s: Bogus zone name", val)
			return
		}
		if val != s.zone && s.st.zone(val) != nil {
			s.zerr("%s: Zone name already in use", val)
			return
		}
		s.renameTo = val
	case "zonepath":
		if s.installedOrHigher() {
			s.zerr("Zone %s already installed; set zonepath not allowed.", s.zone)
			return
		}
		if !strings.HasPrefix(val, "/") || strings.Trim(val, "/") == "" {
			s.zerr("%s: zonepath must be an absolute path other than /", val)
			return
		}
		c.Zonepath = cleanZonePath(val)
	case "brand":
		if s.installedOrHigher() {
			s.zerr("Zone %s already installed; set brand not allowed.", s.zone)
			return
		}
		if !knownBrands[val] {
			s.zerr("%s: unknown brand.", val)
			return
		}
		c.Brand = val
	case "autoboot":
		if val != "true" && val != "false" {
			s.zerr("autoboot value must be 'true' or 'false'.")
			return
		}
		c.Autoboot = val == "true"
	case "ip-type":
		if val != "shared" && val != "exclusive" {
			s.zerr("ip-type value must be 'shared' or 'exclusive'.")
			return
		}
		c.IPType = val
	case "bootargs":
		c.Bootargs = val
	case "pool":
		c.Pool = val
	case "limitpriv":
		if bad := badPrivilege(val); bad != "" {
			s.zerr("%s: unknown privilege \"%s\"", "limitpriv", bad)
			return
		}
		c.Limitpriv = val
	case "scheduling-class":
		c.SchedulingClass = val
	case "hostid":
		c.Hostid = val
	case "fs-allowed":
		c.FSAllowed = val
	default:
		rctl, units, isAlias := aliasFor(prop)
		if !isAlias {
			s.zerr("%s: No such property type", prop)
			return
		}
		n, ok := parseScaledBytes(val, true)
		if !ok || (!units && strings.ContainsAny(val, "kKmMgGtT.")) {
			s.zerr("%s: Invalid argument", prop)
			return
		}
		if n < aliasLowLimit(rctl) {
			s.zerr("%s property is out of range.", prop)
			return
		}
		c.setAliasRctl(rctl, strconv.FormatUint(n, 10))
	}
	s.dirty = true
}

func cleanZonePath(p string) string {
	for len(p) > 1 && strings.HasSuffix(p, "/") {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

func (s *zcSession) cmdClear(args []zcToken, term string) {
	ws, ok := s.words(args)
	if !ok {
		return
	}
	if len(ws) != 1 {
		if len(ws) == 0 {
			s.syntaxError(term)
		} else {
			s.syntaxError(ws[1])
		}
		return
	}
	prop := ws[0]
	if !zonecfgKeywords[prop] {
		s.syntaxError(prop)
		return
	}
	if !s.initialize() || s.globalReadOnly() {
		return
	}
	if s.scope != "" {
		if !containsStr(resourceProps[s.scope], prop) {
			s.zerr("%s: No such property type", prop)
			return
		}
		delete(s.res.props, prop)
		if prop == "options" {
			s.res.options = nil
		}
		return
	}
	c := s.cfg
	switch prop {
	case "autoboot":
		c.Autoboot = false
	case "pool":
		c.Pool = ""
	case "limitpriv":
		c.Limitpriv = ""
	case "bootargs":
		c.Bootargs = ""
	case "scheduling-class":
		c.SchedulingClass = ""
	case "ip-type":
		c.IPType = "shared"
	case "hostid":
		c.Hostid = ""
	case "fs-allowed":
		c.FSAllowed = ""
	default:
		rctl, _, isAlias := aliasFor(prop)
		if !isAlias {
			s.zerr("%s: Invalid argument", prop)
			return
		}
		c.clearRctl(rctl)
	}
	s.dirty = true
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// addResourceProp is "add options X" / "add value (...)" in resource scope.
func (s *zcSession) addResourceProp(args []zcToken, term string) {
	if len(args) == 0 {
		s.syntaxError(term)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	prop := args[0].text
	v, n, bad, ok := parseValue(args[1:])
	if !ok {
		if bad == "" {
			bad = term
		}
		s.syntaxError(bad)
		return
	}
	if 1+n < len(args) {
		s.syntaxError(args[1+n].text)
		return
	}
	switch {
	case s.scope == "fs" && prop == "options":
		opts, ok := s.optionList(v)
		if !ok {
			return
		}
		s.res.options = append(s.res.options, opts...)
	case s.scope == "rctl" && prop == "value":
		vals, ok := s.rctlValues(v)
		if !ok {
			return
		}
		s.res.values = append(s.res.values, vals...)
	default:
		s.zerr("%s: No such property type", prop)
	}
}

func (s *zcSession) setResourceProp(prop string, v zcValue) {
	if !containsStr(resourceProps[s.scope], prop) {
		s.zerr("%s: No such property type", prop)
		return
	}
	if s.scope == "fs" && prop == "options" {
		opts, ok := s.optionList(v)
		if ok {
			s.res.options = opts
		}
		return
	}
	if s.scope == "rctl" && prop == "value" {
		vals, ok := s.rctlValues(v)
		if ok {
			s.res.values = vals
		}
		return
	}
	val, ok := s.simpleValue(prop, v)
	if !ok {
		return
	}
	switch {
	case s.scope == "capped-memory":
		n, ok := parseScaledBytes(val, false)
		if !ok {
			s.zerr("A non-negative number with a required scale suffix (K, M, G or T) was expected\nhere.")
			return
		}
		if prop == "physical" && n < 1<<20 {
			s.zerr("The physical cap must be at least 1M.")
			return
		}
		if prop == "swap" && n < 50<<20 {
			s.zerr("The swap cap must be at least 50M.")
			return
		}
		val = strconv.FormatUint(n, 10)
	case s.scope == "capped-cpu" && prop == "ncpus":
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || f <= 0 || strings.ContainsAny(val, "eExXnN") {
			s.zerr("%s: Invalid argument", prop)
			return
		}
	case s.scope == "dedicated-cpu" && prop == "ncpus":
		if !validNCPURange(val) {
			s.zerr("%s: Invalid argument", prop)
			return
		}
	case s.scope == "dedicated-cpu" && prop == "importance":
		if _, err := strconv.Atoi(val); err != nil {
			s.zerr("%s: Invalid argument", prop)
			return
		}
	}
	s.res.props[prop] = val
}

// removeResourceProp is "remove options X" / "remove value (...)".
func (s *zcSession) removeResourceProp(args []zcToken, term string) {
	if len(args) == 0 {
		s.syntaxError(term)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	prop := args[0].text
	v, n, bad, ok := parseValue(args[1:])
	if !ok {
		if bad == "" {
			bad = term
		}
		s.syntaxError(bad)
		return
	}
	if 1+n < len(args) {
		s.syntaxError(args[1+n].text)
		return
	}
	switch {
	case s.scope == "fs" && prop == "options":
		opts, ok := s.optionList(v)
		if !ok {
			return
		}
		for _, o := range opts {
			idx := indexOf(s.res.options, o)
			if idx < 0 {
				s.zerr("%s: No such property value", o)
				return
			}
			s.res.options = append(s.res.options[:idx], s.res.options[idx+1:]...)
		}
	case s.scope == "rctl" && prop == "value":
		vals, ok := s.rctlValues(v)
		if !ok {
			return
		}
		for _, rv := range vals {
			found := false
			for i, x := range s.res.values {
				if x == rv {
					s.res.values = append(s.res.values[:i], s.res.values[i+1:]...)
					found = true
					break
				}
			}
			if !found {
				s.zerr("%s: No such property value", rv)
				return
			}
		}
	default:
		s.zerr("%s: No such property type", prop)
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
