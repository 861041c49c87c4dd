package model

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// FieldError is one reason an object is invalid, tied to its field path.
type FieldError struct {
	Field  string // e.g. spec.containers[0].resources.limits.cpu
	Type   string // Kubernetes cause reason: FieldValueRequired, FieldValueInvalid, …
	Detail string
}

// Cause types, as Kubernetes names them.
const (
	FieldRequired     = "FieldValueRequired"
	FieldInvalid      = "FieldValueInvalid"
	FieldNotSupported = "FieldValueNotSupported"
	FieldDuplicate    = "FieldValueDuplicate"
	FieldForbidden    = "FieldValueForbidden"
	FieldTooLong      = "FieldValueTooLong"
	FieldNotFound     = "FieldValueNotFound"
)

func (e FieldError) Error() string { return e.Field + ": " + e.Detail }

// FieldErrors collects every problem with an object, not just the first.
type FieldErrors []FieldError

func (es FieldErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, ", ")
}

func (es *FieldErrors) add(field, typ, format string, args ...any) {
	*es = append(*es, FieldError{Field: field, Type: typ, Detail: fmt.Sprintf(format, args...)})
}

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	labelValue       = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	labelName        = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	// envVarName is narrower than Kubernetes' rule ([-._a-zA-Z][-._a-zA-Z0-9]*):
	// an SMF method environment takes C identifiers only, so a name such as
	// a-b could be stored but never started.
	envVarName = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
)

// ValidateName checks a DNS-1123 label, the rule for every object name.
func ValidateName(field, name string) FieldErrors {
	var errs FieldErrors
	switch {
	case name == "":
		errs.add(field, FieldRequired, "Required value: name is required")
	case len(name) > 63:
		errs.add(field, FieldTooLong, "Invalid value: %q: must be no more than 63 characters", name)
	case !dns1123Label.MatchString(name):
		errs.add(field, FieldInvalid, "Invalid value: %q: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character", name)
	}
	return errs
}

// validateKey checks a label or annotation key: an optional DNS
// subdomain prefix and a name of at most 63 characters.
func validateKey(field, key string) FieldErrors {
	var errs FieldErrors
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix && (len(prefix) > 253 || !dns1123Subdomain.MatchString(prefix)) {
		errs.add(field, FieldInvalid, "Invalid value: %q: prefix part must be a lowercase RFC 1123 subdomain", key)
	}
	if len(name) > 63 || !labelName.MatchString(name) {
		errs.add(field, FieldInvalid, "Invalid value: %q: name part must consist of at most 63 alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", key)
	}
	return errs
}

// ValidateMeta checks the metadata users may set.
func ValidateMeta(m *ObjectMeta, namespaced bool) FieldErrors {
	errs := ValidateName("metadata.name", m.Name)
	if namespaced {
		errs = append(errs, ValidateName("metadata.namespace", m.Namespace)...)
	}
	for k, v := range m.Labels {
		f := fmt.Sprintf("metadata.labels[%s]", k)
		errs = append(errs, validateKey(f, k)...)
		if len(v) > 63 || !labelValue.MatchString(v) {
			errs.add(f, FieldInvalid, "Invalid value: %q: a label value must be at most 63 characters of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric", v)
		}
	}
	total := 0
	for k, v := range m.Annotations {
		errs = append(errs, validateKey(fmt.Sprintf("metadata.annotations[%s]", k), k)...)
		total += len(k) + len(v)
	}
	if total > 256*1024 {
		errs.add("metadata.annotations", FieldTooLong, "Too long: annotations may not exceed 262144 bytes in total")
	}
	return errs
}

// DefaultPod fills in what a user may leave out, as Kubernetes does.
func DefaultPod(p *Pod) {
	p.APIVersion, p.Kind = APIVersion, KindPod
	if p.Spec.RuntimeClassName == "" {
		p.Spec.RuntimeClassName = BrandSparse
	}
	if p.Spec.RestartPolicy == "" {
		p.Spec.RestartPolicy = RestartAlways
	}
	if p.Spec.TerminationGracePeriodSeconds == nil {
		g := DefaultTerminationGracePeriodSeconds
		p.Spec.TerminationGracePeriodSeconds = &g
	}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		if c.ImagePullPolicy == "" && IsRegistryReference(c.Image) {
			c.ImagePullPolicy = PullIfNotPresent
			if latestTag(c.Image) {
				c.ImagePullPolicy = PullAlways
			}
		}
		for j := range c.Ports {
			if c.Ports[j].Protocol == "" {
				c.Ports[j].Protocol = "TCP"
			}
		}
		for _, pr := range []*Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			defaultProbe(pr)
		}
	}
}

