// Package endpoints keeps every service's Endpoints object equal to the
// pods behind it: the pods its selector matches in its namespace, split
// by readiness, with each service port resolved on each pod.
//
// It is a controller, not a workflow per service: what an Endpoints
// object should hold is a pure function of the current services and pods,
// so there is nothing to remember between steps and no saga to
// compensate. A level-triggered loop over the store's change feed
// recomputes it from the latest state (a pod's Ready flip reaches it in
// milliseconds, with no workflow history per flip), and a restart simply
// lists everything and recomputes, so a crash at any point converges. A
// workflow per service would add history events for every readiness
// change of every pod and a second copy of state that can drift.
package endpoints

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"

	"github.com/zonewright/zonewright/internal/model"
)

// Compute is the subsets svc should have, given the pods of its namespace:
//   - a pod is a candidate when its labels match the selector, it has an
//     address and has not finished (Succeeded or Failed);
//   - ready and not terminating: an address; not ready and not
//     terminating: a notReadyAddress; with publishNotReadyAddresses every
//     candidate is an address;
//   - a terminating pod that is still Ready is used only when no other
//     pod is, so traffic has somewhere to go while a whole set rolls
//     (Kubernetes' serving-and-terminating fallback, KEP-1669);
//   - each service port resolves on each pod (a named targetPort is a
//     container port's name); a pod that resolves none of the ports is
//     left out, and addresses are grouped into subsets by the ports they
//     resolved to, as in Kubernetes.
//
// A service without a selector selects nothing. The result is sorted, so
// equal inputs give equal outputs.
func Compute(svc *model.Service, pods []*model.Pod) []model.EndpointSubset {
	type candidate struct {
		addr  model.EndpointAddress
		ports []model.EndpointPort
		ready bool
	}
	var ready, notReady, terminating []candidate
	if len(svc.Spec.Selector) == 0 {
		return []model.EndpointSubset{}
	}
	for _, p := range pods {
		if p.Metadata.Namespace != svc.Metadata.Namespace || !selects(svc.Spec.Selector, p.Metadata.Labels) {
			continue
		}
		if p.Status.PodIP == "" || p.Status.Phase == model.PodSucceeded || p.Status.Phase == model.PodFailed {
			continue
		}
		ports, ok := resolvePorts(svc, p)
		if !ok {
			continue
		}
		c := candidate{addr: model.EndpointAddress{IP: p.Status.PodIP, NodeName: p.Spec.NodeName,
			TargetRef: &model.ObjectReference{Kind: model.KindPod, Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}},
			ports: ports, ready: podReady(p)}
		// A pod is named in the service's domain only when it asks to be,
		// by hostname and a subdomain that is this service (Kubernetes'
		// rule): two services selecting it do not both claim its name.
		if p.Spec.Hostname != "" && p.Spec.Subdomain == svc.Metadata.Name {
			c.addr.Hostname = p.Spec.Hostname
		}
		switch {
		case svc.Spec.PublishNotReadyAddresses:
			ready = append(ready, c)
		case p.Metadata.DeletionTimestamp != nil:
			if c.ready {
				terminating = append(terminating, c)
			}
		case c.ready:
			ready = append(ready, c)
		default:
			notReady = append(notReady, c)
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}

	bySet := map[string]*model.EndpointSubset{}
	subset := func(ports []model.EndpointPort) *model.EndpointSubset {
		k, _ := json.Marshal(ports)
		s, ok := bySet[string(k)]
		if !ok {
			s = &model.EndpointSubset{Ports: ports}
			bySet[string(k)] = s
		}
		return s
	}
	for _, c := range ready {
		s := subset(c.ports)
		s.Addresses = append(s.Addresses, c.addr)
	}
	for _, c := range notReady {
		s := subset(c.ports)
		s.NotReadyAddresses = append(s.NotReadyAddresses, c.addr)
	}
	out := make([]model.EndpointSubset, 0, len(bySet))
	keys := make([]string, 0, len(bySet))
	for k := range bySet {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := bySet[k]
		sortAddresses(s.Addresses)
		sortAddresses(s.NotReadyAddresses)
		out = append(out, *s)
	}
	return out
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func podReady(p *model.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == model.PodReady {
			return c.Status == model.ConditionTrue
		}
	}
	return false
}

// resolvePorts is svc's ports on pod p, in the service's order, leaving
// out those p cannot serve (a named port it does not declare); ok is false
// when the service has ports and p serves none of them.
func resolvePorts(svc *model.Service, p *model.Pod) (ports []model.EndpointPort, ok bool) {
	for _, sp := range svc.Spec.Ports {
		port := sp.TargetPort.IntVal
		if name := sp.TargetPort.StrVal; name != "" {
			port = namedPort(p, name, sp.Protocol)
		} else if port == 0 {
			port = sp.Port
		}
		if port == 0 {
			continue
		}
		ports = append(ports, model.EndpointPort{Name: sp.Name, Port: port, Protocol: sp.Protocol})
	}
	return ports, len(ports) > 0 || len(svc.Spec.Ports) == 0
}

func namedPort(p *model.Pod, name, protocol string) int32 {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			proto := cp.Protocol
			if proto == "" {
				proto = "TCP"
			}
			if cp.Name == name && proto == protocol {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

// sortAddresses orders by address (numerically), then pod name.
func sortAddresses(as []model.EndpointAddress) {
	slices.SortFunc(as, func(a, b model.EndpointAddress) int {
		x, errX := netip.ParseAddr(a.IP)
		y, errY := netip.ParseAddr(b.IP)
		if errX == nil && errY == nil {
			if c := x.Compare(y); c != 0 {
				return c
			}
		} else if c := strings.Compare(a.IP, b.IP); c != 0 {
			return c
		}
		var an, bn string
		if a.TargetRef != nil {
			an = a.TargetRef.Name
		}
		if b.TargetRef != nil {
			bn = b.TargetRef.Name
		}
		return strings.Compare(an, bn)
	})
}
