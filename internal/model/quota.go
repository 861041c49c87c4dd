package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// KindResourceQuota bounds what a namespace may hold.
const KindResourceQuota = "ResourceQuota"

// ResourceQuota bounds the pods, compute, claims, storage, services and
// secrets of its namespace, as Kubernetes' does: a create that would pass
// a bound is refused (403). status.used is what the namespace holds now.
type ResourceQuota struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta          `json:"metadata"`
	Spec     ResourceQuotaSpec   `json:"spec"`
	Status   ResourceQuotaStatus `json:"status"`
}

// ResourceQuotaSpec is the bounds, by resource name (QuotaResources).
type ResourceQuotaSpec struct {
	Hard ResourceList `json:"hard,omitempty"`
}

// ResourceQuotaStatus is the bounds and what is used of them, derived on
// every read.
type ResourceQuotaStatus struct {
	Hard ResourceList `json:"hard,omitempty"`
	Used ResourceList `json:"used,omitempty"`
}

func (q *ResourceQuota) GetTypeMeta() *TypeMeta    { return &q.TypeMeta }
func (q *ResourceQuota) GetMeta() *ObjectMeta      { return &q.Metadata }
func (q *ResourceQuota) Parts() (spec, status any) { return &q.Spec, &q.Status }

// The resources a quota may bound, as Kubernetes names them; cpu and
// memory are requests.cpu and requests.memory.
const (
	QuotaPods           = "pods"
	QuotaRequestsCPU    = "requests.cpu"
	QuotaRequestsMemory = "requests.memory"
	QuotaLimitsCPU      = "limits.cpu"
	QuotaLimitsMemory   = "limits.memory"
	QuotaClaims         = "persistentvolumeclaims"
	QuotaStorage        = "requests.storage"
	QuotaServices       = "services"
	QuotaSecrets        = "secrets"
)

// quotaAliases are the other names Kubernetes takes for a bound.
var quotaAliases = map[string]string{
	"cpu": QuotaRequestsCPU, "memory": QuotaRequestsMemory,
	"count/pods": QuotaPods, "count/persistentvolumeclaims": QuotaClaims,
	"count/services": QuotaServices, "count/secrets": QuotaSecrets,
}

// quotaBounds are the resources a quota bounds, by their own names.
var quotaBounds = []string{QuotaPods, QuotaRequestsCPU, QuotaRequestsMemory, QuotaLimitsCPU, QuotaLimitsMemory, QuotaClaims, QuotaStorage, QuotaServices, QuotaSecrets}

// QuotaResources are the names a quota's hard may use.
func QuotaResources() []string {
	names := slices.Clone(quotaBounds)
	for a := range quotaAliases {
		names = append(names, a)
	}
	sort.Strings(names)
	return names
}

// QuotaResource is the bound a name of hard stands for ("" if none).
func QuotaResource(name string) string {
	if a, ok := quotaAliases[name]; ok {
		return a
	}
	if slices.Contains(quotaBounds, name) {
		return name
	}
	return ""
}

// ValidateResourceQuota checks a quota's name and bounds.
func ValidateResourceQuota(q *ResourceQuota) FieldErrors {
	errs := ValidateMeta(&q.Metadata, true)
	for _, name := range sortedKeys(q.Spec.Hard) {
		f := "spec.hard[" + name + "]"
		if QuotaResource(name) == "" {
			errs.add(f, FieldNotSupported, "Unsupported value: %q: supported values: %q", name, QuotaResources())
			continue
		}
		v, err := ParseQuantity(q.Spec.Hard[name])
		switch {
		case err != nil:
			errs.add(f, FieldInvalid, "Invalid value: %q: %v", q.Spec.Hard[name], err)
		case v < 0:
			errs.add(f, FieldInvalid, "Invalid value: %q: must be greater than or equal to 0", q.Spec.Hard[name])
		}
	}
	return errs
}

