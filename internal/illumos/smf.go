package illumos

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Service is an SMF service zonewright runs in a zone: a pod's process.
type Service struct {
	// Name is the service name, e.g. "zonewright/pod/web"; the manifest
	// creates its instance "default" (see FMRI).
	Name string
	// Start is the argv of the process. It becomes the start method, each
	// word shell-quoted (svc.startd runs methods with /bin/sh -c).
	Start []string
	// Stop is the argv of the stop method; empty means ":kill" (SIGTERM
	// to every process of the service's contract).
	Stop []string
	// Env is the methods' environment, in order.
	Env []EnvVar
	// WorkingDir is the methods' working directory (absolute); empty
	// leaves SMF's default.
	WorkingDir string
	// User and Group run the methods as someone other than root.
	User, Group string
	// StartTimeout and StopTimeout bound the methods; zero means 60s.
	StartTimeout, StopTimeout time.Duration
	// Duration is the startd duration: "child" (default: Start is the
	// service's long-running process in the foreground), "contract" (Start
	// daemonises) or "transient" (Start runs once).
	Duration string
	// Enabled creates the instance enabled, so it starts on import.
	Enabled bool
}

// EnvVar is one environment variable of a method.
type EnvVar struct {
	Name  string
	Value string
}

// FMRI is the instance the manifest creates: svc:/<Name>:default.
func (s Service) FMRI() string { return "svc:/" + s.Name + ":default" }

// RenderManifest renders s as an SMF service manifest. Every attribute
// value is XML-escaped; the exec strings are shell-quoted argv with '%'
// doubled (svc.startd expands %-tokens before the shell sees the string).
// Values XML cannot carry (control characters other than tab, newline and
// carriage return; invalid UTF-8) are refused.
func RenderManifest(s Service) ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	start, err := methodExec(s.Start)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	stop := ":kill"
	if len(s.Stop) > 0 {
		if stop, err = methodExec(s.Stop); err != nil {
			return nil, fmt.Errorf("stop: %w", err)
		}
	}
	duration := s.Duration
	if duration == "" {
		duration = "child"
	}

	var b bytes.Buffer
	b.WriteString("<?xml version='1.0'?>\n")
	b.WriteString("<!DOCTYPE service_bundle SYSTEM '/usr/share/lib/xml/dtd/service_bundle.dtd.1'>\n")
	fmt.Fprintf(&b, "<service_bundle type='manifest' name=%s>\n", xmlAttr(s.Name))
	fmt.Fprintf(&b, "  <service name=%s type='service' version='1'>\n", xmlAttr(s.Name))
	fmt.Fprintf(&b, "    <create_default_instance enabled=%s/>\n", xmlAttr(strconv.FormatBool(s.Enabled)))
	b.WriteString("    <single_instance/>\n")
	for _, d := range []struct{ name, fmri string }{
		{"network", "svc:/milestone/network:default"},
		{"filesystem", "svc:/system/filesystem/local"},
	} {
		fmt.Fprintf(&b, "    <dependency name='%s' grouping='require_all' restart_on='error' type='service'>\n", d.name)
		fmt.Fprintf(&b, "      <service_fmri value='%s'/>\n", d.fmri)
		b.WriteString("    </dependency>\n")
	}
	if s.WorkingDir != "" || s.User != "" || s.Group != "" || len(s.Env) > 0 {
		b.WriteString("    <method_context")
		if s.WorkingDir != "" {
			fmt.Fprintf(&b, " working_directory=%s", xmlAttr(s.WorkingDir))
		}
		b.WriteString(">\n")
		if s.User != "" || s.Group != "" {
			b.WriteString("      <method_credential")
			if s.User != "" {
				fmt.Fprintf(&b, " user=%s", xmlAttr(s.User))
			}
			if s.Group != "" {
				fmt.Fprintf(&b, " group=%s", xmlAttr(s.Group))
			}
			b.WriteString("/>\n")
		}
		if len(s.Env) > 0 {
			b.WriteString("      <method_environment>\n")
			for _, e := range s.Env {
				fmt.Fprintf(&b, "        <envvar name=%s value=%s/>\n", xmlAttr(e.Name), xmlAttr(e.Value))
			}
			b.WriteString("      </method_environment>\n")
		}
		b.WriteString("    </method_context>\n")
	}
	fmt.Fprintf(&b, "    <exec_method type='method' name='start' exec=%s timeout_seconds='%d'/>\n", xmlAttr(start), seconds(s.StartTimeout))
	fmt.Fprintf(&b, "    <exec_method type='method' name='stop' exec=%s timeout_seconds='%d'/>\n", xmlAttr(stop), seconds(s.StopTimeout))
	b.WriteString("    <property_group name='startd' type='framework'>\n")
	fmt.Fprintf(&b, "      <propval name='duration' type='astring' value=%s/>\n", xmlAttr(duration))
	b.WriteString("    </property_group>\n")
	b.WriteString("    <stability value='Unstable'/>\n")
	b.WriteString("  </service>\n")
	b.WriteString("</service_bundle>\n")
	return b.Bytes(), nil
}

func (s Service) validate() error {
	if !ValidServiceName(s.Name) {
		return fmt.Errorf("invalid service name %q", s.Name)
	}
	if len(s.Start) == 0 || s.Start[0] == "" {
		return fmt.Errorf("service %s: empty start command", s.Name)
	}
	switch s.Duration {
	case "", "child", "contract", "transient":
	default:
		return fmt.Errorf("service %s: duration %q must be child, contract or transient", s.Name, s.Duration)
	}
	if s.WorkingDir != "" && !path.IsAbs(s.WorkingDir) {
		return fmt.Errorf("service %s: working directory %q must be absolute", s.Name, s.WorkingDir)
	}
	if s.StartTimeout < 0 || s.StopTimeout < 0 {
		return fmt.Errorf("service %s: negative timeout", s.Name)
	}
	seen := map[string]bool{}
	for _, e := range s.Env {
		if !validEnvName(e.Name) {
			return fmt.Errorf("service %s: invalid environment variable name %q", s.Name, e.Name)
		}
		if seen[e.Name] {
			return fmt.Errorf("service %s: environment variable %s given twice", s.Name, e.Name)
		}
		seen[e.Name] = true
	}
	values := []string{s.WorkingDir, s.User, s.Group}
	values = append(values, s.Start...)
	values = append(values, s.Stop...)
	for _, e := range s.Env {
		values = append(values, e.Value)
	}
	for _, v := range values {
		if err := xmlCarries(v); err != nil {
			return fmt.Errorf("service %s: %w", s.Name, err)
		}
	}
	return nil
}

// methodExec renders argv as an SMF exec string.
func methodExec(argv []string) (string, error) {
	s, err := ShellJoin(argv)
	if err != nil {
		return "", err
	}
	return strings.ReplaceAll(s, "%", "%%"), nil
}

func seconds(d time.Duration) int64 {
	if d == 0 {
		return 60
	}
	if n := int64((d + time.Second - 1) / time.Second); n > 0 {
		return n
	}
	return 1
}

func validEnvName(s string) bool {
	if s == "" || isDigit(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// xmlCarries refuses text XML 1.0 cannot represent, even escaped.
func xmlCarries(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("value %q is not valid UTF-8", s)
	}
	for _, r := range s {
		ok := r == '\t' || r == '\n' || r == '\r' ||
			(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
		if !ok {
			return fmt.Errorf("value %q contains character %U, which XML cannot carry", s, r)
		}
	}
	return nil
}

// xmlAttr renders s as a single-quoted XML attribute value.
func xmlAttr(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	b.WriteByte('\'')
	return b.String()
}
