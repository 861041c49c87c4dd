package model

import (
	"fmt"
	"regexp"
	"sort"
)

// KindSecret is the kind of a secret.
const KindSecret = "Secret"

// Secret types; zonewright treats every type as Opaque (it gives no
// meaning to the keys of the others), except that image pulls read
// registry credentials from a dockerconfigjson secret's key
// DockerConfigJSONKey.
const (
	SecretTypeOpaque           = "Opaque"
	SecretTypeDockerConfigJSON = "kubernetes.io/dockerconfigjson"
	DockerConfigJSONKey        = ".dockerconfigjson"
)

// MaxSecretBytes bounds a secret's values in total, as Kubernetes does.
const MaxSecretBytes = 1 << 20

// Secret holds values that containers read through
// env[].valueFrom.secretKeyRef, in Kubernetes' v1 shape. Data values are
// base64 in JSON ([]byte); StringData is write-only plain text that is
// merged into Data when the secret is written, and is never returned.
type Secret struct {
	TypeMeta   `json:",inline"`
	Metadata   ObjectMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Immutable  *bool             `json:"immutable,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
	StringData map[string]string `json:"stringData,omitempty"`
}

func (s *Secret) GetTypeMeta() *TypeMeta { return &s.TypeMeta }
func (s *Secret) GetMeta() *ObjectMeta   { return &s.Metadata }

// IsImmutable reports whether the secret's data may no longer change.
func (s *Secret) IsImmutable() bool { return s.Immutable != nil && *s.Immutable }

// Keys are the secret's data keys, sorted.
func (s *Secret) Keys() []string {
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DefaultSecret fills in the type and merges stringData into data (a
// stringData key wins over the same data key, as in Kubernetes).
func DefaultSecret(s *Secret) {
	s.APIVersion, s.Kind = APIVersion, KindSecret
	if s.Type == "" {
		s.Type = SecretTypeOpaque
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

// secretKey is the rule for a secret's keys (and a config key).
var secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// ValidSecretKey reports whether k may name a value in a secret.
func ValidSecretKey(k string) bool {
	return len(k) <= 253 && secretKey.MatchString(k) && k != "." && k != ".."
}

// ValidateSecret checks a defaulted secret. Messages name keys and sizes,
// never values.
func ValidateSecret(s *Secret) FieldErrors {
	errs := ValidateMeta(&s.Metadata, true)
	if len(s.Type) > 253 {
		errs.add("type", FieldTooLong, "Too long: must be no more than 253 characters")
	}
	total := 0
	for _, k := range s.Keys() {
		if !ValidSecretKey(k) {
			errs.add(fmt.Sprintf("data[%s]", k), FieldInvalid, "Invalid value: %q: a valid config key must consist of alphanumeric characters, '-', '_' or '.' (and be neither '.' nor '..')", k)
		}
		total += len(s.Data[k])
	}
	if total > MaxSecretBytes {
		errs.add("data", FieldTooLong, "Too long: must have at most %d bytes", MaxSecretBytes)
	}
	return errs
}

// ValidateSecretUpdate checks an update against the stored secret: an
// immutable secret keeps its data and stays immutable, and no secret
// changes its type.
func ValidateSecretUpdate(s, old *Secret) FieldErrors {
	errs := ValidateSecret(s)
	if s.Type != old.Type {
		errs.add("type", FieldInvalid, "Invalid value: %q: field is immutable", s.Type)
	}
	if old.IsImmutable() {
		if !s.IsImmutable() {
			errs.add("immutable", FieldForbidden, "Forbidden: field is immutable when `immutable` is set")
		}
		if !sameData(s.Data, old.Data) {
			errs.add("data", FieldForbidden, "Forbidden: field is immutable when `immutable` is set")
		}
	}
	return errs
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || string(v) != string(w) {
			return false
		}
	}
	return true
}

// RedactSecret drops a secret's values, keeping its keys with empty
// values: what a caller who may not read values sees.
func RedactSecret(s *Secret) {
	for k := range s.Data {
		s.Data[k] = []byte{}
	}
	s.StringData = nil
}

// PodSecretEnv is what a pod's node reads when it starts the pod's
// containers: the values of their env[].valueFrom.secretKeyRef
// (GET /api/v1/namespaces/{ns}/pods/{name}/secretenv). Only the node the
// pod is bound to may read it.
type PodSecretEnv struct {
	TypeMeta   `json:",inline"`
	Containers []ContainerSecretEnv `json:"containers"`
	// Missing are the references that name no secret or no key and are
	// not optional: such a container must not start.
	Missing []MissingSecretRef `json:"missing,omitempty"`
}

// KindPodSecretEnv is the kind of a PodSecretEnv.
const KindPodSecretEnv = "PodSecretEnv"

// ContainerSecretEnv are one container's variables read from secrets.
type ContainerSecretEnv struct {
	Name string        `json:"name"`
	Env  []SecretValue `json:"env"`
}

// SecretValue is one environment variable's value, read from a secret.
type SecretValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MissingSecretRef is a reference that could not be resolved, and why
// (in Kubernetes' words: `secret "db" not found`).
type MissingSecretRef struct {
	Container string `json:"container"`
	Name      string `json:"name"`
	Message   string `json:"message"`
}