func defaultProbe(p *Probe) {
	if p == nil {
		return
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		if p.HTTPGet.Path == "" {
			p.HTTPGet.Path = "/"
		}
		if p.HTTPGet.Scheme == "" {
			p.HTTPGet.Scheme = "HTTP"
		}
	}
}

// ValidatePod checks a defaulted pod and returns every problem found.
func ValidatePod(p *Pod) FieldErrors {
	errs := ValidateMeta(&p.Metadata, true)
	errs = append(errs, validateZoneLimitAnnotations(&p.Metadata)...)
	s := &p.Spec
	errs = append(errs, validateContainers(s)...)
	errs = append(errs, validateContainerPortNames(s)...)
	errs = append(errs, validateVolumes(s)...)
	for i, ps := range s.ImagePullSecrets {
		errs = append(errs, ValidateName(fmt.Sprintf("spec.imagePullSecrets[%d].name", i), ps.Name)...)
	}
	if !slices.Contains(Brands, s.RuntimeClassName) {
		errs.add("spec.runtimeClassName", FieldNotSupported, "Unsupported value: %q: supported values: %q", s.RuntimeClassName, Brands)
	}
	if !slices.Contains([]string{RestartAlways, RestartOnFailure, RestartNever}, s.RestartPolicy) {
		errs.add("spec.restartPolicy", FieldNotSupported, "Unsupported value: %q: supported values: \"Always\", \"OnFailure\", \"Never\"", s.RestartPolicy)
	}
	if s.DNSPolicy != "" && s.DNSPolicy != DNSClusterFirst {
		errs.add("spec.dnsPolicy", FieldNotSupported, "Unsupported value: %q: supported values: %q (a zone resolves through the cluster DNS)", s.DNSPolicy, DNSClusterFirst)
	}
	if g := s.TerminationGracePeriodSeconds; g != nil {
		errs = append(errs, ValidateGracePeriod("spec.terminationGracePeriodSeconds", *g)...)
	}
	if s.NodeName != "" {
		errs = append(errs, ValidateName("spec.nodeName", s.NodeName)...)
	}
	if s.Hostname != "" {
		errs = append(errs, ValidateName("spec.hostname", s.Hostname)...)
	}
	if s.Subdomain != "" {
		errs = append(errs, ValidateName("spec.subdomain", s.Subdomain)...)
	}
	for k, v := range s.NodeSelector {
		f := fmt.Sprintf("spec.nodeSelector[%s]", k)
		errs = append(errs, validateKey(f, k)...)
		if !labelValue.MatchString(v) || len(v) > 63 {
			errs.add(f, FieldInvalid, "Invalid value: %q: not a valid label value", v)
		}
	}
	return append(errs, validateTolerations(s.Tolerations)...)
}

func validateContainers(s *PodSpec) FieldErrors {
	var errs FieldErrors
	if len(s.Containers) == 0 {
		errs.add("spec.containers", FieldRequired, "Required value: a pod needs at least one container")
	}
	if len(s.Containers) > 32 {
		errs.add("spec.containers", FieldTooLong, "Too many: %d: must have at most 32 containers", len(s.Containers))
	}
	seen := map[string]bool{}
	for i := range s.Containers {
		f := fmt.Sprintf("spec.containers[%d]", i)
		c := &s.Containers[i]
		errs = append(errs, ValidateName(f+".name", c.Name)...)
		if c.Name != "" && seen[c.Name] {
			errs.add(f+".name", FieldDuplicate, "Duplicate value: %q", c.Name)
		}
		seen[c.Name] = true
		errs = append(errs, validateContainer(f, c, s.RuntimeClassName)...)
	}
	return errs
}

