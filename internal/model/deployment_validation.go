package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DefaultDeployment fills in what a user may leave out, as Kubernetes does.
func DefaultDeployment(d *Deployment) {
	d.APIVersion, d.Kind = APIVersionApps, KindDeployment
	sp := &d.Spec
	sp.Template.Metadata.CreationTimestamp = nil
	if sp.Replicas == nil {
		one := int32(1)
		sp.Replicas = &one
	}
	if sp.Strategy.Type == "" {
		sp.Strategy.Type = StrategyRollingUpdate
	}
	if sp.Strategy.Type == StrategyRollingUpdate {
		if sp.Strategy.RollingUpdate == nil {
			sp.Strategy.RollingUpdate = &RollingUpdateConfig{}
		}
		ru := sp.Strategy.RollingUpdate
		if ru.MaxSurge == nil {
			v := StrValue("25%")
			ru.MaxSurge = &v
		}
		if ru.MaxUnavailable == nil {
			v := StrValue("25%")
			ru.MaxUnavailable = &v
		}
	}
	if sp.RevisionHistoryLimit == nil {
		v := DefaultRevisionHistoryLimit
		sp.RevisionHistoryLimit = &v
	}
	if sp.ProgressDeadlineSeconds == nil {
		v := DefaultProgressDeadlineSeconds
		sp.ProgressDeadlineSeconds = &v
	}
	pod := sp.Template.pod("", "")
	DefaultPod(pod)
	sp.Template.Spec = pod.Spec
}

// pod is the template as a pod, for defaulting and validation.
func (t *PodTemplate) pod(ns, name string) *Pod {
	return &Pod{Metadata: ObjectMeta{Name: name, Namespace: ns, Labels: t.Metadata.Labels, Annotations: t.Metadata.Annotations}, Spec: t.Spec}
}

// ScaledValue resolves a number or a percentage of total, rounding a
// percentage up or down.
func ScaledValue(v IntOrString, total int32, roundUp bool) (int32, error) {
	if v.StrVal == "" {
		return v.IntVal, nil
	}
	digits, ok := strings.CutSuffix(v.StrVal, "%")
	pct, err := strconv.Atoi(digits)
	if !ok || err != nil || pct < 0 {
		return 0, fmt.Errorf("%q is neither a number nor a percentage", v.StrVal)
	}
	x := float64(pct) * float64(total) / 100
	if roundUp {
		x = math.Ceil(x)
	} else {
		x = math.Floor(x)
	}
	return int32(min(x, math.MaxInt32)), nil
}

