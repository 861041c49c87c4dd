package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/sim"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// observation is the whole system as seen at one moment: the API's
// objects, each host's state and the address tables.
type observation struct {
	pods        []model.Pod
	services    []model.Service
	claims      []model.PersistentVolumeClaim
	deployments []model.Deployment
	hosts       map[string]*sim.State // by node name
	roots       map[string]string     // each node's simulator root
	ipAllocs    map[string]string     // pod uid → address
	clusterIPs  int
	// podWorkflows are the workflow IDs of the running pod lifecycles.
	podWorkflows map[string]bool
	// atRestEvents are the events of the deployment at rest.
	atRestEvents []model.Event
}

// observe reads everything the checks need; an error means a part could
// not be read (a process still down), and the caller tries again.
func observe(ctx context.Context, s *stack, a *api) (*observation, error) {
	o := &observation{hosts: map[string]*sim.State{}, roots: map[string]string{}, ipAllocs: map[string]string{}}
	var pods model.List[model.Pod]
	var svcs model.List[model.Service]
	var claims model.List[model.PersistentVolumeClaim]
	var deps model.List[model.Deployment]
	if !a.get(ctx, podsPath, &pods) || !a.get(ctx, servicesPath, &svcs) || !a.get(ctx, claimsPath, &claims) || !a.get(ctx, deploymentsPath, &deps) {
		return nil, fmt.Errorf("the API did not answer every list")
	}
	o.pods, o.services, o.claims, o.deployments = pods.Items, svcs.Items, claims.Items, deps.Items
	var evs model.List[model.Event]
	if !a.get(ctx, eventsPath+"?fieldSelector=involvedObject.name%3D"+atRestName, &evs) {
		return nil, fmt.Errorf("the API did not answer the list of events")
	}
	o.atRestEvents = evs.Items
	for i, n := range s.Nodes.Nodes {
		out, err := s.simCmd(ctx, i, "state")
		if err != nil {
			return nil, err
		}
		var st sim.State
		if err := json.Unmarshal(out, &st); err != nil {
			return nil, fmt.Errorf("state of %s: %w", n.Name, err)
		}
		o.hosts[n.Name] = &st
		o.roots[n.Name] = n.Root
	}
	rows, err := s.DB.Query(ctx, "SELECT pod_uid::text, host(ip) FROM ip_allocations")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var uid, ip string
		if err := rows.Scan(&uid, &ip); err != nil {
			return nil, err
		}
		o.ipAllocs[uid] = ip
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := s.DB.QueryRow(ctx, "SELECT count(*) FROM cluster_ips").Scan(&o.clusterIPs); err != nil {
		return nil, err
	}
	o.podWorkflows = map[string]bool{}
	var page []byte
	for {
		resp, err := s.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: devstack.DefaultNamespace,
			Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", podcontract.WorkflowName), NextPageToken: page})
		if err != nil {
			return nil, fmt.Errorf("list pod workflows: %w", err)
		}
		for _, e := range resp.Executions {
			o.podWorkflows[e.GetExecution().GetWorkflowId()] = true
		}
		if page = resp.NextPageToken; len(page) == 0 {
			return o, nil
		}
	}
}

// lifecycleFaults are the pods without a running lifecycle workflow and
// the running lifecycles without their pod: every pod row has exactly
// one, and every lifecycle its row. A finished pod's workflow may have
// ended.
func (o *observation) lifecycleFaults() []string {
	var out []string
	rows := map[string]bool{}
	for _, p := range o.pods {
		id := podcontract.WorkflowID(p.Metadata.Namespace, p.Metadata.Name)
		rows[id] = true
		if !o.podWorkflows[id] && !terminal(p) {
			out = append(out, fmt.Sprintf("pod %s (%s) has no running lifecycle", p.Metadata.Name, p.Status.Phase))
		}
	}
	for id := range o.podWorkflows {
		if !rows[id] {
			out = append(out, fmt.Sprintf("lifecycle %s runs without its pod", id))
		}
	}
	return out
}

func ownerKind(p model.Pod) string {
	for _, r := range p.Metadata.OwnerReferences {
		return r.Kind
	}
	return ""
}

func terminal(p model.Pod) bool {
	return p.Status.Phase == model.PodSucceeded || p.Status.Phase == model.PodFailed
}

// settled reports whether a pod is where it should end: Running and
// Ready, or finished for a job's pod, and not being deleted.
func settled(p model.Pod) bool {
	if p.Metadata.DeletionTimestamp != nil {
		return false
	}
	if ownerKind(p) == model.KindJob {
		return terminal(p)
	}
	return p.RunningAndReady()
}