// validateContainer checks container c (field f) of a pod of brand.
func validateContainer(f string, c *Container, brand string) FieldErrors {
	var errs FieldErrors
	if strings.TrimSpace(c.Image) == "" {
		errs.add(f+".image", FieldRequired, "Required value: image is required")
	}
	if len(c.Command) == 0 && len(c.Args) == 0 && brand != BrandBhyve && !IsRegistryReference(c.Image) {
		errs.add(f+".command", FieldRequired, "Required value: a container runs as an SMF service and needs a command (only a registry image brings its own)")
	}
	if p := c.ImagePullPolicy; p != "" && p != PullAlways && p != PullIfNotPresent && p != PullNever {
		errs.add(f+".imagePullPolicy", FieldNotSupported, "Unsupported value: %q: supported values: %q, %q, %q", p, PullAlways, PullIfNotPresent, PullNever)
	}
	errs = append(errs, validateArgv(f, c.Command, c.Args)...)
	errs = append(errs, validateEnv(f, c.Env)...)
	for j, port := range c.Ports {
		pf := fmt.Sprintf("%s.ports[%d]", f, j)
		if port.ContainerPort < 1 || port.ContainerPort > 65535 {
			errs.add(pf+".containerPort", FieldInvalid, "Invalid value: %d: must be between 1 and 65535, inclusive", port.ContainerPort)
		}
		if !slices.Contains([]string{"TCP", "UDP"}, port.Protocol) {
			errs.add(pf+".protocol", FieldNotSupported, "Unsupported value: %q: supported values: \"TCP\", \"UDP\"", port.Protocol)
		}
	}
	errs = append(errs, validateResources(f+".resources", &c.Resources)...)
	errs = append(errs, validateProbe(f+".livenessProbe", c.LivenessProbe, c, false)...)
	errs = append(errs, validateProbe(f+".readinessProbe", c.ReadinessProbe, c, true)...)
	errs = append(errs, validateProbe(f+".startupProbe", c.StartupProbe, c, false)...)
	if c.LivenessProbe != nil && c.LivenessProbe.SuccessThreshold != 1 {
		errs.add(f+".livenessProbe.successThreshold", FieldInvalid, "Invalid value: %d: must be 1", c.LivenessProbe.SuccessThreshold)
	}
	if c.StartupProbe != nil && c.StartupProbe.SuccessThreshold != 1 {
		errs.add(f+".startupProbe.successThreshold", FieldInvalid, "Invalid value: %d: must be 1", c.StartupProbe.SuccessThreshold)
	}
	return errs
}

