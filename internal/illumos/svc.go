package illumos

import (
	"context"
	"fmt"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos/names"
)

// The SMF commands. They run inside a zone through zlogin, except svcs -Z,
// which the global zone runs for every zone at once.
const (
	svcadmPath = "/usr/sbin/svcadm"
	svccfgPath = "/usr/sbin/svccfg"
	svcsPath   = "/usr/bin/svcs"
)

// ServiceStatus is one row of `svcs -H -o state,fmri`.
type ServiceStatus struct {
	FMRI  string
	State string // online, offline, disabled, maintenance, degraded, uninitialized, legacy_run
	// Transitioning is set when svcs marks the state with '*': the service
	// is on its way to another state.
	Transitioning bool
}

// ZoneServiceStatus is one row of `svcs -Z -H -o zone,state,fmri`: a
// service instance and the zone it runs in.
type ZoneServiceStatus struct {
	Zone string // "global" for the global zone's own services
	ServiceStatus
}

// ImportManifest imports an SMF manifest into the zone's repository
// (`svccfg import /dev/stdin`, the manifest on stdin). Importing the same
// manifest again updates the service in place.
func (z InZone) ImportManifest(ctx context.Context, manifest []byte) error {
	const op = "svccfg import"
	if len(manifest) == 0 {
		return invalidf(op, z.Zone, "empty manifest")
	}
	_, err := z.run(ctx, op, "", []string{inZone(svccfgPath), "import", "/dev/stdin"}, manifest)
	return err
}

// EnableService enables a service instance (persistently).
func (z InZone) EnableService(ctx context.Context, fmri string) error {
	return z.svcadm(ctx, "enable", fmri)
}

// DisableService disables a service instance (persistently); SMF runs its
// stop method.
func (z InZone) DisableService(ctx context.Context, fmri string) error {
	return z.svcadm(ctx, "disable", fmri)
}

// RestartService restarts an online service instance.
func (z InZone) RestartService(ctx context.Context, fmri string) error {
	return z.svcadm(ctx, "restart", fmri)
}

// ClearService takes an instance out of the maintenance state, so SMF
// tries to start it again.
func (z InZone) ClearService(ctx context.Context, fmri string) error {
	return z.svcadm(ctx, "clear", fmri)
}

func (z InZone) svcadm(ctx context.Context, verb, fmri string) error {
	op := "svcadm " + verb
	if !ValidFMRI(fmri) {
		return invalidf(op, z.Zone+":"+fmri, "invalid FMRI %q", fmri)
	}
	_, err := z.run(ctx, op, fmri, []string{inZone(svcadmPath), verb, fmri}, nil)
	return err
}

// Services returns the state of the given service instances (all of the
// zone's when none are given). A pattern that matches nothing gives
// ErrNotFound.
func (z InZone) Services(ctx context.Context, fmris ...string) ([]ServiceStatus, error) {
	const op = "svcs"
	for _, f := range fmris {
		if !ValidFMRI(f) {
			return nil, invalidf(op, z.Zone+":"+f, "invalid FMRI %q", f)
		}
	}
	argv := append([]string{inZone(svcsPath), "-H", "-o", "state,fmri"}, fmris...)
	res, err := z.run(ctx, op, strings.Join(fmris, " "), argv, nil)
	if err != nil {
		return nil, err
	}
	st, err := ParseSvcs(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, z.Zone, err)
	}
	return st, nil
}

// AllZoneServices returns the service instances of every running zone,
// the global zone included, from one svcs run in the global zone (`svcs
// -Z -H -o zone,state,fmri`): one command per interval however many zones
// there are. Zones that are not running are absent; a zone booting or
// halting may be absent too (svcs warns about it on stderr and succeeds).
func (h Host) AllZoneServices(ctx context.Context) ([]ZoneServiceStatus, error) {
	const op = "svcs -Z"
	res, err := run(ctx, h.Runner, op, "", Cmd{Path: svcsPath, Args: []string{"-Z", "-H", "-o", "zone,state,fmri"}})
	if err != nil {
		return nil, err
	}
	sts, err := ParseAllZoneServices(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, "", err)
	}
	return sts, nil
}

// ParseSvcs parses `svcs -H -o state,fmri`: blank-separated columns, the
// state possibly marked with a trailing '*' while it changes. Legacy rc
// scripts (lrc: FMRIs, state legacy_run) are kept.
func ParseSvcs(out string) ([]ServiceStatus, error) {
	var sts []ServiceStatus
	for _, line := range nonEmptyLines(out) {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%d fields, want 2: %q", len(f), line)
		}
		st, err := serviceStatus(f[0], f[1], line)
		if err != nil {
			return nil, err
		}
		sts = append(sts, st)
	}
	return sts, nil
}

// ParseAllZoneServices parses `svcs -Z -H -o zone,state,fmri`, read like
// ParseSvcs with the zone name first.
func ParseAllZoneServices(out string) ([]ZoneServiceStatus, error) {
	var sts []ZoneServiceStatus
	for _, line := range nonEmptyLines(out) {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%d fields, want 3: %q", len(f), line)
		}
		if f[0] != "global" && !names.ValidZoneName(f[0]) {
			return nil, fmt.Errorf("bad zone name: %q", line)
		}
		st, err := serviceStatus(f[1], f[2], line)
		if err != nil {
			return nil, err
		}
		sts = append(sts, ZoneServiceStatus{Zone: f[0], ServiceStatus: st})
	}
	return sts, nil
}

// serviceStatus reads the STATE and FMRI columns of one svcs line,
// moving the transition marker '*' into Transitioning.
func serviceStatus(state, fmri, line string) (ServiceStatus, error) {
	st := ServiceStatus{State: state, FMRI: fmri}
	if strings.HasSuffix(st.State, "*") {
		st.State = strings.TrimSuffix(st.State, "*")
		st.Transitioning = true
	}
	if !validStateWord(st.State) || !strings.Contains(st.FMRI, ":") {
		return ServiceStatus{}, fmt.Errorf("not a service line: %q", line)
	}
	return st, nil
}

// validStateWord accepts what svcs prints for restarter/state: a lowercase
// word such as online or legacy_run. Unknown words are kept (svcs prints
// them as they are), but a second '*' or any other mark is not a state.
func validStateWord(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// ValidFMRI accepts service FMRIs and abbreviations svcadm and svcs take:
// an optional "svc:/" scheme, a service name of '/'-separated components
// (each a letter, then letters, digits, '-', '_', '.', ','), and an
// optional ":instance".
func ValidFMRI(s string) bool {
	s = strings.TrimPrefix(s, "svc:/")
	name, inst, hasInst := strings.Cut(s, ":")
	if hasInst && !validSMFComponent(inst) {
		return false
	}
	return ValidServiceName(name)
}

// ValidServiceName reports whether name is an SMF service name such as
// "zonewright/pod/web".
func ValidServiceName(name string) bool {
	if name == "" || len(name) > 200 {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if !validSMFComponent(c) {
			return false
		}
	}
	return true
}

func validSMFComponent(c string) bool {
	if c == "" || !isLetter(c[0]) {
		return false
	}
	for i := 0; i < len(c); i++ {
		if b := c[i]; !isAlnum(b) && b != '-' && b != '_' && b != '.' && b != ',' {
			return false
		}
	}
	return true
}