// ValidateDeployment checks a defaulted deployment.
func ValidateDeployment(d *Deployment) FieldErrors {
	errs := ValidateMeta(&d.Metadata, true)
	if len(d.Metadata.Name) > MaxDeploymentNameLength {
		errs.add("metadata.name", FieldTooLong, "Invalid value: %q: must be no more than %d characters, so its pods' names fit a DNS label", d.Metadata.Name, MaxDeploymentNameLength)
	}
	sp := &d.Spec
	if r := *sp.Replicas; r < 0 || r > MaxDeploymentReplicas {
		errs.add("spec.replicas", FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive", r, MaxDeploymentReplicas)
	}
	switch {
	case sp.Selector == nil || len(sp.Selector.MatchLabels) == 0:
		errs.add("spec.selector", FieldRequired, "Required value: a deployment needs a selector (matchLabels)")
	default:
		for k, v := range sp.Selector.MatchLabels {
			f := fmt.Sprintf("spec.selector.matchLabels[%s]", k)
			errs = append(errs, validateKey(f, k)...)
			if len(v) > 63 || !labelValue.MatchString(v) {
				errs.add(f, FieldInvalid, "Invalid value: %q: not a valid label value", v)
			}
			if got, ok := sp.Template.Metadata.Labels[k]; !ok || got != v {
				errs.add("spec.template.metadata.labels", FieldInvalid, "Invalid value: %v: `selector` does not match template `labels`", sp.Template.Metadata.Labels)
				break
			}
		}
	}
	if _, ok := sp.Template.Metadata.Labels[LabelPodTemplateHash]; ok {
		errs.add("spec.template.metadata.labels["+LabelPodTemplateHash+"]", FieldForbidden, "Forbidden: the deployment sets this label on its pods")
	}
	errs = append(errs, validateTemplate(sp, d.Metadata.Namespace, d.Metadata.Name)...)
	minReadyOK := sp.MinReadySeconds >= 0 && sp.MinReadySeconds < MaxRolloutSeconds
	if !minReadyOK {
		errs.add("spec.minReadySeconds", FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive (less than progressDeadlineSeconds)", sp.MinReadySeconds, MaxRolloutSeconds-1)
	}
	if v := *sp.RevisionHistoryLimit; v < 0 || v > MaxRevisionHistoryLimit {
		errs.add("spec.revisionHistoryLimit", FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive", v, MaxRevisionHistoryLimit)
	}
	// Compared with a minReadySeconds out of range, any deadline would be
	// wrong: that field alone is named.
	if v := *sp.ProgressDeadlineSeconds; (minReadyOK && v <= sp.MinReadySeconds) || v <= 0 || v > MaxRolloutSeconds {
		errs.add("spec.progressDeadlineSeconds", FieldInvalid, "Invalid value: %d: must be greater than minReadySeconds and at most %d", v, MaxRolloutSeconds)
	}
	switch sp.Strategy.Type {
	case StrategyRecreate:
		if sp.Strategy.RollingUpdate != nil {
			errs.add("spec.strategy.rollingUpdate", FieldForbidden, "Forbidden: may not be specified when strategy `type` is 'Recreate'")
		}
	case StrategyRollingUpdate:
		errs = append(errs, validateRollingUpdate(sp.Strategy.RollingUpdate)...)
		if h := sp.Strategy.RollingUpdate.HealthyDeadlineSeconds; minReadyOK && h > 0 && h <= sp.MinReadySeconds {
			errs.add("spec.strategy.rollingUpdate.healthyDeadlineSeconds", FieldInvalid, "Invalid value: %d: must be greater than minReadySeconds (a pod is healthy once available)", h)
		}
	default:
		errs.add("spec.strategy.type", FieldNotSupported, "Unsupported value: %q: supported values: \"Recreate\", \"RollingUpdate\"", sp.Strategy.Type)
	}
	return errs
}

func validateTemplate(sp *DeploymentSpec, ns, name string) FieldErrors {
	var errs FieldErrors
	p := sp.Template.pod(ns, name)
	for _, e := range ValidatePod(p) {
		if after, ok := strings.CutPrefix(e.Field, "metadata."); ok {
			if after == "name" || after == "namespace" {
				continue // the deployment's, checked above
			}
			e.Field = "spec.template.metadata." + after
		} else {
			e.Field = "spec.template." + e.Field
		}
		errs = append(errs, e)
	}
	if sp.Template.Spec.RestartPolicy != RestartAlways {
		errs.add("spec.template.spec.restartPolicy", FieldNotSupported, "Unsupported value: %q: supported values: \"Always\"", sp.Template.Spec.RestartPolicy)
	}
	if sp.Template.Spec.NodeName != "" {
		errs.add("spec.template.spec.nodeName", FieldForbidden, "Forbidden: a deployment's pods are placed by the scheduler")
	}
	return errs
}

// validateRollingUpdate checks maxSurge and maxUnavailable: a number up
// to MaxDeploymentReplicas or a percentage up to 100%. Kubernetes bounds
// maxUnavailable's percentage so; a larger maxSurge does no more than
// 100% does (a rollout never runs more than replicas new pods beside the
// old ones), and a bounded one keeps replicas + maxSurge within int32.
func validateRollingUpdate(ru *RollingUpdateConfig) FieldErrors {
	var errs FieldErrors
	check := func(field string, v *IntOrString) bool {
		if v.StrVal != "" {
			digits, ok := strings.CutSuffix(v.StrVal, "%")
			n, err := strconv.Atoi(digits)
			switch {
			case !ok || err != nil || n < 0:
				errs.add(field, FieldInvalid, "Invalid value: %q: must be an integer or a percentage (e.g. '5%%')", v.StrVal)
				return false
			case n > 100:
				errs.add(field, FieldInvalid, "Invalid value: %q: must not be greater than 100%%", v.StrVal)
			}
			return n == 0
		}
		if v.IntVal < 0 || v.IntVal > MaxDeploymentReplicas {
			errs.add(field, FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive", v.IntVal, MaxDeploymentReplicas)
		}
		return v.IntVal == 0
	}
	surgeZero := check("spec.strategy.rollingUpdate.maxSurge", ru.MaxSurge)
	unavailZero := check("spec.strategy.rollingUpdate.maxUnavailable", ru.MaxUnavailable)
	if surgeZero && unavailZero {
		errs.add("spec.strategy.rollingUpdate.maxUnavailable", FieldInvalid, "Invalid value: %s: may not be 0 when `maxSurge` is 0", ru.MaxUnavailable)
	}
	if h := ru.HealthyDeadlineSeconds; h < 0 || h > MaxRolloutSeconds {
		errs.add("spec.strategy.rollingUpdate.healthyDeadlineSeconds", FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive", h, MaxRolloutSeconds)
	}
	return errs
}

// ValidateDeploymentUpdate checks what may not change between old and d.
func ValidateDeploymentUpdate(d, old *Deployment) FieldErrors {
	errs := ValidateDeployment(d)
	if d.Spec.Selector != nil && old.Spec.Selector != nil && !equalLabels(d.Spec.Selector.MatchLabels, old.Spec.Selector.MatchLabels) {
		errs.add("spec.selector", FieldInvalid, "Invalid value: %v: field is immutable", d.Spec.Selector.MatchLabels)
	}
	return errs
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