func validateTolerations(ts []Toleration) FieldErrors {
	var errs FieldErrors
	for i, t := range ts {
		f := fmt.Sprintf("spec.tolerations[%d]", i)
		switch t.Operator {
		case "", "Equal":
		case "Exists":
			if t.Value != "" {
				errs.add(f+".value", FieldInvalid, "Invalid value: %q: value must be empty when operator is Exists", t.Value)
			}
		default:
			errs.add(f+".operator", FieldNotSupported, "Unsupported value: %q: supported values: \"Equal\", \"Exists\"", t.Operator)
		}
		if t.Key == "" && t.Operator != "Exists" {
			errs.add(f+".operator", FieldInvalid, "Invalid value: %q: operator must be Exists when key is empty", t.Operator)
		}
		if t.Effect != "" && !slices.Contains([]string{TaintNoSchedule, TaintPreferNoSchedule, TaintNoExecute}, t.Effect) {
			errs.add(f+".effect", FieldNotSupported, "Unsupported value: %q: supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"", t.Effect)
		}
	}
	return errs
}

func validateResources(field string, r *ResourceRequirements) FieldErrors {
	var errs FieldErrors
	parsed := map[string]map[string]int64{}
	for _, part := range []struct {
		name string
		list ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		parsed[part.name] = map[string]int64{}
		for k, v := range part.list {
			f := fmt.Sprintf("%s.%s.%s", field, part.name, k)
			if k != ResourceCPU && k != ResourceMemory && k != ResourceEphemeralStorage {
				errs.add(f, FieldNotSupported, "Unsupported value: %q: supported values: \"cpu\", \"ephemeral-storage\", \"memory\"", k)
				continue
			}
			if d := quantityProblem(k, v); d != "" {
				errs.add(f, FieldInvalid, "%s", d)
				continue
			}
			parsed[part.name][k], _ = ParseQuantity(v)
		}
	}
	for k, req := range parsed["requests"] {
		if lim, ok := parsed["limits"][k]; ok && req > lim {
			errs.add(fmt.Sprintf("%s.requests.%s", field, k), FieldInvalid, "Invalid value: %q: must be less than or equal to %s limit of %s", r.Requests[k], k, r.Limits[k])
		}
	}
	return errs
}

// validateProbe checks one of container c's probes; a readiness probe
// stops nothing, so it has no grace period of its own.
func validateProbe(field string, p *Probe, c *Container, readiness bool) FieldErrors {
	if p == nil {
		return nil
	}
	var errs FieldErrors
	handlers := 0
	if p.Exec != nil {
		handlers++
		if len(p.Exec.Command) == 0 || p.Exec.Command[0] == "" {
			errs.add(field+".exec.command", FieldRequired, "Required value: must specify a command")
		} else {
			errs = append(errs, validateWords(field+".exec.command", p.Exec.Command)...)
		}
	}
	if h := p.HTTPGet; h != nil {
		handlers++
		errs = append(errs, validateProbePort(field+".httpGet.port", h.Port, c.Ports)...)
		errs = append(errs, validateHTTPPath(field+".httpGet.path", h.Path)...)
		errs = append(errs, validateProbeHost(field+".httpGet.host", h.Host)...)
		if h.Scheme != "HTTP" && h.Scheme != "HTTPS" {
			errs.add(field+".httpGet.scheme", FieldNotSupported, "Unsupported value: %q: supported values: \"HTTP\", \"HTTPS\"", h.Scheme)
		}
		errs = append(errs, validateHTTPHeaders(field+".httpGet.httpHeaders", h.HTTPHeaders)...)
	}
	if t := p.TCPSocket; t != nil {
		handlers++
		errs = append(errs, validateProbePort(field+".tcpSocket.port", t.Port, c.Ports)...)
		errs = append(errs, validateProbeHost(field+".tcpSocket.host", t.Host)...)
	}
	if g := p.GRPC; g != nil {
		handlers++
		errs = append(errs, validatePort(field+".grpc.port", g.Port)...)
		if g.Service != nil && len(*g.Service) > MaxProbeHostBytes {
			errs.add(field+".grpc.service", FieldTooLong, "Too long: must have at most %d bytes", MaxProbeHostBytes)
		}
	}
	if handlers != 1 {
		errs.add(field, FieldRequired, "Required value: must specify exactly one of exec, httpGet, tcpSocket, grpc")
	}
	for _, n := range []struct {
		name     string
		v        int32
		min, max int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds, 0, MaxProbeDelaySeconds},
		{"periodSeconds", p.PeriodSeconds, 1, MaxProbePeriodSeconds},
		{"timeoutSeconds", p.TimeoutSeconds, 1, MaxProbePeriodSeconds},
		{"successThreshold", p.SuccessThreshold, 1, MaxProbeThreshold},
		{"failureThreshold", p.FailureThreshold, 1, MaxProbeThreshold},
	} {
		if n.v < n.min || n.v > n.max {
			errs.add(field+"."+n.name, FieldInvalid, "Invalid value: %d: must be between %d and %d, inclusive", n.v, n.min, n.max)
		}
	}
	if g := p.TerminationGracePeriodSeconds; g != nil {
		switch {
		case readiness:
			errs.add(field+".terminationGracePeriodSeconds", FieldInvalid, "Invalid value: %d: must not be set for readinessProbes", *g)
		case *g < 1 || *g > MaxGracePeriodSeconds:
			errs.add(field+".terminationGracePeriodSeconds", FieldInvalid, "Invalid value: %d: must be between 1 and %d (a day), inclusive", *g, MaxGracePeriodSeconds)
		}
	}
	return errs
}

// validateProbePort accepts a port number, or the name of one of the
// container's ports (the probe can only be resolved against those).
func validateProbePort(field string, port IntOrString, ports []ContainerPort) FieldErrors {
	if port.StrVal == "" {
		return validatePort(field, port.IntVal)
	}
	if errs := validatePortName(field, port.StrVal); len(errs) > 0 {
		return errs
	}
	var errs FieldErrors
	if _, ok := ProbePort(port, ports); !ok {
		errs.add(field, FieldNotFound, "Not found: %q: the container has no port of this name", port.StrVal)
	}
	return errs
}

