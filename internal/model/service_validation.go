package model

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// MaxServicePorts bounds a service's port list.
const MaxServicePorts = 100

var ianaSvcNameChars = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// validatePortName checks an IANA_SVC_NAME (RFC 6335): at most 15
// lowercase letters, digits and '-', at least one letter, no '-' at
// either end and no "--". Container port names and named targetPorts
// follow it so they can appear in SRV records.
func validatePortName(field, name string) FieldErrors {
	var errs FieldErrors
	switch {
	case len(name) > 15:
		errs.add(field, FieldInvalid, "Invalid value: %q: must be no more than 15 characters", name)
	case !ianaSvcNameChars.MatchString(name) || strings.Contains(name, "--"):
		errs.add(field, FieldInvalid, "Invalid value: %q: must contain only lowercase alphanumeric characters or '-', must not start or end with '-' and must not contain '--'", name)
	case strings.IndexFunc(name, func(r rune) bool { return r >= 'a' && r <= 'z' }) < 0:
		errs.add(field, FieldInvalid, "Invalid value: %q: must contain at least one letter (a-z)", name)
	}
	return errs
}

// validateContainerPortNames checks that named container ports are
// IANA_SVC_NAMEs and unique across the pod, so a service's named
// targetPort means one port.
func validateContainerPortNames(s *PodSpec) FieldErrors {
	var errs FieldErrors
	seen := map[string]bool{}
	for i := range s.Containers {
		for j, p := range s.Containers[i].Ports {
			if p.Name == "" {
				continue
			}
			f := fmt.Sprintf("spec.containers[%d].ports[%d].name", i, j)
			errs = append(errs, validatePortName(f, p.Name)...)
			if seen[p.Name] {
				errs.add(f, FieldDuplicate, "Duplicate value: %q", p.Name)
			}
			seen[p.Name] = true
		}
	}
	return errs
}

// DefaultService fills in what a user may leave out, as Kubernetes does.
func DefaultService(s *Service) {
	s.APIVersion, s.Kind = APIVersion, KindService
	sp := &s.Spec
	if sp.Type == "" {
		sp.Type = ServiceTypeClusterIP
	}
	if sp.SessionAffinity == "" {
		sp.SessionAffinity = AffinityNone
	}
	if sp.SessionAffinity == AffinityClientIP {
		if sp.SessionAffinityConfig == nil {
			sp.SessionAffinityConfig = &SessionAffinityConfig{}
		}
		if sp.SessionAffinityConfig.ClientIP == nil {
			sp.SessionAffinityConfig.ClientIP = &ClientIPConfig{}
		}
		if sp.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			t := DefaultClientIPTimeout
			sp.SessionAffinityConfig.ClientIP.TimeoutSeconds = &t
		}
	}
	for i := range sp.Ports {
		p := &sp.Ports[i]
		if p.Protocol == "" {
			p.Protocol = "TCP"
		}
		if p.TargetPort.IsZero() {
			p.TargetPort = IntValue(p.Port)
		}
	}
}

// ValidateService checks a defaulted service. Whether a requested
// clusterIP lies in the service CIDR and is free is the allocator's to
// say: only it knows the range and what is taken.
func ValidateService(s *Service) FieldErrors {
	errs := ValidateMeta(&s.Metadata, true)
	sp := &s.Spec
	if sp.Type != ServiceTypeClusterIP {
		errs.add("spec.type", FieldNotSupported, "Unsupported value: %q: supported values: \"ClusterIP\"", sp.Type)
	}
	headless := sp.ClusterIP == ClusterIPNone
	if sp.ClusterIP != "" && !headless {
		if a, err := netip.ParseAddr(sp.ClusterIP); err != nil || !a.Is4() {
			errs.add("spec.clusterIP", FieldInvalid, "Invalid value: %q: must be empty, 'None', or a valid IPv4 address", sp.ClusterIP)
		}
	}
	for k, v := range sp.Selector {
		f := fmt.Sprintf("spec.selector[%s]", k)
		errs = append(errs, validateKey(f, k)...)
		if len(v) > 63 || !labelValue.MatchString(v) {
			errs.add(f, FieldInvalid, "Invalid value: %q: not a valid label value", v)
		}
	}
	switch {
	case len(sp.Ports) == 0 && !headless:
		errs.add("spec.ports", FieldRequired, "Required value: a service with a clusterIP needs at least one port")
	case len(sp.Ports) > MaxServicePorts:
		errs.add("spec.ports", FieldTooLong, "Too many: %d: must have at most %d ports", len(sp.Ports), MaxServicePorts)
	}
	names := map[string]bool{}
	type portKey struct {
		port  int32
		proto string
	}
	ports := map[portKey]bool{}
	for i, p := range sp.Ports {
		f := fmt.Sprintf("spec.ports[%d]", i)
		switch {
		case p.Name == "" && len(sp.Ports) > 1:
			errs.add(f+".name", FieldRequired, "Required value: every port needs a name when a service has more than one")
		case p.Name != "":
			errs = append(errs, ValidateName(f+".name", p.Name)...)
			if names[p.Name] {
				errs.add(f+".name", FieldDuplicate, "Duplicate value: %q", p.Name)
			}
			names[p.Name] = true
		}
		errs = append(errs, validatePort(f+".port", p.Port)...)
		if !slices.Contains([]string{"TCP", "UDP"}, p.Protocol) {
			errs.add(f+".protocol", FieldNotSupported, "Unsupported value: %q: supported values: \"TCP\", \"UDP\"", p.Protocol)
		}
		k := portKey{p.Port, p.Protocol}
		if ports[k] {
			errs.add(f, FieldDuplicate, "Duplicate value: port %d/%s appears twice", p.Port, p.Protocol)
		}
		ports[k] = true
		if p.TargetPort.StrVal != "" {
			errs = append(errs, validatePortName(f+".targetPort", p.TargetPort.StrVal)...)
		} else {
			errs = append(errs, validatePort(f+".targetPort", p.TargetPort.IntVal)...)
		}
	}
	switch sp.SessionAffinity {
	case AffinityNone:
		if sp.SessionAffinityConfig != nil {
			errs.add("spec.sessionAffinityConfig", FieldForbidden, "Forbidden: must not be set when sessionAffinity is None")
		}
	case AffinityClientIP:
		if headless {
			errs.add("spec.sessionAffinity", FieldInvalid, "Invalid value: \"ClientIP\": must be None when spec.clusterIP is None")
		}
		if c := sp.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t < 1 || t > MaxClientIPTimeout {
				errs.add("spec.sessionAffinityConfig.clientIP.timeoutSeconds", FieldInvalid, "Invalid value: %d: must be greater than 0 and less than or equal to %d", t, MaxClientIPTimeout)
			}
		}
	default:
		errs.add("spec.sessionAffinity", FieldNotSupported, "Unsupported value: %q: supported values: \"ClientIP\", \"None\"", sp.SessionAffinity)
	}
	return errs
}

// ValidateServiceUpdate checks what may not change between old and s:
// the address (an empty clusterIP in s keeps the old one).
func ValidateServiceUpdate(s, old *Service) FieldErrors {
	var errs FieldErrors
	if s.Spec.ClusterIP == "" {
		s.Spec.ClusterIP = old.Spec.ClusterIP
	}
	if s.Spec.ClusterIP != old.Spec.ClusterIP {
		errs.add("spec.clusterIP", FieldInvalid, "Invalid value: %q: field is immutable", s.Spec.ClusterIP)
	}
	return append(errs, ValidateService(s)...)
}