// hostPods are the pods that must hold a zone: placed and not finished.
func (o *observation) hostPods() map[string]model.Pod {
	out := map[string]model.Pod{}
	for _, p := range o.pods {
		if p.Spec.NodeName != "" && !terminal(p) {
			out[names.ZoneName(p.Metadata.Namespace, p.Metadata.Name, p.Metadata.UID)] = p
		}
	}
	return out
}

// leaks counts what hosts hold for no pod: zones, pod VNICs, zone
// datasets. A finished job pod's zone may remain until its pod is
// removed, so any pod of the API accounts for its resources.
func (o *observation) leaks() (zones, vnics, datasets int, what []string) {
	known := map[string]bool{}
	links := map[string]bool{}
	for _, p := range o.pods {
		known[names.ZoneName(p.Metadata.Namespace, p.Metadata.Name, p.Metadata.UID)] = true
		links[names.LinkName("zw", p.Metadata.UID)] = true
	}
	for node, st := range o.hosts {
		for _, z := range st.Zones {
			if z.Name != "global" && !known[z.Name] {
				zones++
				what = append(what, fmt.Sprintf("zone %s on %s (%s)", z.Name, node, z.State))
			}
		}
		for _, l := range st.Links {
			if l.Class == "vnic" && l.Name != agent.GatewayLink && !links[l.Name] {
				vnics++
				what = append(what, fmt.Sprintf("VNIC %s on %s", l.Name, node))
			}
		}
		for _, d := range st.Datasets {
			_, rest, ok := strings.Cut(d.Name, "/zonewright/zones/")
			if !ok || rest == "" {
				continue
			}
			zone, _, _ := strings.Cut(rest, "/")
			if !known[zone] {
				datasets++
				what = append(what, fmt.Sprintf("dataset %s on %s", d.Name, node))
			}
		}
	}
	return zones, vnics, datasets, what
}

// podHostFaults lists the placed, unfinished pods whose node does not
// hold exactly one zone, one VNIC, one dataset and its address for them.
func (o *observation) podHostFaults() []string {
	var out []string
	for zone, p := range o.hostPods() {
		st := o.hosts[p.Spec.NodeName]
		if st == nil {
			out = append(out, fmt.Sprintf("%s: on unknown node %q", p.Metadata.Name, p.Spec.NodeName))
			continue
		}
		var zones, vnics, datasets int
		addr := false
		for _, z := range st.Zones {
			if z.Name != zone {
				continue
			}
			zones++
			for _, a := range z.Addresses {
				if ip, _, _ := strings.Cut(a.Addr, "/"); ip == p.Status.PodIP && ip != "" {
					addr = true
				}
			}
		}
		vnic := names.LinkName("zw", p.Metadata.UID)
		for _, l := range st.Links {
			if l.Name == vnic {
				vnics++
			}
		}
		for _, d := range st.Datasets {
			if strings.HasSuffix(d.Name, "/zonewright/zones/"+zone) {
				datasets++
			}
		}
		if zones != 1 || vnics != 1 || datasets != 1 || (p.RunningAndReady() && !addr) {
			out = append(out, fmt.Sprintf("%s on %s (%s): %d zones, %d VNICs, %d datasets, address %s held: %v",
				p.Metadata.Name, p.Spec.NodeName, p.Status.Phase, zones, vnics, datasets, p.Status.PodIP, addr))
		}
	}
	return out
}

// ipamLeaks are addresses allocated to pods that no longer exist.
func (o *observation) ipamLeaks() []string {
	uids := map[string]bool{}
	for _, p := range o.pods {
		uids[p.Metadata.UID] = true
	}
	var out []string
	for uid, ip := range o.ipAllocs {
		if !uids[uid] {
			out = append(out, fmt.Sprintf("%s held for pod %s", ip, uid))
		}
	}
	return out
}

var ipv4 = regexp.MustCompile(`\b\d+\.\d+\.\d+\.\d+\b`)

// natLeaks are service NAT rules (rdr) naming a service address no
// service has, or a pod address no pod has. The map rules of a node's
// own pod network are not services'.
func (o *observation) natLeaks(serviceCIDR, clusterCIDR string) []string {
	svc, pods := netip.MustParsePrefix(serviceCIDR), netip.MustParsePrefix(clusterCIDR)
	live := map[string]bool{}
	for _, s := range o.services {
		live[s.Spec.ClusterIP] = true
	}
	for _, p := range o.pods {
		live[p.Status.PodIP] = true
	}
	// The cluster DNS's address is the service range's base + 10.
	base := svc.Addr().As4()
	base[3] += 10
	live[netip.AddrFrom4(base).String()] = true
	var out []string
	for node, st := range o.hosts {
		for stack, t := range st.NAT {
			for _, r := range t.Rules {
				if r.Deleted || !strings.HasPrefix(r.Text, "rdr ") {
					continue
				}
				for _, m := range ipv4.FindAllString(r.Text, -1) {
					a, err := netip.ParseAddr(m)
					if err != nil || live[m] || (!svc.Contains(a) && !pods.Contains(a)) {
						continue
					}
					out = append(out, fmt.Sprintf("%s %s: %s", node, stack, r.Text))
					break
				}
			}
		}
	}
	return out
}

