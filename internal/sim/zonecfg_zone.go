package sim

import (
	"fmt"
	"os"
	"strings"
)

// Commands on the whole configuration: create, delete, revert, info,
// export and commit (spec §4.3, §4.4).

func (s *zcSession) cmdCreate(args []zcToken) {
	opts, ok := s.flags("create", args, "a:bFt:")
	if !ok || s.globalReadOnly() {
		return
	}
	_, force := opts['F']
	if _, ok := opts['a']; ok {
		s.zerr("create -a (from a detached zonepath) is not supported by illumos-sim")
		return
	}
	tmpl := "SUNWdefault"
	if _, ok := opts['b']; ok {
		tmpl = "SUNWblank"
	}
	if t, ok := opts['t']; ok {
		tmpl = t
	}
	if stateRank(s.zoneState()) >= stateRank(stateInstalled) {
		s.zerr("Zone %s already installed; create not allowed.", s.zone)
		return
	}
	if s.zoneState() != "" || s.cfg != nil {
		if !force {
			s.zerr("Zone exists, input not from terminal and -F not specified:\ncreate command ignored, exiting.")
			s.abort = true
			return
		}
		s.inv.outf("Zone %s already exists; overwriting.", s.zone)
	}
	cfg, ok := templateConfig(tmpl, s.inv.h.facts)
	if !ok {
		s.zerr("%s: No such zone configured", tmpl)
		return
	}
	s.cfg = cfg
	s.dirty = true
}

// templateConfig is the configuration a create template starts from. On
// OmniOS the default template is exclusive-IP; -b is blank (shared-IP, the
// libzonecfg default); -t BRAND starts an exclusive-IP zone of that brand.
func templateConfig(tmpl string, f *Facts) (*ZoneConfig, bool) {
	switch {
	case tmpl == "SUNWblank":
		return &ZoneConfig{Brand: f.GlobalBrand, IPType: "shared"}, true
	case tmpl == "SUNWdefault":
		return &ZoneConfig{Brand: f.GlobalBrand, IPType: "exclusive"}, true
	case knownBrands[tmpl]:
		return &ZoneConfig{Brand: tmpl, IPType: "exclusive"}, true
	}
	return nil, false
}

func (s *zcSession) cmdRevert(args []zcToken) {
	opts, ok := s.flags("revert", args, "F")
	if !ok {
		return
	}
	if _, force := opts['F']; !force {
		s.zerr("Input not from terminal and -F not specified:\nrevert command ignored, exiting.")
		s.abort = true
		return
	}
	z := s.st.zone(s.zone)
	s.dirty, s.renameTo = false, ""
	if z == nil {
		s.cfg = nil
		s.zerr("%s: no such saved zone to revert to.", s.zone)
		return
	}
	s.cfg = z.Config.clone()
}

func (s *zcSession) cmdDelete(args []zcToken) {
	opts, ok := s.flags("delete", args, "F")
	if !ok || s.globalReadOnly() {
		return
	}
	_, force := opts['F']
	z := s.st.zone(s.zone)
	if z == nil {
		if s.cfg != nil {
			// Only an uncommitted configuration exists: drop it.
			s.cfg, s.dirty = nil, false
			return
		}
		s.zerr("%s: No such zone configured", s.zone)
		return
	}
	if !force {
		if stateRank(z.State) >= stateRank(stateIncomplete) {
			s.zerr("Zone %s not in %s state; %s not allowed.  Use -F to force %s.",
				s.zone, stateConfigured, "delete", "delete")
			return
		}
		s.zerr("Input not from terminal and -F not specified:\ndelete command ignored, exiting.")
		s.abort = true
		return
	}
	if stateRank(z.State) >= stateRank(stateReady) {
		s.zerr("%s: Zone state is invalid for the requested operation", s.zone)
		return
	}
	s.st.removeZone(s.zone)
	s.changed = true
	s.cfg, s.dirty, s.renameTo = nil, false, ""
}

func (s *zcSession) cmdInfo(args []zcToken, term string) {
	if !s.initialize() {
		return
	}
	w := s.inv.stdout
	if s.scope != "" {
		writeResource(w, s.res)
		return
	}
	name := s.zone
	if s.renameTo != "" {
		name = s.renameTo
	}
	if len(args) == 0 {
		writeInfo(w, name, s.cfg)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	what := args[0].text
	m, ok := s.matchPairs(args[1:], term)
	if !ok {
		return
	}
	if _, isRes := resourceProps[what]; isRes {
		writeResourcesOf(w, s.cfg, what, m)
		return
	}
	if !writeGlobalProp(w, name, s.cfg, what) {
		s.zerr("%s: No such property type", what)
	}
}

func (s *zcSession) cmdExport(args []zcToken) {
	opts, ok := s.flags("export", args, "f:")
	if !ok || !s.initialize() {
		return
	}
	var b strings.Builder
	writeExport(&b, s.cfg, s.inv.h.facts.GlobalBrand)
	if f, ok := opts['f']; ok {
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			s.zerr("opening file %s: %s", f, strerror(err))
		}
		return
	}
	fmt.Fprint(s.inv.stdout, b.String())
}

// commit verifies the working configuration and saves it into the state.
func (s *zcSession) commit() {
	if problems := verifyZoneConfig(s.cfg); len(problems) > 0 {
		for _, p := range problems {
			s.zerr("%s", p)
		}
		s.zerr("Zone %s failed to verify", s.zone)
		return
	}
	z := s.st.zone(s.zone)
	if z == nil {
		z = &Zone{Name: s.zone, State: stateConfigured, ID: -1}
		s.st.addZone(z)
	}
	z.Config = s.cfg.clone()
	if s.renameTo != "" && s.renameTo != s.zone {
		z.Name = s.renameTo
		s.zone = s.renameTo
	}
	s.renameTo = ""
	s.dirty = false
	s.changed = true
}
