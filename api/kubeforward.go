package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/kubeforward"
	"github.com/zonewright/zonewright/internal/nodeclient"
	"github.com/zonewright/zonewright/internal/portforward"
)

// podKubePortForward is kubectl port-forward's session with a pod: SPDY
// streams, tunnelled in a WebSocket (GET) or upgraded from a POST, the
// ports in the streams' headers. Each forwarded connection is one
// portforward stream to the pod's node, as zwctl's are: the node connects
// to the pod, and its refusal is what kubectl prints. The session ends
// once its connections carry nothing for streamIdleTimeout (SPDY's own
// pings, which both ends send, do not count).
func (s *Server) podKubePortForward(c *gin.Context) {
	tunnel := kubeforward.IsTunnel(c.Request)
	if !tunnel && !kubeforward.IsSPDY(c.Request) {
		s.fail(c, badRequestf("a port-forward by POST is an upgrade to SPDY/3.1 (header Upgrade: SPDY/3.1, X-Stream-Protocol-Version: %s)", kubeforward.Protocol))
		return
	}
	pod, ok := s.forwardablePod(c)
	if !ok {
		return
	}
	node := pod.Spec.NodeName
	base, ok := s.nodeEndpoint(c, node)
	if !ok {
		return
	}
	idle, r := connbounds.NewIdle(c.Request, s.streamIdleTimeout)
	defer idle.Stop()
	client := &http.Client{Transport: s.nodeEndpoints.Transport(node)}
	path := nodeclient.PortForwardPath(pod.Metadata.Namespace, pod.Metadata.Name, pod.Metadata.UID)
	dial := func(ctx context.Context, port uint16) (net.Conn, error) {
		u := base.JoinPath()
		u.Path = path
		u.RawQuery = url.Values{"ip": {pod.Status.PodIP}, "port": {strconv.Itoa(int(port))}}.Encode()
		conn, err := portforward.Dial(ctx, client, u.String())
		var refused *execstream.RefusedError
		switch {
		case errors.As(err, &refused):
			return nil, errors.New(refused.Message)
		case err != nil:
			s.log.Warn("node endpoint unreachable", "node", node, "path", path, "err", err)
			return nil, fmt.Errorf("node %s's agent endpoint cannot be reached, or did not prove to be node %s", node, node)
		}
		return idle.Conn(conn), nil
	}
	var err error
	if tunnel {
		err = kubeforward.ServeTunnel(c.Writer, r, dial)
	} else {
		err = kubeforward.ServeSPDY(c.Writer, r, dial)
	}
	if err != nil {
		s.log.Debug("port-forward session not opened", "pod", pod.Metadata.Namespace+"/"+pod.Metadata.Name, "err", err)
	}
}
