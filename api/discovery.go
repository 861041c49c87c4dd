package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/model"
)

// Discovery, as Kubernetes' legacy discovery shapes it (kubectl and
// client-go find every resource through it): /api lists the core
// version, /apis the groups, and each group version's resource list is
// derived from the routes, so it can never claim an endpoint that does
// not exist, nor miss one.

// APIVersions answers /api.
type APIVersions struct {
	Kind                       string                      `json:"kind"`
	Versions                   []string                    `json:"versions"`
	ServerAddressByClientCIDRs []ServerAddressByClientCIDR `json:"serverAddressByClientCIDRs"`
}

// ServerAddressByClientCIDR is where clients of a network reach the API.
type ServerAddressByClientCIDR struct {
	ClientCIDR    string `json:"clientCIDR"`
	ServerAddress string `json:"serverAddress"`
}

// APIGroupList answers /apis.
type APIGroupList struct {
	Kind       string     `json:"kind"`
	APIVersion string     `json:"apiVersion"`
	Groups     []APIGroup `json:"groups"`
}

// APIGroup is one group and its versions.
type APIGroup struct {
	Name             string             `json:"name"`
	Versions         []GroupVersionInfo `json:"versions"`
	PreferredVersion GroupVersionInfo   `json:"preferredVersion"`
}

// GroupVersionInfo names a group version.
type GroupVersionInfo struct {
	GroupVersion string `json:"groupVersion"`
	Version      string `json:"version"`
}

// APIResourceList answers /api/v1 and /apis/<group>/<version>.
type APIResourceList struct {
	Kind         string        `json:"kind"`
	APIVersion   string        `json:"apiVersion"`
	GroupVersion string        `json:"groupVersion"`
	Resources    []APIResource `json:"resources"`
}

// APIResource is one resource or subresource of a group version.
type APIResource struct {
	Name         string   `json:"name"`
	Group        string   `json:"group,omitempty"`
	Version      string   `json:"version,omitempty"`
	SingularName string   `json:"singularName"`
	Namespaced   bool     `json:"namespaced"`
	Kind         string   `json:"kind"`
	Verbs        []string `json:"verbs"`
	ShortNames   []string `json:"shortNames,omitempty"`
	Categories   []string `json:"categories,omitempty"`
}

// discoverable are the resources discovery shows: their kinds, singular
// names, kubectl's short names and whether `kubectl get all` lists them.
// A route of a resource not here (servicenet, tokens, volume transfers)
// is zonewright's own and stays out of discovery.
var discoverable = map[string]struct {
	kind, singular string
	short          []string
	all            bool
}{
	"namespaces":               {model.KindNamespace, "namespace", []string{"ns"}, false},
	"nodes":                    {model.KindNode, "node", []string{"no"}, false},
	"pods":                     {model.KindPod, "pod", []string{"po"}, true},
	"services":                 {model.KindService, "service", []string{"svc"}, true},
	"endpoints":                {model.KindEndpoints, "endpoints", []string{"ep"}, false},
	"secrets":                  {model.KindSecret, "secret", nil, false},
	"events":                   {model.KindEvent, "event", []string{"ev"}, false},
	"persistentvolumeclaims":   {model.KindPersistentVolumeClaim, "persistentvolumeclaim", []string{"pvc"}, false},
	"resourcequotas":           {model.KindResourceQuota, "resourcequota", []string{"quota"}, false},
	"limitranges":              {model.KindLimitRange, "limitrange", []string{"limits"}, false},
	"deployments":              {model.KindDeployment, "deployment", []string{"deploy"}, true},
	"controllerrevisions":      {model.KindControllerRevision, "controllerrevision", nil, false},
	"replicasets":              {model.KindReplicaSet, "replicaset", []string{"rs"}, true},
	"jobs":                     {model.KindJob, "job", nil, true},
	"volumesnapshots":          {model.KindVolumeSnapshot, "volumesnapshot", []string{"vs"}, false},
	"selfsubjectaccessreviews": {"SelfSubjectAccessReview", "selfsubjectaccessreview", nil, false},
}

// subresourceKinds are the subresources whose bodies are another group's
// kind, as Kubernetes lists them (kubectl drain looks for pods/eviction
// of policy/v1 before it evicts; kubectl scale reads autoscaling/v1).
var subresourceKinds = map[string]struct{ group, version, kind string }{
	"pods/eviction":     {"policy", "v1", "Eviction"},
	"deployments/scale": {"autoscaling", "v1", model.KindScale},
}

