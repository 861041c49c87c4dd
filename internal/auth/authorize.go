package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// Verbs, as Kubernetes names them.
const (
	VerbGet    = "get"
	VerbList   = "list"
	VerbWatch  = "watch"
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbPatch  = "patch"
	VerbDelete = "delete"
)

// ReadOnly reports whether a verb changes nothing.
func ReadOnly(verb string) bool {
	return verb == VerbGet || verb == VerbList || verb == VerbWatch
}

// Attributes describe what a request does, from its route.
type Attributes struct {
	Verb        string
	Resource    string
	Subresource string
	// Namespace is empty for cluster-scoped resources and for lists
	// across every namespace.
	Namespace string
	Name      string
	// FieldSelector is a list's or watch's fieldSelector, as given.
	FieldSelector string
}

// ResourcePath is resource or resource/subresource.
func (a Attributes) ResourcePath() string {
	if a.Subresource == "" {
		return a.Resource
	}
	return a.Resource + "/" + a.Subresource
}

// PodNode says which node a pod is bound to ("" for none); an error wrapping
// ErrNotFound for a pod that does not exist.
type PodNode func(ctx context.Context, namespace, name string) (string, error)

// TransferNodes says which nodes volume transfer id moves a claim's data
// between; an error wrapping ErrTransferNotFound for no such transfer.
type TransferNodes func(ctx context.Context, id string) (from, to string, err error)

// ErrTransferNotFound is what a TransferNodes wraps for a transfer no claim
// is making.
var ErrTransferNotFound = errors.New("volume transfer not found")

// Authorizer decides what an identity may do.
type Authorizer struct {
	// PodNode finds the node a pod is bound to, for the node rules.
	PodNode PodNode
	// TransferNodes finds the nodes of a volume transfer, for the node
	// rules.
	TransferNodes TransferNodes
}

// namespacedResources are what namespace roles reach, in their namespace.
var namespacedResources = []string{"pods", "services", "endpoints", "deployments", "controllerrevisions", "replicasets", "jobs",
	"persistentvolumeclaims", "volumesnapshots", "events", "secrets"}

// Allowed decides a request; an error is a failed lookup, not a denial.
func (z *Authorizer) Allowed(ctx context.Context, id Identity, a Attributes) (bool, error) {
	if a.Resource == "discovery" && a.Verb == VerbGet && id.Role != "" && id.Role != RoleNodeJoin {
		return true, nil // which resources exist, as Kubernetes' system:discovery
	}
	if a.Resource == "selfsubjectaccessreviews" && a.Verb == VerbCreate && id.Role != "" && id.Role != RoleNodeJoin {
		return true, nil // what the caller itself may do
	}
	switch id.Role {
	case RoleClusterAdmin:
		return true, nil
	case RoleNodeJoin:
		return a.Verb == VerbCreate && a.Resource == "nodes" && a.Subresource == "join", nil
	case RoleNode:
		return z.nodeAllowed(ctx, id, a)
	case RoleView, RoleEdit, RoleAdmin:
		return namespaceAllowed(id, a), nil
	}
	return false, nil
}

// nodeOnly are what only nodes do, whatever a namespace role grants on the
// resource: a pod's state is its node's report.
var nodeOnly = []string{"pods/report", "pods/secretenv"}

// namespaceAllowed: view reads, edit also writes the workloads and signals
// them, admin also manages the namespace's tokens; all only in the
// token's own namespace.
func namespaceAllowed(id Identity, a Attributes) bool {
	if a.Namespace == "" || a.Namespace != id.Namespace {
		return false
	}
	switch {
	case slices.Contains(nodeOnly, a.ResourcePath()):
		return false
	case a.Resource == "namespaces":
		return a.Verb == VerbGet && a.Name == id.Namespace
	case a.Resource == "tokens":
		return id.Role.rank() >= RoleAdmin.rank()
	case a.Resource == "secrets" && a.Subresource == "values":
		return id.Role.rank() >= RoleAdmin.rank()
	case a.Resource == "resourcequotas" || a.Resource == "limitranges":
		// A namespace's bounds are the cluster's to set (admin may read
		// them, not raise them).
		return ReadOnly(a.Verb)
	case !slices.Contains(namespacedResources, a.Resource):
		return false
	case ReadOnly(a.Verb):
		return true
	}
	return id.Role.rank() >= RoleEdit.rank()
}