func sortedKeys(l ResourceList) []string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Usage is an amount of each quota resource, in thousandths (as
// ParseQuantity counts): one pod is 1000.
type Usage map[string]int64

// Add adds u2 to u.
func (u Usage) Add(u2 Usage) {
	for k, v := range u2 {
		u[k] += v
	}
}

// PodUsage is what a pod counts against quotas: itself, and its
// containers' requests and limits of cpu and memory. A finished pod
// (Succeeded, Failed) counts nothing.
func PodUsage(p *Pod) Usage {
	if p.Status.Phase == PodSucceeded || p.Status.Phase == PodFailed {
		return Usage{}
	}
	u := Usage{QuotaPods: 1000}
	for _, c := range p.Spec.Containers {
		for _, r := range []struct {
			list     ResourceList
			resource string
			quota    string
		}{
			{c.Resources.Requests, ResourceCPU, QuotaRequestsCPU}, {c.Resources.Requests, ResourceMemory, QuotaRequestsMemory},
			{c.Resources.Limits, ResourceCPU, QuotaLimitsCPU}, {c.Resources.Limits, ResourceMemory, QuotaLimitsMemory},
		} {
			if v, err := ParseQuantity(r.list[r.resource]); err == nil {
				u[r.quota] += v
			}
		}
	}
	return u
}

// ClaimUsage is what a claim counts: itself and the storage it requests.
func ClaimUsage(c *PersistentVolumeClaim) Usage {
	u := Usage{QuotaClaims: 1000}
	if v, err := ParseQuantity(c.Spec.Resources.Requests[ResourceStorage]); err == nil {
		u[QuotaStorage] = v
	}
	return u
}

// QuotaError is a create refused by a quota, in Kubernetes' words.
type QuotaError struct {
	Object                   string // `pods "web"`
	Quota                    string
	Requested, Used, Limited []string // "resource=quantity", one per bound passed
	Unspecified, Containers  []string // bounds a container does not say (must specify)
}

func (e *QuotaError) Error() string {
	if len(e.Unspecified) > 0 {
		return fmt.Sprintf("%s is forbidden: failed quota: %s: must specify %s for: %s", e.Object, e.Quota, strings.Join(e.Unspecified, ","), strings.Join(e.Containers, ","))
	}
	return fmt.Sprintf("%s is forbidden: exceeded quota: %s, requested: %s, used: %s, limited: %s", e.Object, e.Quota,
		strings.Join(e.Requested, ","), strings.Join(e.Used, ","), strings.Join(e.Limited, ","))
}

// CheckQuota is the refusal of adding add to used under q, or nil. A pod
// (p, else nil) must say every compute bound q sets, per container.
func CheckQuota(q *ResourceQuota, used, add Usage, p *Pod) *QuotaError {
	var unspecified, containers []string
	if p != nil {
		for _, name := range sortedKeys(q.Spec.Hard) {
			res := QuotaResource(name)
			list, resource := "", ""
			switch res {
			case QuotaRequestsCPU, QuotaRequestsMemory, QuotaLimitsCPU, QuotaLimitsMemory:
				list, resource, _ = strings.Cut(res, ".")
			default:
				continue
			}
			for _, c := range p.Spec.Containers {
				l := c.Resources.Requests
				if list == "limits" {
					l = c.Resources.Limits
				}
				if _, ok := l[resource]; !ok {
					if !slices.Contains(unspecified, res) {
						unspecified = append(unspecified, res)
					}
					if !slices.Contains(containers, c.Name) {
						containers = append(containers, c.Name)
					}
				}
			}
		}
	}
	if len(unspecified) > 0 {
		return &QuotaError{Quota: q.Metadata.Name, Unspecified: unspecified, Containers: containers}
	}
	e := &QuotaError{Quota: q.Metadata.Name}
	for _, name := range sortedKeys(q.Spec.Hard) {
		res := QuotaResource(name)
		limit, err := ParseQuantity(q.Spec.Hard[name])
		if err != nil || add[res] == 0 || used[res]+add[res] <= limit {
			continue
		}
		e.Requested = append(e.Requested, name+"="+FormatQuantity(add[res]))
		e.Used = append(e.Used, name+"="+FormatQuantity(used[res]))
		e.Limited = append(e.Limited, name+"="+q.Spec.Hard[name])
	}
	if len(e.Requested) == 0 {
		return nil
	}
	return e
}

// QuotaStatus is q's status given what its namespace uses.
func QuotaStatus(q *ResourceQuota, used Usage) ResourceQuotaStatus {
	st := ResourceQuotaStatus{Hard: ResourceList{}, Used: ResourceList{}}
	for name, v := range q.Spec.Hard {
		st.Hard[name] = v
		st.Used[name] = FormatQuantity(used[QuotaResource(name)])
	}
	return st
}

// FormatQuantity writes thousandths as Kubernetes writes a quantity:
// "500m", "2", "256Mi".
func FormatQuantity(milli int64) string {
	if milli%1000 != 0 {
		return fmt.Sprintf("%dm", milli)
	}
	n := milli / 1000
	for _, s := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n != 0 && n%s.size == 0 {
			return fmt.Sprintf("%d%s", n/s.size, s.suffix)
		}
	}
	return fmt.Sprintf("%d", n)
}
