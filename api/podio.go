package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/containerlog"
	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/kubeforward"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeclient"
	"github.com/zonewright/zonewright/internal/portforward"
)

// A pod's log and exec sessions are its node's to serve: the API checks
// the request, then relays it to the node's endpoint over the node
// channel (nodeclient) and relays the answer back, streaming, never
// buffering it whole, never through Temporal.

// podLog is GET …/pods/{name}/log: the container's output as text/plain.
func (s *Server) podLog(c *gin.Context) {
	q, err := containerlog.ParseQuery(c.Request.URL.Query())
	if err != nil {
		s.fail(c, queryError(err))
		return
	}
	pod, container, ok := s.podContainer(c, q.Container)
	if !ok {
		return
	}
	q.Container = container
	s.relay(c, pod, nodeclient.LogsPath(pod.Metadata.Namespace, pod.Metadata.Name, pod.Metadata.UID, container), q.Values())
}

// podExec is GET or POST …/pods/{name}/exec: an execstream session, which
// the API relays to the node once the request is authorised (always as
// create pods/exec, whatever the method).
func (s *Server) podExec(c *gin.Context) {
	if !s.sameOrigin(c.Request) {
		// A browser page elsewhere must not open a session with its
		// visitor's credentials.
		s.fail(c, forbiddenf("exec sessions are not opened from origin "+c.Request.Header.Get("Origin")))
		return
	}
	opts, err := execstream.ParseQuery(c.Request.URL.Query())
	if err != nil {
		s.fail(c, queryError(err))
		return
	}
	pod, container, ok := s.podContainer(c, opts.Container)
	if !ok {
		return
	}
	if pod.Status.Phase != model.PodRunning {
		s.fail(c, badRequestf("cannot exec into a container of pod %q: it is %s, not Running", pod.Metadata.Name, orPending(pod.Status.Phase)))
		return
	}
	opts.Container = container
	s.relay(c, pod, nodeclient.ExecPath(pod.Metadata.Namespace, pod.Metadata.Name, pod.Metadata.UID, container), opts.Values())
}

// podPortForward is GET …/pods/{name}/portforward?port=N: a connection to
// the pod's port, which its node makes (only the node and other pods
// reach a pod's address), relayed as a portforward stream. kubectl's
// protocol (a WebSocket tunnel, or POST) is podKubePortForward's.
func (s *Server) podPortForward(c *gin.Context) {
	if !s.sameOrigin(c.Request) {
		s.fail(c, forbiddenf("port-forwards are not opened from origin "+c.Request.Header.Get("Origin")))
		return
	}
	if kubeforward.IsTunnel(c.Request) || c.Request.Method == http.MethodPost {
		s.podKubePortForward(c)
		return
	}
	port, err := portforward.Port(c.Request.URL.Query())
	if err != nil {
		s.fail(c, badRequestf("query parameter port: %s", err))
		return
	}
	pod, ok := s.forwardablePod(c)
	if !ok {
		return
	}
	s.relay(c, pod, nodeclient.PortForwardPath(pod.Metadata.Namespace, pod.Metadata.Name, pod.Metadata.UID),
		url.Values{"ip": {pod.Status.PodIP}, "port": {strconv.Itoa(port)}})
}

// forwardablePod is the pod a port-forward names, if it is Running with
// an address on a node; otherwise the request is answered.
func (s *Server) forwardablePod(c *gin.Context) (*model.Pod, bool) {
	pod, err := s.store.Pods().Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	if pod.Status.Phase != model.PodRunning || pod.Spec.NodeName == "" || pod.Status.PodIP == "" {
		s.fail(c, badRequestf("cannot forward to pod %q: it is %s, not Running with an address", pod.Metadata.Name, orPending(pod.Status.Phase)))
		return nil, false
	}
	return pod, true
}

// nodeEndpoint is the base URL of node's endpoint; without one it has
// answered the request.
func (s *Server) nodeEndpoint(c *gin.Context, node string) (*url.URL, bool) {
	if s.nodeEndpoints == nil {
		s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable",
			msg: "logs, exec and port-forwards are unavailable: the API serves plain HTTP, without the cluster CA that nodes' endpoints are reached with"})
		return nil, false
	}
	n, err := s.store.Nodes().Get(c.Request.Context(), "", node)
	if err != nil {
		s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: fmt.Sprintf("node %s cannot be found now", node), cause: err})
		return nil, false
	}
	base, err := nodeclient.BaseURL(n)
	if err != nil {
		s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable",
			msg: fmt.Sprintf("node %s reports no agent endpoint (its agent runs without --listen, or has not reported it yet)", node)})
		return nil, false
	}
	return base, true
}

func orPending(phase string) string {
	if phase == "" {
		return model.PodPending
	}
	return phase
}

func queryError(err error) error {
	var le *containerlog.QueryError
	var ee *execstream.QueryError
	switch {
	case errors.As(err, &le):
		return badRequestf("query parameter %s: %s", le.Param, le.Message)
	case errors.As(err, &ee):
		return badRequestf("query parameter %s: %s", ee.Param, ee.Message)
	}
	return badRequestf("%s", err.Error())
}

// podContainer finds the pod and the container a request names; a pod
// of one container need not name it.
func (s *Server) podContainer(c *gin.Context, container string) (*model.Pod, string, bool) {
	pod, err := s.store.Pods().Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return nil, "", false
	}
	names := make([]string, len(pod.Spec.Containers))
	for i, ct := range pod.Spec.Containers {
		names[i] = ct.Name
	}
	switch {
	case container == "" && len(names) == 1:
		container = names[0]
	case container == "":
		s.fail(c, badRequestf("a container name must be specified for pod %s, choose one of: [%s]", pod.Metadata.Name, strings.Join(names, " ")))
		return nil, "", false
	case !contains(names, container):
		s.fail(c, notFoundf("container %q not found in pod %q (it has: %s)", container, pod.Metadata.Name, strings.Join(names, ", ")))
		return nil, "", false
	}
	if pod.Spec.NodeName == "" {
		s.fail(c, badRequestf("pod %q has no node yet: its containers have not started", pod.Metadata.Name))
		return nil, "", false
	}
	return pod, container, true
}

// relay sends the request to the pod's node's endpoint at path with
// query, and its answer (or upgraded connection) back, until it carries
// nothing either way for streamIdleTimeout. The caller's credentials stay
// here: the node sees only the control plane's.
func (s *Server) relay(c *gin.Context, pod *model.Pod, path string, query url.Values) {
	node := pod.Spec.NodeName
	base, ok := s.nodeEndpoint(c, node)
	if !ok {
		return
	}
	idle, r := connbounds.NewIdle(c.Request, s.streamIdleTimeout)
	defer idle.Stop()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = base.JoinPath()
			r.Out.URL.Path = path
			r.Out.URL.RawPath = ""
			r.Out.URL.RawQuery = query.Encode()
			r.Out.Host = base.Host
			for _, h := range []string{"Authorization", "Cookie", "Origin"} {
				r.Out.Header.Del(h)
			}
		},
		Transport:     s.nodeEndpoints.Transport(node),
		FlushInterval: -1, // a followed log's lines go out as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("node endpoint unreachable", "node", node, "path", path, "err", err)
			s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable",
				msg: fmt.Sprintf("node %s's agent endpoint cannot be reached, or did not prove to be node %s", node, node)})
		},
	}
	proxy.ServeHTTP(idle.Writer(c.Writer), r)
}
