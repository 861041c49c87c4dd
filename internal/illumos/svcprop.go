package illumos

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

const svcpropPath = "/usr/bin/svcprop"

// ServiceEnv is the environment SMF gives the methods of a service
// instance of the zone, as RenderManifest writes it: the manifest's
// service-level method_context, which svccfg import stores in the
// property group method_context (`svcprop -p method_context/environment
// FMRI`; the group's name for a service-level context is UNCONFIRMED,
// spec §15.5). An instance without one has an empty environment. The
// values may be secret: they are returned, never put in an error.
func (z InZone) ServiceEnv(ctx context.Context, fmri string) ([]EnvVar, error) {
	const op = "svcprop"
	if !ValidFMRI(fmri) {
		return nil, invalidf(op, z.Zone+":"+fmri, "invalid FMRI %q", fmri)
	}
	res, err := z.run(ctx, op, fmri, []string{inZone(svcpropPath), "-p", "method_context/environment", fmri}, nil)
	if err != nil {
		var ee *ExecError
		if errors.As(err, &ee) {
			ee.Stdout = "" // what it printed before it failed may be secret
			if strings.Contains(ee.Stderr, "Couldn't find property") {
				return nil, nil
			}
		}
		return nil, err
	}
	env, err := ParseServiceEnv(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, z.Zone, err)
	}
	return env, nil
}

// ServiceUser is the zone's user the methods of a service instance run as
// (`svcprop -p method_context/user FMRI`, RenderManifest's
// method_credential); empty: the zone's root.
func (z InZone) ServiceUser(ctx context.Context, fmri string) (string, error) {
	const op = "svcprop"
	if !ValidFMRI(fmri) {
		return "", invalidf(op, z.Zone+":"+fmri, "invalid FMRI %q", fmri)
	}
	res, err := z.run(ctx, op, fmri, []string{inZone(svcpropPath), "-p", "method_context/user", fmri}, nil)
	if err != nil {
		var ee *ExecError
		if errors.As(err, &ee) && strings.Contains(ee.Stderr, "Couldn't find property") {
			return "", nil
		}
		return "", err
	}
	values := ParseSvcpropValues(string(res.Stdout))
	if len(values) != 1 {
		return "", nil
	}
	return values[0], nil
}

// ParseServiceEnv parses svcprop's line of environment values
// (NAME=VALUE each) into variables, in order.
func ParseServiceEnv(out string) ([]EnvVar, error) {
	values := ParseSvcpropValues(out)
	env := make([]EnvVar, 0, len(values))
	for _, v := range values {
		name, value, ok := strings.Cut(v, "=")
		if !ok || !validEnvName(name) {
			// Not the value itself: it may be secret.
			return nil, fmt.Errorf("an environment entry of %d bytes is not NAME=VALUE", len(v))
		}
		env = append(env, EnvVar{Name: name, Value: value})
	}
	return env, nil
}

// ParseSvcpropValues splits the line svcprop prints for one property into
// its values: separated by single spaces, each escaped with a backslash
// before special characters (blanks and newlines among them), an empty
// value printed as "" (spec §15.5). The line's final newline is
// svcprop's, not a value's.
func ParseSvcpropValues(out string) []string {
	var values []string
	var b strings.Builder
	escaped := false // the word holds an escaped character: never ""
	flush := func() {
		v := b.String()
		if v == `""` && !escaped {
			v = ""
		}
		values = append(values, v)
		b.Reset()
		escaped = false
	}
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case c == '\\' && i+1 < len(out):
			i++
			b.WriteByte(out[i])
			escaped = true
		case c == ' ':
			flush()
		case c == '\n' && i == len(out)-1:
			// svcprop's own end of line
		default:
			b.WriteByte(c)
		}
	}
	if b.Len() > 0 || len(values) > 0 {
		flush()
	}
	return values
}