// nodeVerbs are what a node may do to its own Node, by subresource.
var nodeVerbs = map[string][]string{
	"":               {VerbGet},
	"status":         {VerbGet, VerbUpdate, VerbPatch},
	"lease":          {VerbGet, VerbUpdate},
	"events":         {VerbCreate},
	"reconcile":      {VerbCreate},
	"orphanremovals": {VerbCreate},
	"certificate":    {VerbCreate},
}

// nodeAllowed is the node authorizer: a node reads and writes its own Node
// (status, lease, events, reconciliation), lists the Nodes (to route to
// their pod CIDRs), reads the pods bound to it and
// reports on them, reads the service network and image artefacts, and
// nothing else.
func (z *Authorizer) nodeAllowed(ctx context.Context, id Identity, a Attributes) (bool, error) {
	switch a.Resource {
	case "nodes":
		if a.Verb == VerbList && a.Name == "" && a.Subresource == "" {
			// Every node's pod CIDR and address: the routes to its
			// pods' peers on the other nodes (noderoutes).
			return id.Node != "", nil
		}
		return OwnNode(id, a) && slices.Contains(nodeVerbs[a.Subresource], a.Verb), nil
	case "pods":
		switch {
		case a.Verb == VerbList || a.Verb == VerbWatch:
			return SelectsOwnPods(id, a), nil
		case a.Verb == VerbGet && (a.Subresource == "" || a.Subresource == "secretenv"), a.Verb == VerbCreate && a.Subresource == "report":
			return z.PodBoundToNode(ctx, id, a)
		}
	case "servicenet":
		return a.Verb == VerbGet, nil
	case "volumetransfers":
		// The node a claim moves from uploads its streams, the node it
		// moves to downloads them; no token travels in the move's history.
		return z.TransferOfNode(ctx, id, a)
	case "images":
		// Any node may install any image: it downloads the artefact with
		// its own certificate, so no download token sits in the
		// distribution's workflow history.
		return a.Verb == VerbGet && a.Subresource == "artefact", nil
	}
	return false, nil
}

// TransferOfNode: the request is the node's side of a volume transfer: an
// upload (update) from the claim's old node, a download (get) by its new
// one. A transfer no claim is making is no node's.
func (z *Authorizer) TransferOfNode(ctx context.Context, id Identity, a Attributes) (bool, error) {
	if id.Node == "" || a.Name == "" || z.TransferNodes == nil {
		return false, nil
	}
	from, to, err := z.TransferNodes(ctx, a.Name)
	if errors.Is(err, ErrTransferNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch a.Verb {
	case VerbUpdate:
		return id.Node == from, nil
	case VerbGet:
		return id.Node == to, nil
	}
	return false, nil
}

// OwnNode: the request names the node itself in its path.
func OwnNode(id Identity, a Attributes) bool {
	return id.Node != "" && a.Resource == "nodes" && a.Name == id.Node
}

// SelectsOwnPods: a list or watch of pods whose field selector keeps only
// the pods bound to the node (spec.nodeName=<node>, possibly ANDed with more).
func SelectsOwnPods(id Identity, a Attributes) bool {
	if id.Node == "" {
		return false
	}
	for _, term := range strings.Split(a.FieldSelector, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(term), "=")
		v = strings.TrimPrefix(v, "=")
		if ok && strings.TrimSpace(k) == "spec.nodeName" && strings.TrimSpace(v) == id.Node {
			return true
		}
	}
	return false
}

// ErrPodNotFound is what a PodNode wraps for a pod that does not exist.
var ErrPodNotFound = errors.New("pod not found")

// PodBoundToNode: the request names a pod bound to the node. A pod that
// does not exist is not the node's: the answer is a denial, so a node
// cannot probe other nodes' pod names.
func (z *Authorizer) PodBoundToNode(ctx context.Context, id Identity, a Attributes) (bool, error) {
	if id.Node == "" || a.Name == "" || z.PodNode == nil {
		return false, nil
	}
	node, err := z.PodNode(ctx, a.Namespace, a.Name)
	if errors.Is(err, ErrPodNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return node == id.Node, nil
}

// MayIssue is escalation prevention: a namespace admin issues tokens of
// the namespace roles in its own namespace; only cluster-admins issue
// cluster-wide tokens.
func MayIssue(id Identity, role Role, namespace string) bool {
	if id.Role == RoleClusterAdmin {
		return true
	}
	return id.Role == RoleAdmin && namespace != "" && namespace == id.Namespace && role.rank() > 0
}
