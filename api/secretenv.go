package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// podSecretEnv answers the pod's node with the values its containers'
// env[].valueFrom.secretKeyRef name, read when the node starts them, so
// that no value passes through the pod's workflow. Authorisation:
// resource "pods/secretenv", verb "get", allowed only to the identity of
// the node the pod is bound to (as Kubernetes' Node authorizer allows a
// kubelet the secrets of its own pods). ?uid= names the pod incarnation
// the node is starting.
func (s *Server) podSecretEnv(c *gin.Context) {
	ctx := c.Request.Context()
	ns, name := c.Param("ns"), c.Param("name")
	node, ok := s.requestingNode(c)
	if !ok {
		s.fail(c, forbiddenf("only the node a pod is bound to may read its secret environment"))
		return
	}
	p, err := s.store.Pods().Get(ctx, ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	if p.Spec.NodeName == "" || p.Spec.NodeName != node {
		s.fail(c, forbiddenf(fmt.Sprintf("pod %s/%s is not bound to node %s: only its own node may read its secret environment", ns, name, node)))
		return
	}
	if uid := c.Query("uid"); uid != "" && uid != p.Metadata.UID {
		s.fail(c, &apiError{code: http.StatusConflict, reason: "Conflict", msg: fmt.Sprintf("pod %s/%s is now another pod (uid %s, not %s)", ns, name, p.Metadata.UID, uid)})
		return
	}
	out := model.PodSecretEnv{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: model.KindPodSecretEnv}, Containers: []model.ContainerSecretEnv{}}
	secrets := map[string]*model.Secret{}
	for _, ct := range p.Spec.Containers {
		ce := model.ContainerSecretEnv{Name: ct.Name, Env: []model.SecretValue{}}
		for _, e := range ct.Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			ref := e.ValueFrom.SecretKeyRef
			sec, seen := secrets[ref.Name]
			if !seen {
				sec, err = s.secrets.Get(ctx, ns, ref.Name)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					s.fail(c, s.secretError(c, err))
					return
				}
				secrets[ref.Name] = sec
			}
			var msg string
			if sec == nil {
				msg = fmt.Sprintf("secret %q not found", ref.Name)
			} else if v, ok := sec.Data[ref.Key]; ok {
				ce.Env = append(ce.Env, model.SecretValue{Name: e.Name, Value: string(v)})
				continue
			} else {
				msg = fmt.Sprintf("couldn't find key %s in Secret %s/%s", ref.Key, ns, ref.Name)
			}
			if !ref.IsOptional() {
				out.Missing = append(out.Missing, model.MissingSecretRef{Container: ct.Name, Name: e.Name, Message: msg})
			}
		}
		out.Containers = append(out.Containers, ce)
	}
	c.Header("Cache-Control", "no-store")
	respond(c, http.StatusOK, out)
}
