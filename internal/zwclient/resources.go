package zwclient

import (
	"fmt"
	"sort"
	"strings"
)

// Resource is one kind of object the API serves and where.
type Resource struct {
	Name       string   // plural, as in the URL: pods
	Singular   string   // pod
	Kind       string   // Pod
	ShortNames []string // po
	// Prefix is the group's path: /api/v1, /apis/apps/v1.
	Prefix     string
	Namespaced bool
	// Updatable resources take PUT; the others are created and deleted.
	Updatable bool
	// Watchable collections take ?watch=true.
	Watchable bool
}

// Resources is every resource the API serves.
var Resources = []Resource{
	{Name: "namespaces", Singular: "namespace", Kind: "Namespace", ShortNames: []string{"ns"}, Prefix: "/api/v1", Watchable: true},
	{Name: "pods", Singular: "pod", Kind: "Pod", ShortNames: []string{"po"}, Prefix: "/api/v1", Namespaced: true, Updatable: true, Watchable: true},
	{Name: "nodes", Singular: "node", Kind: "Node", ShortNames: []string{"no"}, Prefix: "/api/v1", Updatable: true, Watchable: true},
	{Name: "images", Singular: "image", Kind: "Image", ShortNames: []string{"img"}, Prefix: "/api/v1", Watchable: true},
	{Name: "services", Singular: "service", Kind: "Service", ShortNames: []string{"svc"}, Prefix: "/api/v1", Namespaced: true, Updatable: true, Watchable: true},
	{Name: "secrets", Singular: "secret", Kind: "Secret", Prefix: "/api/v1", Namespaced: true, Updatable: true, Watchable: true},
	{Name: "persistentvolumeclaims", Singular: "persistentvolumeclaim", Kind: "PersistentVolumeClaim", ShortNames: []string{"pvc"}, Prefix: "/api/v1", Namespaced: true, Updatable: true, Watchable: true},
	{Name: "resourcequotas", Singular: "resourcequota", Kind: "ResourceQuota", ShortNames: []string{"quota"}, Prefix: "/api/v1", Namespaced: true, Updatable: true, Watchable: true},
	{Name: "limitranges", Singular: "limitrange", Kind: "LimitRange", ShortNames: []string{"limits"}, Prefix: "/api/v1", Namespaced: true, Updatable: true, Watchable: true},
	{Name: "endpoints", Singular: "endpoints", Kind: "Endpoints", ShortNames: []string{"ep"}, Prefix: "/api/v1", Namespaced: true, Watchable: true},
	{Name: "tokens", Singular: "token", Kind: "Token", ShortNames: []string{"tok"}, Prefix: "/api/v1"},
	{Name: "deployments", Singular: "deployment", Kind: "Deployment", ShortNames: []string{"deploy"}, Prefix: "/apis/apps/v1", Namespaced: true, Updatable: true, Watchable: true},
	{Name: "controllerrevisions", Singular: "controllerrevision", Kind: "ControllerRevision", Prefix: "/apis/apps/v1", Namespaced: true, Watchable: true},
	{Name: "replicasets", Singular: "replicaset", ShortNames: []string{"rs"}, Kind: "ReplicaSet", Prefix: "/apis/apps/v1", Namespaced: true, Watchable: true},
	{Name: "jobs", Singular: "job", Kind: "Job", Prefix: "/apis/batch/v1", Namespaced: true, Watchable: true},
	{Name: "events", Singular: "event", Kind: "Event", ShortNames: []string{"ev"}, Prefix: "/api/v1", Namespaced: true, Watchable: true},
	{Name: "volumesnapshots", Singular: "volumesnapshot", Kind: "VolumeSnapshot", ShortNames: []string{"vs"}, Prefix: "/apis/snapshot.storage.k8s.io/v1", Namespaced: true, Watchable: true},
}

// LookupResource finds a resource by plural, singular, short name or kind,
// case-insensitively.
func LookupResource(name string) (Resource, error) {
	n := strings.ToLower(name)
	for _, r := range Resources {
		if n == r.Name || n == r.Singular || n == strings.ToLower(r.Kind) {
			return r, nil
		}
		for _, s := range r.ShortNames {
			if n == s {
				return r, nil
			}
		}
	}
	return Resource{}, fmt.Errorf("the server doesn't have a resource type %q", name)
}

// ResourceForKind finds the resource of an object's kind.
func ResourceForKind(kind string) (Resource, error) {
	for _, r := range Resources {
		if r.Kind == kind {
			return r, nil
		}
	}
	return Resource{}, fmt.Errorf("no resource of kind %q", kind)
}

// ResourceNames lists every name a resource type may be given by, sorted,
// for shell completion.
func ResourceNames() []string {
	var out []string
	for _, r := range Resources {
		out = append(out, r.Name)
		out = append(out, r.ShortNames...)
	}
	sort.Strings(out)
	return out
}

// CollectionPath is the URL path of the resource's objects in ns (every
// namespace when ns is empty or the resource is cluster-scoped).
func (r Resource) CollectionPath(ns string) string {
	if r.Namespaced && ns != "" {
		return r.Prefix + "/namespaces/" + ns + "/" + r.Name
	}
	return r.Prefix + "/" + r.Name
}

// ObjectPath is the URL path of one object.
func (r Resource) ObjectPath(ns, name string) string {
	if r.Name == "namespaces" {
		return r.Prefix + "/namespaces/" + name
	}
	return r.CollectionPath(ns) + "/" + name
}
