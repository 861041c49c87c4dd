package model

import (
	"fmt"
	"slices"
)

// KindLimitRange bounds and defaults each container's and claim's
// resources in a namespace.
const KindLimitRange = "LimitRange"

// LimitRange is Kubernetes' kind: per container, the cpu and memory
// requests and limits it gets when it says none (defaultRequest,
// default) and the least and most it may say (min, max); per claim, the
// storage it may request.
type LimitRange struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     LimitRangeSpec   `json:"spec"`
	Status   LimitRangeStatus `json:"status"`
}

// LimitRangeStatus is empty, as Kubernetes'; kept so the object has the
// usual shape.
type LimitRangeStatus struct{}

// LimitRangeSpec is the ranges, one per type of object.
type LimitRangeSpec struct {
	Limits []LimitRangeItem `json:"limits"`
}

// LimitRangeItem is the range of one type: Container or
// PersistentVolumeClaim.
type LimitRangeItem struct {
	Type           string       `json:"type"`
	Max            ResourceList `json:"max,omitempty"`
	Min            ResourceList `json:"min,omitempty"`
	Default        ResourceList `json:"default,omitempty"`
	DefaultRequest ResourceList `json:"defaultRequest,omitempty"`
}

// The types a LimitRange ranges.
const (
	LimitTypeContainer = "Container"
	LimitTypeClaim     = "PersistentVolumeClaim"
)

func (l *LimitRange) GetTypeMeta() *TypeMeta    { return &l.TypeMeta }
func (l *LimitRange) GetMeta() *ObjectMeta      { return &l.Metadata }
func (l *LimitRange) Parts() (spec, status any) { return &l.Spec, &l.Status }

// ValidateLimitRange checks types, resources and quantities, and that
// min ≤ defaultRequest ≤ default ≤ max where both are set.
func ValidateLimitRange(l *LimitRange) FieldErrors {
	errs := ValidateMeta(&l.Metadata, true)
	for i, it := range l.Spec.Limits {
		f := fmt.Sprintf("spec.limits[%d]", i)
		resources := []string{ResourceCPU, ResourceMemory}
		switch it.Type {
		case LimitTypeContainer:
		case LimitTypeClaim:
			resources = []string{ResourceStorage}
		default:
			errs.add(f+".type", FieldNotSupported, "Unsupported value: %q: supported values: %q, %q", it.Type, LimitTypeContainer, LimitTypeClaim)
			continue
		}
		parsed := map[string]map[string]int64{}
		for _, l := range []struct {
			name string
			list ResourceList
		}{{"min", it.Min}, {"defaultRequest", it.DefaultRequest}, {"default", it.Default}, {"max", it.Max}} {
			parsed[l.name] = map[string]int64{}
			for _, r := range sortedKeys(l.list) {
				lf := fmt.Sprintf("%s.%s[%s]", f, l.name, r)
				if !slices.Contains(resources, r) {
					errs.add(lf, FieldNotSupported, "Unsupported value: %q: supported values: %q", r, resources)
					continue
				}
				if p := quantityProblem(r, l.list[r]); p != "" {
					errs.add(lf, FieldInvalid, "%s", p)
					continue
				}
				parsed[l.name][r], _ = ParseQuantity(l.list[r])
			}
		}
		order := []string{"min", "defaultRequest", "default", "max"}
		for a := range order {
			for b := a + 1; b < len(order); b++ {
				for r, lo := range parsed[order[a]] {
					if hi, ok := parsed[order[b]][r]; ok && lo > hi {
						errs.add(fmt.Sprintf("%s.%s[%s]", f, order[a], r), FieldInvalid, "Invalid value: %q: must be less than or equal to %s %s", FormatQuantity(lo), r, order[b])
					}
				}
			}
		}
	}
	return errs
}

// LimitError is a create refused by a LimitRange, in Kubernetes' words.
type LimitError struct {
	Object, Message string
}

func (e *LimitError) Error() string { return e.Object + " is forbidden: " + e.Message }

// ApplyContainerLimits gives each of p's containers the requests and
// limits l defaults when it says none (a request missing beside a limit
// is the limit, as Kubernetes sets it), then checks each against min and
// max; the first violation is the error message.
func ApplyContainerLimits(l *LimitRange, p *Pod) string {
	for _, it := range l.Spec.Limits {
		if it.Type != LimitTypeContainer {
			continue
		}
		for i := range p.Spec.Containers {
			c := &p.Spec.Containers[i]
			for _, r := range []string{ResourceCPU, ResourceMemory} {
				if _, ok := c.Resources.Limits[r]; !ok && it.Default[r] != "" {
					c.Resources.Limits = withResource(c.Resources.Limits, r, it.Default[r])
				}
				if _, ok := c.Resources.Requests[r]; !ok {
					switch {
					case it.DefaultRequest[r] != "":
						c.Resources.Requests = withResource(c.Resources.Requests, r, it.DefaultRequest[r])
					case c.Resources.Limits[r] != "":
						c.Resources.Requests = withResource(c.Resources.Requests, r, c.Resources.Limits[r])
					}
				}
				if msg := outOfRange(r, "Container", it, c.Resources.Requests[r], c.Resources.Limits[r], "limit"); msg != "" {
					return msg
				}
			}
		}
	}
	return ""
}

// ClaimLimits checks a claim's storage request against l.
func ClaimLimits(l *LimitRange, c *PersistentVolumeClaim) string {
	for _, it := range l.Spec.Limits {
		if it.Type != LimitTypeClaim {
			continue
		}
		req := c.Spec.Resources.Requests[ResourceStorage]
		if msg := outOfRange(ResourceStorage, "PersistentVolumeClaim", it, req, req, "request"); msg != "" {
			return msg
		}
	}
	return ""
}

// outOfRange is Kubernetes' refusal of a request below min or a limit
// (a claim's request: maxOf) above max, or of either missing under one;
// or "".
func outOfRange(r, what string, it LimitRangeItem, request, limit, maxOf string) string {
	if min, ok := it.Min[r]; ok {
		lo, _ := ParseQuantity(min)
		if v, err := ParseQuantity(request); request == "" || err == nil && v < lo {
			if request == "" {
				return fmt.Sprintf("minimum %s usage per %s is %s.  No request is specified", r, what, min)
			}
			return fmt.Sprintf("minimum %s usage per %s is %s, but request is %s", r, what, min, request)
		}
	}
	if max, ok := it.Max[r]; ok {
		hi, _ := ParseQuantity(max)
		if v, err := ParseQuantity(limit); limit == "" || err == nil && v > hi {
			if limit == "" {
				return fmt.Sprintf("maximum %s usage per %s is %s.  No %s is specified", r, what, max, maxOf)
			}
			return fmt.Sprintf("maximum %s usage per %s is %s, but %s is %s", r, what, max, maxOf, limit)
		}
	}
	return ""
}

func withResource(l ResourceList, r, v string) ResourceList {
	if l == nil {
		l = ResourceList{}
	}
	l[r] = v
	return l
}
