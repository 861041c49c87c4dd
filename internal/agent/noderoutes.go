package agent

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/noderoutes"
)

// DefaultNodeRouteInterval is how often the node's routes to the other
// nodes' pod CIDRs are compared with the Nodes and the routing table: a
// new node is routed to, a departed one's route removed, and a route an
// operator deleted put back within about this long.
const DefaultNodeRouteInterval = 10 * time.Second

// NodeRoutesFile, in StateDir, lists the routes the agent programmed, so
// a later run removes one to a node deleted meanwhile.
const NodeRoutesFile = "noderoutes.json"

// nodeListTimeout bounds one listing of the Nodes: a control plane that
// does not answer holds back no repair of the routes.
const nodeListTimeout = 30 * time.Second

// programNodeRoutes keeps, until ctx ends, a route in the global zone from
// every other node's pod CIDR to that node's address, and IPv4 forwarding
// on for the pods' gateway link and the underlay link (the one holding
// the node's own address), every NodeRouteInterval (at once, first). It
// keeps the last node list while the control plane is unreachable, so
// drift is still repaired then.
func (a *Agent) programNodeRoutes(ctx context.Context) {
	gz := a.host.GlobalZone()
	own := a.podCIDR // fixed for the agent's life (register refuses a change)
	rec := &noderoutes.Reconciler{Stack: gz, Table: a.host.RoutingTable}
	if a.cfg.StateDir != "" {
		rec.LedgerFile = filepath.Join(a.cfg.StateDir, NodeRoutesFile)
	}
	t := time.NewTicker(a.cfg.NodeRouteInterval)
	defer t.Stop()
	var nodes []model.Node
	listed := false
	var lastListErr, lastProblem, lastSkipped string
	for {
		lctx, cancel := context.WithTimeout(ctx, nodeListTimeout)
		list, err := a.api.Nodes(lctx)
		cancel()
		switch {
		case err == nil:
			nodes, listed = list, true
			if lastListErr != "" {
				a.log.Info("listing the nodes again")
			}
			lastListErr = ""
		case ctx.Err() == nil && err.Error() != lastListErr:
			lastListErr = err.Error()
			a.log.Warn("cannot list the nodes; keeping the routes to the nodes last listed", "err", err)
		}
		var problems []string
		if listed {
			want, skipped := noderoutes.Want(a.cfg.Node, nodes)
			if s := skippedText(skipped); s != lastSkipped {
				if s != "" {
					a.log.Warn("nodes not routed to", "nodes", s)
				}
				lastSkipped = s
			}
			res, err := rec.Reconcile(ctx, want, own)
			if err != nil {
				problems = append(problems, err.Error())
			}
			for _, f := range res.Failed {
				problems = append(problems, f.Error())
			}
			if res.Changed() {
				a.log.Info("routes to the other nodes' pods converged", "routes", len(want),
					"added", routeList(res.Add), "removed", routeList(res.Delete))
			}
		}
		turned, err := noderoutes.Forwarding(ctx, gz, a.forwardingLinks(ctx)...)
		if err != nil {
			problems = append(problems, err.Error())
		}
		if len(turned) > 0 {
			a.log.Info("IPv4 forwarding turned on", "interfaces", turned)
		}
		if p := strings.Join(problems, "; "); p != lastProblem && ctx.Err() == nil {
			if p != "" {
				a.log.Warn("routes to the other nodes' pods not in force; retrying", "problem", p)
			} else if lastProblem != "" {
				a.log.Info("routes to the other nodes' pods in force again")
			}
			lastProblem = p
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// forwardingLinks are the interfaces pod traffic between nodes crosses:
// the pods' gateway and the underlay interface, the one holding the
// node's address (none when that address is the loopback's or no
// interface of the global zone holds it, as behind NAT).
func (a *Agent) forwardingLinks(ctx context.Context) []string {
	links := []string{GatewayLink}
	ip, err := netip.ParseAddr(a.endpointIP)
	if err != nil || ip.IsLoopback() {
		return links
	}
	addrs, err := a.host.GlobalZone().Addrs(ctx, "")
	if err != nil {
		return links
	}
	for _, ad := range addrs {
		p, err := netip.ParsePrefix(strings.SplitN(ad.Addr, "%", 2)[0])
		if err != nil || p.Addr() != ip {
			continue
		}
		if ifc, _, _ := strings.Cut(ad.Obj, "/"); ifc != "lo0" && !slices.Contains(links, ifc) {
			links = append(links, ifc)
		}
	}
	return links
}

func skippedText(s []noderoutes.Skipped) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = x.Node + ": " + x.Reason
	}
	return strings.Join(parts, "; ")
}

func routeList(rs []noderoutes.Route) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s via %s", r.Dest, r.Gateway)
		if r.Node != "" {
			parts[i] += " (" + r.Node + ")"
		}
	}
	return strings.Join(parts, ", ")
}
