package sim

import (
	"strings"
)

// svcprop [-z ZONE] -p PG/PROP FMRI: the values of one property of one
// instance, on one line, separated by single spaces, each escaped for
// the shell as svcprop.c does (spec §15.5). The simulator keeps only the
// manifest's method settings, so it answers the properties those give:
// start/exec, stop/exec, startd/duration, and method_context/environment,
// working_directory, user and group, where svccfg puts a service's or
// an instance's method_context (the simulator keeps the context composed
// with a method's own, which zonewright's manifests do not give); any
// other is missing, as an unset one would be.

const svcpropUsage = "Usage: svcprop [-fqtv] [-C | -c | -s snapshot] [-z zone] [-p [name/]name]... \n         {FMRI | pattern}..."

func runSvcprop(inv *invocation) int {
	opts, rest, bad, ok := getopt(inv.args, "fqtvCcs:z:p:w")
	if !ok {
		inv.errf("svcprop: illegal option -- %c", bad)
		inv.errf("%s", svcpropUsage)
		return 2
	}
	zone, prop := "", ""
	quiet := false
	for _, o := range opts {
		switch o.c {
		case 'z':
			if inv.zone != "global" {
				inv.errf("svcprop: -z may only be used from the global zone")
				return 1
			}
			zone = o.val
		case 'p':
			if prop != "" {
				inv.errf("svcprop: illumos-sim answers one -p only")
				return 2
			}
			prop = o.val
		case 'q':
			quiet = true
		case 'f', 't', 'v', 'C', 'c', 's', 'w':
			inv.errf("svcprop: illumos-sim does not support -%c", o.c)
			return 2
		}
	}
	if len(rest) != 1 || !strings.Contains(prop, "/") {
		inv.errf("%s", svcpropUsage)
		return 2
	}
	fmri := rest[0]
	if zone == "" {
		zone = inv.zone
	}
	z, err := inv.h.viewZone(zone)
	if err != nil {
		return inv.stateErr(err)
	}
	if z == nil && zone != inv.zone {
		inv.errf("svcprop: invalid zone '%s'", zone)
		return 1
	}
	if z, ok = smfZone(inv, z); !ok {
		return 1
	}
	var svc *Service
	for _, s := range z.Services {
		if matchFMRI(fmri, s.FMRI) {
			svc = s
			break
		}
	}
	if svc == nil {
		// Wording UNCONFIRMED (spec §15.5).
		inv.errf("svcprop: Pattern '%s' doesn't match any entities", fmri)
		return 1
	}
	values, found := svcProperty(svc.Manifest, prop)
	if !found {
		if !quiet {
			pg, _, _ := strings.Cut(prop, "/")
			if !svcHasGroup(svc.Manifest, pg) {
				inv.errf("svcprop: Couldn't find property group `%s' for instance `%s'.", pg, svc.FMRI)
			} else {
				inv.errf("svcprop: Couldn't find property `%s' for instance `%s'.", prop, svc.FMRI)
			}
		}
		return 1
	}
	if quiet {
		return 0
	}
	escaped := make([]string, len(values))
	for i, v := range values {
		escaped[i] = svcpropEscape(v)
	}
	inv.outf("%s", strings.Join(escaped, " "))
	return 0
}

// svcProperty is the value list of a property the manifest gives.
func svcProperty(def *SvcDef, prop string) ([]string, bool) {
	if def == nil {
		return nil, false
	}
	switch prop {
	case "start/exec":
		return []string{def.Start.Exec}, true
	case "method_context/environment":
		if len(def.Env) == 0 {
			return nil, false
		}
		return def.Env, true
	case "method_context/working_directory":
		if def.WorkDir == "" {
			return nil, false
		}
		return []string{def.WorkDir}, true
	case "method_context/user":
		if def.User == "" {
			return nil, false
		}
		return []string{def.User}, true
	case "method_context/group":
		if def.Group == "" {
			return nil, false
		}
		return []string{def.Group}, true
	case "stop/exec":
		if def.Stop == nil {
			return nil, false
		}
		return []string{def.Stop.Exec}, true
	case "startd/duration":
		return []string{def.Duration}, true
	}
	return nil, false
}

func svcHasGroup(def *SvcDef, pg string) bool {
	switch pg {
	case "start", "startd", "general", "restarter":
		return def != nil
	case "method_context":
		return def != nil && (len(def.Env) > 0 || def.WorkDir != "" || def.User != "" || def.Group != "")
	case "stop":
		return def != nil && def.Stop != nil
	}
	return false
}

// svcpropEscape escapes a value as svcprop prints it: an empty string is
// "", and a backslash goes before each blank, tab, newline and each of
// ;&()|^<>\"'` (spec §15.5).
func svcpropEscape(v string) string {
	if v == "" {
		return `""`
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if strings.IndexByte(" \t\n;&()|^<>\\\"'`", c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