// dnsLeaks asks every replica's cluster DNS for each deleted service:
// a name that still resolves is a leak. A live service that does not
// resolve to its ClusterIP is reported too.
func dnsLeaks(ctx context.Context, dnsAddrs []string, deleted []string, live []model.Service) []string {
	var out []string
	for _, addr := range dnsAddrs {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "udp", addr)
		}}
		lookup := func(name string) ([]string, error) {
			c, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			return r.LookupHost(c, name+".default.svc.cluster.local")
		}
		for _, name := range deleted {
			if ips, err := lookup(name); err == nil && len(ips) > 0 {
				out = append(out, fmt.Sprintf("deleted service %s answered by %s: %v", name, addr, ips))
			}
		}
		for _, s := range live {
			ips, err := lookup(s.Metadata.Name)
			if err != nil || len(ips) != 1 || ips[0] != s.Spec.ClusterIP {
				out = append(out, fmt.Sprintf("service %s (%s) answered by %s: %v %v", s.Metadata.Name, s.Spec.ClusterIP, addr, ips, err))
			}
		}
	}
	return out
}

// claimFaults reads the file each claim's first pod wrote, on the node
// the claim is bound to, and compares its checksum with what was written.
func (o *observation) claimFaults(want map[string]string) []string {
	var out []string
	for _, c := range o.claims {
		content, ok := want[c.Metadata.Name]
		if !ok {
			continue
		}
		node := c.Status.NodeName
		st := o.hosts[node]
		if st == nil {
			out = append(out, fmt.Sprintf("claim %s: bound to no known node (%q)", c.Metadata.Name, node))
			continue
		}
		var mount string
		for _, d := range st.Datasets {
			if strings.HasSuffix(d.Name, "/zonewright/volumes/"+c.Metadata.UID) {
				if mount = d.Props["mountpoint"]; mount == "" {
					mount = "/" + d.Name // zfs's default
				}
			}
		}
		if mount == "" {
			out = append(out, fmt.Sprintf("claim %s: no dataset on %s", c.Metadata.Name, node))
			continue
		}
		b, err := os.ReadFile(filepath.Join(o.roots[node], "fs", mount, "chaos"))
		if err != nil || sha256.Sum256(b) != sha256.Sum256([]byte(content)) {
			out = append(out, fmt.Sprintf("claim %s on %s: content %q (%v), want %q", c.Metadata.Name, node, truncate(b, 60), err, content))
		}
	}
	return out
}

// atRestFaults lists what became of the deployment at rest, since it was
// at rest, that no kill
// may cause: a pod of it replaced (pods are uid → name as they were once
// it was available), a failure condition, a warning event (a failed
// rollout, a pod that missed its healthy deadline, a revert).
func (o *observation) atRestFaults(pods map[string]string, since time.Time) []string {
	var out []string
	var d *model.Deployment
	for i := range o.deployments {
		if o.deployments[i].Metadata.Name == atRestName {
			d = &o.deployments[i]
		}
	}
	if d == nil {
		return []string{"the deployment at rest is gone"}
	}
	now := map[string]bool{}
	for _, p := range o.pods {
		if ownerKind(p) != model.KindDeployment || p.Metadata.OwnerReferences[0].Name != atRestName {
			continue
		}
		now[p.Metadata.UID] = true
		if _, ok := pods[p.Metadata.UID]; !ok {
			out = append(out, fmt.Sprintf("pod %s (%s) is new", p.Metadata.Name, p.Metadata.UID))
		}
	}
	for uid, name := range pods {
		if !now[uid] {
			out = append(out, fmt.Sprintf("pod %s (%s) was replaced", name, uid))
		}
	}
	for _, c := range d.Status.Conditions {
		if (c.Type == model.DeploymentProgressing && c.Status == model.ConditionFalse) || (c.Type == model.ConditionReplicaFailure && c.Status == model.ConditionTrue) {
			out = append(out, fmt.Sprintf("condition %s %s/%s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	if d.Status.FailedPods != 0 {
		out = append(out, fmt.Sprintf("failedPods %d", d.Status.FailedPods))
	}
	for _, e := range o.atRestEvents {
		if e.LastTimestamp != nil && e.LastTimestamp.Before(since) {
			continue // its rollout's, before it was at rest (and before any kill)
		}
		if e.InvolvedObject.Kind == model.KindDeployment && e.Type == model.EventWarning {
			out = append(out, fmt.Sprintf("event %s: %s", e.Reason, e.Message))
		}
	}
	return out
}
