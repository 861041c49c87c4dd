package nodeserver

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/zonewright/zonewright/internal/portforward"
)

// forwardDialTimeout bounds the connection to the pod's port.
const forwardDialTimeout = 5 * time.Second

// portForward connects to a port of the pod's address, which the control
// plane gives (?ip=, its record of the pod) and which must be one of this
// node's pods', and relays the connection over a portforward stream. A
// pod that does not accept gets the client a 502 before any upgrade.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	t, ok := podTarget(w, r)
	if !ok {
		return
	}
	port, err := portforward.Port(r.URL.Query())
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	var network netip.Prefix
	if s.cfg.PodNetwork != nil {
		network = s.cfg.PodNetwork()
	}
	ip, err := netip.ParseAddr(r.URL.Query().Get("ip"))
	if err != nil || !network.IsValid() || !network.Contains(ip) {
		fail(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("%q is not an address of this node's pods (%s)", r.URL.Query().Get("ip"), network))
		return
	}
	if _, err := os.Stat(s.zoneRootDir(t.zone)); err != nil {
		fail(w, http.StatusNotFound, "NotFound", "the pod has no zone on this node")
		return
	}
	free, why, ok := s.execs.take(t.ns)
	if !ok {
		fail(w, http.StatusTooManyRequests, "TooManyRequests", slotsFull("exec sessions and port-forwards", why, s.execs))
		return
	}
	defer free()
	pod, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, uint16(port)).String(), forwardDialTimeout)
	if err != nil {
		fail(w, http.StatusBadGateway, "BadGateway", fmt.Sprintf("pod %s does not accept connections on port %d: %v", t.pod, port, unwrapOp(err)))
		return
	}
	defer pod.Close()
	client, err := portforward.Accept(w, r)
	if err != nil {
		return // Accept answered
	}
	portforward.Join(client, pod, nil)
}

// unwrapOp is a dial error without the addresses the message already has.
func unwrapOp(err error) error {
	if op, ok := err.(*net.OpError); ok && op.Err != nil {
		if se, ok := op.Err.(*os.SyscallError); ok {
			return se.Err
		}
		return op.Err
	}
	return err
}
