package illumos

import (
	"context"
	"fmt"
	"strings"
)

// The SMF commands inside the zone; they run through zlogin.
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

// ParseSvcs parses `svcs -H -o state,fmri`: blank-separated columns, the
// state possibly marked with a trailing '*' while it changes.
func ParseSvcs(out string) ([]ServiceStatus, error) {
	var sts []ServiceStatus
	for _, line := range nonEmptyLines(out) {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%d fields, want 2: %q", len(f), line)
		}
		st := ServiceStatus{State: f[0], FMRI: f[1]}
		if strings.HasSuffix(st.State, "*") {
			st.State = strings.TrimSuffix(st.State, "*")
			st.Transitioning = true
		}
		if st.State == "" || !strings.Contains(st.FMRI, ":") {
			return nil, fmt.Errorf("not a service line: %q", line)
		}
		sts = append(sts, st)
	}
	return sts, nil
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
