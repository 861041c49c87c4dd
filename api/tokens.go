package api

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/store"
)

// Token lifetimes: what a request gets when it names none, and the most it
// may ask. A join token is for joining a host now, and whoever holds it
// until it is spent may join in its place: a day at most, as kubeadm's
// bootstrap tokens by default.
const (
	DefaultTokenTTL     = 24 * time.Hour
	DefaultJoinTokenTTL = time.Hour
	MaxTokenTTL         = 365 * 24 * time.Hour
	MaxJoinTokenTTL     = 24 * time.Hour
)

// TokenRequest asks for a token; Role is for namespace tokens only,
// NodeName for join tokens only.
type TokenRequest struct {
	Role       auth.Role `json:"role,omitempty"`
	TTLSeconds int64     `json:"ttlSeconds,omitempty"`
	NodeName   string    `json:"nodeName,omitempty"`
}

// IssuedToken is the answer to a token request: the only time the whole
// token is shown.
type IssuedToken struct {
	Token     string    `json:"token"`
	ID        string    `json:"id"`
	Role      auth.Role `json:"role"`
	Namespace string    `json:"namespace,omitempty"`
	NodeName  string    `json:"nodeName,omitempty"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// TokenList lists tokens' metadata, never their secrets.
type TokenList struct {
	model.TypeMeta
	Items []auth.Token `json:"items"`
}

// ttl reads ttlSeconds: def when absent, refused beyond limit.
func ttl(req TokenRequest, def, limit time.Duration, errs *model.FieldErrors) time.Duration {
	switch {
	case req.TTLSeconds == 0:
		return def
	case req.TTLSeconds < 0 || req.TTLSeconds > int64(limit/time.Second): // in seconds: a duration would overflow
		*errs = append(*errs, model.FieldError{Field: "ttlSeconds", Type: "FieldValueInvalid",
			Detail: fmt.Sprintf("ttlSeconds: Invalid value: %d: want 1 to %d seconds", req.TTLSeconds, int64(limit/time.Second))})
	}
	return time.Duration(req.TTLSeconds) * time.Second
}

// createToken issues a namespace token (POST …/namespaces/{ns}/tokens) or
// a cluster-admin token (POST /api/v1/tokens).
func (s *Server) createToken(c *gin.Context) {
	var req TokenRequest
	if err := decode(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	ns := c.Param("ns")
	var errs model.FieldErrors
	life := ttl(req, DefaultTokenTTL, MaxTokenTTL, &errs)
	role := req.Role
	if ns == "" {
		if role == "" {
			role = auth.RoleClusterAdmin
		}
		if role != auth.RoleClusterAdmin {
			errs = append(errs, model.FieldError{Field: "role", Type: "FieldValueNotSupported",
				Detail: fmt.Sprintf("role: Unsupported value: %q: cluster tokens are cluster-admin; namespace tokens are issued under /api/v1/namespaces/{ns}/tokens", role)})
		}
	} else if !slices.Contains(auth.NamespaceRoles, role) {
		errs = append(errs, model.FieldError{Field: "role", Type: "FieldValueNotSupported",
			Detail: fmt.Sprintf("role: Unsupported value: %q: supported values: \"view\", \"edit\", \"admin\"", role)})
	}
	if req.NodeName != "" {
		errs = append(errs, model.FieldError{Field: "nodeName", Type: "FieldValueForbidden",
			Detail: "nodeName: Forbidden: only join tokens (/api/v1/nodejointokens) are bound to a node"})
	}
	if len(errs) > 0 {
		s.fail(c, invalid("Token", "", errs))
		return
	}
	id := identity(c)
	if !auth.MayIssue(id, role, ns) {
		s.fail(c, forbidden(id, auth.Attributes{Verb: auth.VerbCreate, Resource: "tokens", Namespace: ns}))
		return
	}
	if ns != "" {
		if _, err := s.store.Namespaces().Get(c.Request.Context(), "", ns); err != nil {
			s.fail(c, err)
			return
		}
	}
	s.issue(c, role, ns, life)
}

func (s *Server) issue(c *gin.Context, role auth.Role, ns string, life time.Duration) {
	s.issued(c)(s.tokens.IssueAs(c.Request.Context(), identity(c), role, ns, life))
}

// issued answers with a token just issued, or the error of issuing it.
func (s *Server) issued(c *gin.Context) func(string, auth.Token, error) {
	return func(secret string, tok auth.Token, err error) {
		switch {
		case errors.Is(err, auth.ErrUnauthenticated):
			err = &apiError{code: http.StatusUnauthorized, reason: "Unauthorized", msg: "the issuing token was revoked or expired"}
		case errors.Is(err, auth.ErrTooManyTokens):
			err = &apiError{code: http.StatusForbidden, reason: "Forbidden", msg: "tokens is forbidden: " + err.Error()}
		}
		if err != nil {
			s.fail(c, err)
			return
		}
		respond(c, http.StatusCreated, IssuedToken{Token: secret, ID: tok.ID, Role: tok.Role, Namespace: tok.Namespace,
			NodeName: tok.NodeName, ExpiresAt: tok.ExpiresAt})
	}
}

// listTokens lists a namespace's tokens, or every token for a cluster-admin.
func (s *Server) listTokens(c *gin.Context) {
	toks, err := s.tokens.List(c.Request.Context(), c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, TokenList{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: "TokenList"}, Items: toks})
}

// revokeToken ends a token at once; under a namespace, only that
// namespace's tokens.
func (s *Server) revokeToken(c *gin.Context) {
	name := c.Param("name")
	if err := s.tokens.Revoke(c.Request.Context(), name, c.Param("ns")); err != nil {
		if errors.Is(err, auth.ErrNotFound) {
			err = notFoundf("token %q not found", name)
		}
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, model.Status{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: "Status"},
		Status: "Success", Code: http.StatusOK, Message: fmt.Sprintf("token %q revoked", name)})
}

// createJoinToken issues a token a node joins the cluster with.
func (s *Server) createJoinToken(c *gin.Context) {
	var req TokenRequest
	if err := decode(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	var errs model.FieldErrors
	life := ttl(req, DefaultJoinTokenTTL, MaxJoinTokenTTL, &errs)
	if req.Role != "" && req.Role != auth.RoleNodeJoin {
		errs = append(errs, model.FieldError{Field: "role", Type: "FieldValueNotSupported", Detail: fmt.Sprintf("role: Unsupported value: %q: a join token's role is node-join", req.Role)})
	}
	if req.NodeName != "" {
		errs = append(errs, model.ValidateName("nodeName", req.NodeName)...)
	}
	if len(errs) > 0 {
		s.fail(c, invalid("NodeJoinToken", "", errs))
		return
	}
	s.issued(c)(s.tokens.IssueJoin(c.Request.Context(), identity(c), req.NodeName, life))
}

// JoinRequest is a node's certificate request, DER (base64 in JSON).
type JoinRequest struct {
	CSR []byte `json:"csr"`
}

// JoinResponse is the node's client certificate, the certificate its
// endpoint serves with (same key, under pki.NodeServingName) and the
// cluster CA, PEM.
type JoinResponse struct {
	Certificate        string `json:"certificate"`
	ServingCertificate string `json:"servingCertificate,omitempty"`
	CACertificate      string `json:"caCertificate"`
}

// joinNode signs a joining node's key: the certificate names the node of
// the path (CN=node:<name>, O=zonewright:nodes) whatever the request asks.
// A join spends its token and may take only the name the token is bound
// to. An unbound token never takes the name of a node that exists: that
// would hand its pods' secrets and its task queue to whoever holds a join
// token. A token bound to that name may (the operator readmits the host,
// e.g. one whose certificate expired while it was down).
func (s *Server) joinNode(c *gin.Context) {
	name, csr, ok := s.nodeCSR(c)
	if !ok {
		return
	}
	id := identity(c)
	if id.JoinNode != "" && id.JoinNode != name {
		s.fail(c, &apiError{code: http.StatusForbidden, reason: "Forbidden",
			msg: fmt.Sprintf("nodes %q is forbidden: this join token is for node %q", name, id.JoinNode)})
		return
	}
	unlock, err := s.nodeCerts.LockJoins(c.Request.Context(), name)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer unlock()
	taken, err := s.nameTaken(c.Request.Context(), name)
	if err != nil {
		s.fail(c, err)
		return
	}
	if taken && id.JoinNode != name {
		s.fail(c, &apiError{code: http.StatusConflict, reason: "AlreadyExists",
			msg: fmt.Sprintf("nodes %q already exists: a new host joins under a name of its own, or after the node is deleted, or with a join token made for this node (--node %s)", name, name)})
		return
	}
	if err := s.tokens.SpendJoinToken(c.Request.Context(), id.TokenID); err != nil {
		if errors.Is(err, auth.ErrUnauthenticated) {
			err = &apiError{code: http.StatusUnauthorized, reason: "Unauthorized", msg: "this join token has been used"}
		}
		s.fail(c, err)
		return
	}
	s.signNode(c, name, csr)
}

// nameTaken: a Node has the name, or a host joined under it and has not
// registered it yet.
func (s *Server) nameTaken(ctx context.Context, name string) (bool, error) {
	if _, err := s.store.Nodes().Get(ctx, "", name); err == nil {
		return true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	return s.nodeCerts.Live(ctx, name)
}

// renewNodeCertificate (nodes/certificate create) signs a node's key
// again, for the node whose current certificate makes the request and
// only for its own name: a node renews before its certificate expires,
// needing no join token. A revoked certificate never gets this far.
func (s *Server) renewNodeCertificate(c *gin.Context) {
	name, csr, ok := s.nodeCSR(c)
	if !ok {
		return
	}
	if node, isNode := requestingNode(c); !isNode || node != name {
		s.fail(c, &apiError{code: http.StatusForbidden, reason: "Forbidden",
			msg: fmt.Sprintf("nodes/certificate %q is forbidden: only the node's own certificate renews it", name)})
		return
	}
	s.signNode(c, name, csr)
}

// nodeCSR reads the node name of the path and the request's CSR,
// answering bad ones.
func (s *Server) nodeCSR(c *gin.Context) (string, []byte, bool) {
	name := c.Param("name")
	if errs := model.ValidateName("metadata.name", name); len(errs) > 0 {
		s.fail(c, invalid(model.KindNode, name, errs))
		return "", nil, false
	}
	var req JoinRequest
	if err := decode(c, &req); err != nil {
		s.fail(c, err)
		return "", nil, false
	}
	if len(req.CSR) == 0 {
		s.fail(c, invalid(model.KindNode, name, model.FieldErrors{{Field: "csr", Type: "FieldValueRequired", Detail: "csr: Required value: a DER certificate request, base64"}}))
		return "", nil, false
	}
	if s.ca == nil {
		s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: "this server holds no cluster CA to sign node certificates with"})
		return "", nil, false
	}
	if csr, err := x509.ParseCertificateRequest(req.CSR); err != nil || csr.CheckSignature() != nil {
		s.fail(c, invalid(model.KindNode, name, model.FieldErrors{{Field: "csr", Type: "FieldValueInvalid", Detail: "csr: Invalid value: not a signed DER certificate request"}}))
		return "", nil, false
	}
	return name, req.CSR, true
}

// signNode answers the node's client and serving certificates for csr's
// key, recorded so that deleting the node revokes them.
func (s *Server) signNode(c *gin.Context, name string, csr []byte) {
	cert, err := s.ca.SignCSR(csr, pki.NodeCNPrefix+name, []string{pki.NodesOrg})
	if err != nil {
		s.fail(c, invalid(model.KindNode, name, model.FieldErrors{{Field: "csr", Type: "FieldValueInvalid", Detail: "csr: Invalid value: " + err.Error()}}))
		return
	}
	serving, err := s.ca.SignServingCSR(csr, pki.NodeCNPrefix+name, pki.NodeServingName(name))
	if err != nil {
		s.fail(c, err)
		return
	}
	leaf, err := pki.ParseCert(cert)
	if err == nil {
		err = s.nodeCerts.Record(c.Request.Context(), name, leaf)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, JoinResponse{Certificate: string(cert), ServingCertificate: string(serving), CACertificate: string(s.ca.CertPEM)})
}