// validateProbeHost accepts an IP address or a DNS name, or nothing (the
// pod's address).
func validateProbeHost(field, host string) FieldErrors {
	var errs FieldErrors
	switch {
	case host == "" || net.ParseIP(host) != nil:
	case len(host) > MaxProbeHostBytes || !dns1123Subdomain.MatchString(strings.ToLower(host)):
		errs.add(field, FieldInvalid, "Invalid value: %q: must be an IP address or a DNS name", host)
	}
	return errs
}

// validateHTTPHeaders accepts header names that are HTTP tokens and values
// a header line can carry (no CR, LF or other control characters but
// tab), within MaxHTTPHeaderBytes together.
func validateHTTPHeaders(field string, headers []HTTPHeader) FieldErrors {
	var errs FieldErrors
	total := 0
	for i, h := range headers {
		f := fmt.Sprintf("%s[%d]", field, i)
		total += len(h.Name) + len(h.Value)
		switch {
		case h.Name == "":
			errs.add(f+".name", FieldRequired, "Required value: a header needs a name")
		case strings.IndexFunc(h.Name, func(r rune) bool { return !isHTTPTokenChar(r) }) >= 0:
			errs.add(f+".name", FieldInvalid, "Invalid value: %q: a valid HTTP header name must consist of letters, digits and !#$%%&'*+-.^_`|~", h.Name)
		}
		if strings.IndexFunc(h.Value, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) >= 0 {
			errs.add(f+".value", FieldInvalid, "Invalid value: %q: may not contain control characters", h.Value)
		}
	}
	if total > MaxHTTPHeaderBytes {
		errs.add(field, FieldTooLong, "Too long: headers must have at most %d bytes together", MaxHTTPHeaderBytes)
	}
	return errs
}

