// Package auth says who a request comes from (bearer tokens, client
// certificates) and what that identity may do (roles per namespace,
// cluster-admin, and the node rules).
package auth

import (
	"crypto/tls"
	"slices"
	"strings"

	"github.com/zonewright/zonewright/internal/pki"
)

// Role is what a token or certificate grants.
type Role string

const (
	RoleView         Role = "view"
	RoleEdit         Role = "edit"
	RoleAdmin        Role = "admin"
	RoleClusterAdmin Role = "cluster-admin"
	// RoleNodeJoin only lets a node exchange a CSR for its certificate.
	RoleNodeJoin Role = "node-join"
	// RoleNode is a node's certificate identity.
	RoleNode Role = "node"
)

// NamespaceRoles are the roles a namespace token may hold, weakest first.
var NamespaceRoles = []Role{RoleView, RoleEdit, RoleAdmin}

func (r Role) clusterWide() bool { return r == RoleClusterAdmin || r == RoleNodeJoin }

// rank orders the namespace roles: each includes the ones before it.
func (r Role) rank() int { return slices.Index(NamespaceRoles, r) + 1 }

// clusterAdminPrefix starts the common name of a cluster admin's client
// certificate (the other subjects are pki's).
const clusterAdminPrefix = "user:"

// Identity is who a request comes from.
type Identity struct {
	// Name is what the audit log and denials show: token:<id>,
	// node:<name> or the operator certificate's common name.
	Name string
	Role Role
	// Namespace is a namespace token's namespace.
	Namespace string
	// Node is a node identity's node name.
	Node string
	// TokenID is set for bearer tokens.
	TokenID string
	// JoinNode is the node a join token is bound to, if any.
	JoinNode string
	// CertSerial is a node certificate's serial (CertSerial).
	CertSerial string
}

// ClusterAdmin is the identity of the cluster-admin certificate named cn.
func ClusterAdmin(cn string) Identity {
	return Identity{Name: clusterAdminPrefix + cn, Role: RoleClusterAdmin}
}

// FromCertificate maps a client certificate the TLS layer verified
// against the cluster CA to an identity; ok is false for one that grants
// nothing (no verified chain, or a subject of no known kind).
func FromCertificate(state *tls.ConnectionState) (Identity, bool) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return Identity{}, false
	}
	leaf := state.VerifiedChains[0][0]
	cn := leaf.Subject.CommonName
	orgs := leaf.Subject.Organization
	if node, ok := strings.CutPrefix(cn, pki.NodeCNPrefix); ok && node != "" && slices.Contains(orgs, pki.NodesOrg) {
		return Identity{Name: cn, Role: RoleNode, Node: node, CertSerial: CertSerial(leaf)}, true
	}
	if cn != "" && slices.Contains(orgs, pki.ClusterAdminsOrg) {
		return ClusterAdmin(cn), true
	}
	return Identity{}, false
}