// discovery is what the discovery routes answer, made once from the routes.
type discovery struct {
	groups    APIGroupList
	resources map[string]APIResourceList // by group version ("v1", "apps/v1")
}

func newDiscovery(routes []route) *discovery {
	d := &discovery{groups: APIGroupList{Kind: "APIGroupList", APIVersion: "v1", Groups: []APIGroup{}}, resources: map[string]APIResourceList{}}
	type key struct{ gv, name string }
	found := map[key]*APIResource{}
	var order []key
	for _, rt := range routes {
		a, ok := rt.attributes()
		if !ok {
			continue
		}
		gv, rest, ok := groupVersionOf(rt.path)
		info, known := discoverable[a.Resource]
		if !ok || !known {
			continue
		}
		name := a.Resource
		if a.Subresource != "" {
			name += "/" + a.Subresource
		}
		k := key{gv, name}
		r := found[k]
		if r == nil {
			r = &APIResource{Name: name, Kind: info.kind}
			if sk, ok := subresourceKinds[name]; ok {
				r.Group, r.Version, r.Kind = sk.group, sk.version, sk.kind
			}
			if a.Subresource == "" {
				r.SingularName, r.ShortNames = info.singular, info.short
				if info.all {
					r.Categories = []string{"all"}
				}
			}
			found[k] = r
			order = append(order, k)
		}
		// Namespaced when any of its routes is under a namespace (the
		// collection across namespaces is not).
		if strings.HasPrefix(rest, "namespaces/:ns/") && a.Resource != "namespaces" {
			r.Namespaced = true
		}
		verbs := []string{a.Verb}
		if a.Verb == auth.VerbList && a.Subresource == "" {
			verbs = append(verbs, auth.VerbWatch) // ?watch=true on every list
		}
		for _, v := range verbs {
			if !slices.Contains(r.Verbs, v) {
				r.Verbs = append(r.Verbs, v)
			}
		}
	}
	for _, k := range order {
		l, ok := d.resources[k.gv]
		if !ok {
			l = APIResourceList{Kind: "APIResourceList", APIVersion: "v1", GroupVersion: k.gv}
			if group, version, isGroup := strings.Cut(k.gv, "/"); isGroup {
				v := GroupVersionInfo{GroupVersion: k.gv, Version: version}
				d.groups.Groups = append(d.groups.Groups, APIGroup{Name: group, Versions: []GroupVersionInfo{v}, PreferredVersion: v})
			}
		}
		l.Resources = append(l.Resources, *found[k])
		d.resources[k.gv] = l
	}
	return d
}

// groupVersionOf splits a route's path into its group version ("v1" for
// /api/v1, "apps/v1" for /apis/apps/v1) and the rest.
func groupVersionOf(path string) (gv, rest string, ok bool) {
	if rest, ok := strings.CutPrefix(path, "/api/v1/"); ok {
		return "v1", rest, true
	}
	p, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return "", "", false
	}
	parts := strings.SplitN(p, "/", 3)
	if len(parts) < 3 {
		return "", "", false
	}
	return parts[0] + "/" + parts[1], parts[2], true
}

func (s *Server) apiVersions(c *gin.Context) {
	respond(c, http.StatusOK, APIVersions{Kind: "APIVersions", Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: c.Request.Host}}})
}

func (s *Server) apiGroups(c *gin.Context) { respond(c, http.StatusOK, s.discovery.groups) }

// resourcesOf answers a group version's resource list.
func (s *Server) resourcesOf(gv string) gin.HandlerFunc {
	return func(c *gin.Context) { respond(c, http.StatusOK, s.discovery.resources[gv]) }
}

// discoveryRoutes are the discovery endpoints of the group versions the
// other routes serve; any authenticated identity but a join token reads
// them, as Kubernetes' system:discovery role does.
func (s *Server) discoveryRoutes(gvs ...string) []route {
	rs := []route{
		{http.MethodGet, "/api", s.apiVersions, "get discovery/versions"},
		{http.MethodGet, "/apis", s.apiGroups, "get discovery/groups"},
	}
	for _, gv := range gvs {
		path := "/apis/" + gv
		if gv == "v1" {
			path = "/api/v1"
		}
		rs = append(rs, route{http.MethodGet, path, s.resourcesOf(gv), "get discovery/resources"})
	}
	return rs
}