// isHTTPTokenChar reports a character of an HTTP token (RFC 9110 tchar).
func isHTTPTokenChar(r rune) bool {
	return r < 0x7f && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// ValidateGracePeriod checks a grace period in seconds, from a spec or
// from a delete request.
func ValidateGracePeriod(field string, g int64) FieldErrors {
	var errs FieldErrors
	if g < 0 || g > MaxGracePeriodSeconds {
		errs.add(field, FieldInvalid, "Invalid value: %d: must be between 0 and %d (a day), inclusive", g, MaxGracePeriodSeconds)
	}
	return errs
}

// validateHTTPPath accepts an absolute path a request line can carry:
// no control characters (CR or LF would split the request) and no blanks.
func validateHTTPPath(field, path string) FieldErrors {
	var errs FieldErrors
	switch {
	case !strings.HasPrefix(path, "/"):
		errs.add(field, FieldInvalid, "Invalid value: %q: must start with '/'", path)
	case len(path) > MaxHTTPPathBytes:
		errs.add(field, FieldTooLong, "Too long: must have at most %d bytes", MaxHTTPPathBytes)
	case strings.IndexFunc(path, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		errs.add(field, FieldInvalid, "Invalid value: %q: may not contain blanks or control characters", path)
	}
	return errs
}

// validateArgv checks a container's command and args: words a host's
// SMF manifest can carry, within MaxCommandBytes together.
func validateArgv(f string, command, args []string) FieldErrors {
	var errs FieldErrors
	switch {
	case len(command) > 0 && command[0] == "":
		errs.add(f+".command[0]", FieldRequired, "Required value: the program to run may not be empty")
	case len(command) == 0 && len(args) > 0 && args[0] == "":
		errs.add(f+".args[0]", FieldRequired, "Required value: without a command, args[0] is the program to run and may not be empty")
	}
	errs = append(errs, validateWords(f+".command", command)...)
	errs = append(errs, validateWords(f+".args", args)...)
	if n := argvBytes(command) + argvBytes(args); n > MaxCommandBytes && len(errs) == 0 {
		field := f + ".args"
		if argvBytes(command) > MaxCommandBytes {
			field = f + ".command"
		}
		errs.add(field, FieldTooLong, "Too long: command and args take %d bytes; must be at most %d", n, MaxCommandBytes)
	}
	return errs
}

// validateWords checks each word of an argv, and its size.
func validateWords(field string, words []string) FieldErrors {
	var errs FieldErrors
	for i, w := range words {
		if d := hostCannotCarry(w); d != "" {
			errs.add(fmt.Sprintf("%s[%d]", field, i), FieldInvalid, "Invalid value: %s", d)
		}
	}
	if n := argvBytes(words); n > MaxCommandBytes {
		errs.add(field, FieldTooLong, "Too long: %d bytes; must be at most %d", n, MaxCommandBytes)
	}
	return errs
}

func argvBytes(words []string) int {
	n := 0
	for _, w := range words {
		n += len(w) + 1
	}
	return n
}

// validateEnv checks a container's environment: C identifiers for names
// (what an SMF method environment takes), values a manifest can carry,
// and MaxEnvBytes in all (a name given twice is allowed: the later wins).
func validateEnv(f string, env []EnvVar) FieldErrors {
	var errs FieldErrors
	total := 0
	for j, e := range env {
		ef := fmt.Sprintf("%s.env[%d]", f, j)
		if !envVarName.MatchString(e.Name) {
			errs.add(ef+".name", FieldInvalid, "Invalid value: %q: an environment variable name must consist of letters, digits and '_', and must not start with a digit", e.Name)
		}
		if d := hostCannotCarry(e.Value); d != "" {
			errs.add(ef+".value", FieldInvalid, "Invalid value: %s", d)
		}
		total += len(e.Name) + len(e.Value) + 2
		errs = append(errs, validateEnvSource(ef, e)...)
	}
	if total > MaxEnvBytes {
		errs.add(f+".env", FieldTooLong, "Too long: the environment takes %d bytes; must be at most %d", total, MaxEnvBytes)
	}
	return errs
}

// hostCannotCarry says why s cannot reach a host's SMF manifest, or "":
// it must be UTF-8 that XML 1.0 represents (no NUL, no control character
// but tab, newline and carriage return).
func hostCannotCarry(s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	for _, r := range s {
		ok := r == '\t' || r == '\n' || r == '\r' ||
			(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || r >= 0x10000
		if !ok {
			return fmt.Sprintf("contains character %U, which a service manifest cannot carry", r)
		}
	}
	return ""
}

func validatePort(field string, port int32) FieldErrors {
	var errs FieldErrors
	if port < 1 || port > 65535 {
		errs.add(field, FieldInvalid, "Invalid value: %d: must be between 1 and 65535, inclusive", port)
	}
	return errs
}

// DefaultNode fills in the kind and version.
func DefaultNode(n *Node) { n.APIVersion, n.Kind = APIVersion, KindNode }

// ValidateNode checks a node registration.
func ValidateNode(n *Node) FieldErrors {
	errs := ValidateMeta(&n.Metadata, false)
	if n.Spec.PodCIDR != "" {
		if _, _, err := net.ParseCIDR(n.Spec.PodCIDR); err != nil {
			errs.add("spec.podCIDR", FieldInvalid, "Invalid value: %q: must be a CIDR such as 10.88.1.0/24", n.Spec.PodCIDR)
		}
	}
	for i, t := range n.Spec.Taints {
		f := fmt.Sprintf("spec.taints[%d]", i)
		errs = append(errs, validateKey(f+".key", t.Key)...)
		if !slices.Contains([]string{TaintNoSchedule, TaintPreferNoSchedule, TaintNoExecute}, t.Effect) {
			errs.add(f+".effect", FieldNotSupported, "Unsupported value: %q: supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"", t.Effect)
		}
	}
	if p := n.Status.DaemonEndpoints.AgentEndpoint.Port; p < 0 || p > 65535 {
		errs.add("status.daemonEndpoints.agentEndpoint.Port", FieldInvalid, "Invalid value: %d: must be a port between 1 and 65535, or 0 for none", p)
	}
	for i, a := range n.Status.Addresses {
		if a.Type == NodeInternalIP && net.ParseIP(a.Address) == nil {
			errs.add(fmt.Sprintf("status.addresses[%d].address", i), FieldInvalid, "Invalid value: %q: an InternalIP must be an IP address", a.Address)
		}
	}
	for _, part := range []struct {
		name string
		list ResourceList
	}{{"status.capacity", n.Status.Capacity}, {"status.allocatable", n.Status.Allocatable}} {
		for k, v := range part.list {
			// A node's amounts are what its host has: not negative, and
			// only ParseQuantity's bound above (a pool may pass 1Pi).
			if q, err := ParseQuantity(v); err != nil {
				errs.add(part.name+"."+k, FieldInvalid, "Invalid value: %q: %v", v, err)
			} else if q < 0 {
				errs.add(part.name+"."+k, FieldInvalid, "Invalid value: %q: must be greater than or equal to 0", v)
			}
		}
	}
	return errs
}

// DefaultNamespaceObject fills in the kind, version and phase.
func DefaultNamespaceObject(n *Namespace) {
	n.APIVersion, n.Kind = APIVersion, KindNamespace
	n.Status.Phase = NamespaceActive
}

// ValidateNamespace checks a namespace.
func ValidateNamespace(n *Namespace) FieldErrors { return ValidateMeta(&n.Metadata, false) }

// DefaultImage fills in what a user may leave out of an image.
func DefaultImage(img *Image) {
	img.APIVersion, img.Kind = APIVersion, KindImage
	img.Metadata.Namespace = ""
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// validateOCIImage checks what is particular to an oci image: a registry
// reference as its source (the API parses it fully), and no file digest,
// size or compression, which the registry's manifest says.
func validateOCIImage(s *ImageSpec) FieldErrors {
	var errs FieldErrors
	switch {
	case s.Source == "":
		errs.add("spec.source", FieldRequired, "Required value: an oci image needs a registry reference (host[:port]/repository[:tag|@sha256:digest])")
	case strings.Contains(s.Source, "://") || strings.ContainsAny(s.Source, " \t\n"):
		errs.add("spec.source", FieldInvalid, "Invalid value: %q: a registry reference has no scheme or spaces (host[:port]/repository[:tag|@sha256:digest])", s.Source)
	case len(s.Source) > 1024:
		errs.add("spec.source", FieldTooLong, "Too long: must have at most 1024 bytes")
	}
	if s.SHA256 != "" {
		errs.add("spec.sha256", FieldForbidden, "Forbidden: an oci image's manifest says its digest; pin one in the reference (@sha256:…)")
	}
	if s.Compression != "" {
		errs.add("spec.compression", FieldForbidden, "Forbidden: an oci image's manifest says how each layer is compressed")
	}
	return errs
}

// ValidateImage checks a catalog image and returns every problem found.
func ValidateImage(img *Image) FieldErrors {
	errs := ValidateMeta(&img.Metadata, false)
	if strings.HasPrefix(img.Metadata.Name, ReservedImagePrefix) {
		errs.add("metadata.name", FieldInvalid, "Invalid value: %q: names beginning %q are the image store's layer blobs", img.Metadata.Name, ReservedImagePrefix)
	}
	s := &img.Spec
	if !slices.Contains(ImageKinds, s.Kind) {
		errs.add("spec.kind", FieldNotSupported, "Unsupported value: %q: supported values: %q", s.Kind, ImageKinds)
	}
	switch {
	case s.Kind == ImageOCI:
		errs = append(errs, validateOCIImage(s)...)
	case s.Source == "" && s.Kind != ImageZoneTemplate && slices.Contains(ImageKinds, s.Kind):
		errs.add("spec.source", FieldRequired, "Required value: a %s image needs a source URL (http, https or file)", s.Kind)
	case s.Source != "":
		u, err := url.Parse(s.Source)
		switch {
		case err != nil:
			errs.add("spec.source", FieldInvalid, "Invalid value: the source is not a URL")
		case u.User != nil:
			// Stored, shown by GET and logged, credentials would leak: refused,
			// and never repeated.
			errs.add("spec.source", FieldForbidden, "Forbidden: credentials in the source URL are not accepted")
		case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file":
			errs.add("spec.source", FieldNotSupported, "Unsupported value: %q: the scheme must be http, https or file", s.Source)
		case u.Scheme == "file" && u.Path == "":
			errs.add("spec.source", FieldInvalid, "Invalid value: %q: a file URL needs an absolute path (file:///path)", s.Source)
		case u.Scheme != "file" && u.Host == "":
			errs.add("spec.source", FieldInvalid, "Invalid value: %q: the URL has no host", s.Source)
		}
	}
	switch {
	case s.Kind == ImageOCI:
	case s.Source != "" && s.SHA256 == "":
		errs.add("spec.sha256", FieldRequired, "Required value: an image with a source needs its sha256 digest")
	case s.SHA256 != "" && !sha256Hex.MatchString(s.SHA256):
		errs.add("spec.sha256", FieldInvalid, "Invalid value: %q: must be 64 lowercase hexadecimal digits", s.SHA256)
	}
	if s.Size < 0 || s.Size > MaxStorageBytes {
		errs.add("spec.size", FieldInvalid, "Invalid value: %d: must be between 0 and %d (1Pi), inclusive", s.Size, MaxStorageBytes)
	}
	if s.Compression != "" && !slices.Contains([]string{CompressionNone, CompressionGzip, CompressionZstd, CompressionXZ}, s.Compression) {
		errs.add("spec.compression", FieldNotSupported, "Unsupported value: %q: supported values: \"none\", \"gzip\", \"zstd\", \"xz\" (or empty to detect it)", s.Compression)
	}
	errs = append(errs, validateResourceList("spec.resources", s.Resources)...)
	for i, ps := range s.PullSecrets {
		f := fmt.Sprintf("spec.pullSecrets[%d]", i)
		if s.Kind != ImageOCI {
			errs.add(f, FieldForbidden, "Forbidden: only an oci image is pulled from a registry")
		}
		errs = append(errs, ValidateName(f+".namespace", ps.Namespace)...)
		errs = append(errs, ValidateName(f+".name", ps.Name)...)
	}
	for i, b := range s.Brands {
		if can := NaturalBrands(s.Kind); !slices.Contains(can, b) && can != nil {
			errs.add(fmt.Sprintf("spec.brands[%d]", i), FieldNotSupported, "Unsupported value: %q: a %s image installs as %q", b, s.Kind, can)
		}
	}
	return errs
}

// validateResourceList checks cpu and memory quantities.
func validateResourceList(field string, l ResourceList) FieldErrors {
	var errs FieldErrors
	for k, v := range l {
		f := field + "." + k
		if k != ResourceCPU && k != ResourceMemory {
			errs.add(f, FieldNotSupported, "Unsupported value: %q: supported values: \"cpu\", \"memory\"", k)
			continue
		}
		if d := quantityProblem(k, v); d != "" {
			errs.add(f, FieldInvalid, "%s", d)
		}
	}
	return errs
}

// validateEnvSource checks that an environment variable has a value or
// one source, and that a secret reference names a secret and a key.
func validateEnvSource(f string, e EnvVar) FieldErrors {
	var errs FieldErrors
	if e.ValueFrom == nil {
		return nil
	}
	if e.Value != "" {
		errs.add(f+".valueFrom", FieldInvalid, "Invalid value: may not be specified when `value` is not empty")
	}
	ref, field := e.ValueFrom.SecretKeyRef, e.ValueFrom.FieldRef
	switch {
	case ref == nil && field == nil:
		errs.add(f+".valueFrom", FieldRequired, "Required value: must specify one of: `fieldRef` or `secretKeyRef`")
		return errs
	case ref != nil && field != nil:
		errs.add(f+".valueFrom", FieldInvalid, "Invalid value: may not have more than one field specified at a time")
		return errs
	case field != nil:
		ff := f + ".valueFrom.fieldRef"
		if field.APIVersion != "" && field.APIVersion != "v1" {
			errs.add(ff+".apiVersion", FieldNotSupported, "Unsupported value: %q: supported values: \"v1\"", field.APIVersion)
		}
		switch {
		case field.FieldPath == "":
			errs.add(ff+".fieldPath", FieldRequired, "Required value")
		case !slices.Contains(FieldPaths, field.FieldPath):
			errs.add(ff+".fieldPath", FieldNotSupported, "Unsupported value: %q: supported values: \"%s\"", field.FieldPath, strings.Join(FieldPaths, "\", \""))
		}
		return errs
	}
	rf := f + ".valueFrom.secretKeyRef"
	errs = append(errs, ValidateName(rf+".name", ref.Name)...)
	if ref.Key == "" {
		errs.add(rf+".key", FieldRequired, "Required value: the key in the secret is required")
	} else if !ValidSecretKey(ref.Key) {
		errs.add(rf+".key", FieldInvalid, "Invalid value: %q: a valid config key must consist of alphanumeric characters, '-', '_' or '.'", ref.Key)
	}
	return errs
}
