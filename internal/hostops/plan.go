package hostops

import (
	"sort"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
)

// BoundPod is a pod row bound to a node (spec.nodeName), as far as host
// reconciliation cares.
type BoundPod struct {
	Namespace string
	Name      string
	UID       string
	Phase     string
	Deleting  bool
}

// BoundPodsOf is what the host plan needs of the pods bound to a node.
func BoundPodsOf(pods []model.Pod) []BoundPod {
	out := make([]BoundPod, 0, len(pods))
	for _, p := range pods {
		out = append(out, BoundPod{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID,
			Phase: p.Status.Phase, Deleting: p.Metadata.DeletionTimestamp != nil})
	}
	return out
}

// HostPlan is what reconciling one node's inventory with the pods bound to
// it calls for.
type HostPlan struct {
	// Adopted are the zones of pods bound to the node: kept as they are.
	Adopted []hostapi.InventoryZone
	// Orphans are zonewright resources no pod bound to the node owns.
	Orphans []hostapi.Orphan
	// Drift are running pods whose zone vanished or stopped.
	Drift []PodDrift
}

// PodDrift is a running pod whose zone is not running on its node.
type PodDrift struct {
	Pod    BoundPod
	Zone   string
	State  string // the zone's state; "" when it is missing
	Reason string // DriftZoneMissing or DriftZoneNotRunning
}

// Reasons of PodDrift, also the events the reconciler records.
const (
	DriftZoneMissing    = "ZoneMissing"
	DriftZoneNotRunning = "ZoneNotRunning"
)

// PlanHost compares a node's inventory with the pods bound to it. A zone
// belongs to a bound pod when its zonewright.uid attribute is the pod's
// UID (the name alone is not enough: a pod evicted elsewhere keeps its
// name and UID, but is no longer bound here); a VNIC or dataset belongs to
// a bound pod, or to a zone, when its derived name says so. A Failed or
// Succeeded pod owns nothing (it left its host clean, or its node was lost
// and what it left there is to go). Everything else in the inventory is an
// orphan. Pods that are Running and not being
// deleted, and whose zone is missing or not running, are drift.
func PlanHost(inv hostapi.HostInventory, pods []BoundPod) HostPlan {
	var plan HostPlan
	bound, claimed := claimsOfBound(inv, pods)
	var zoneOf map[string]hostapi.InventoryZone // pod UID -> its zone
	plan.Adopted, plan.Orphans, zoneOf = planZones(inv, bound, claimed)
	plan.Orphans = append(plan.Orphans, unclaimedOrphans(inv, claimed)...)
	sort.Slice(plan.Orphans, func(i, j int) bool { return plan.Orphans[i].Key < plan.Orphans[j].Key })
	plan.Drift = driftOf(pods, zoneOf)
	return plan
}

// claimsOfBound returns the pods that hold something on the host by UID,
// and the names of the VNICs and datasets they own.
func claimsOfBound(inv hostapi.HostInventory, pods []BoundPod) (bound map[string]BoundPod, claimed map[string]bool) {
	bound = map[string]BoundPod{}
	claimed = map[string]bool{}
	for _, p := range pods {
		if p.Phase == model.PodFailed || p.Phase == model.PodSucceeded {
			continue // a finished pod holds nothing on a host (one left on a lost node did)
		}
		bound[p.UID] = p
		s := hostapi.PodSandbox{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		claimed[s.VNICName()] = true
		if ds, err := names.DatasetName(inv.ZonesDataset, s.ZoneName()); err == nil {
			claimed[ds] = true
		}
		claimed[inv.VolumesDataset+"/"+s.ZoneName()] = true
	}
	return bound, claimed
}

// planZones adopts the zones of bound pods and makes the others orphans
// with what of theirs is on the host and unclaimed, adding to claimed
// what each takes.
func planZones(inv hostapi.HostInventory, bound map[string]BoundPod, claimed map[string]bool) (adopted []hostapi.InventoryZone, orphans []hostapi.Orphan, zoneOf map[string]hostapi.InventoryZone) {
	vnics := map[string]bool{}
	for _, v := range inv.VNICs {
		vnics[v] = true
	}
	datasets := map[string]bool{}
	for _, d := range inv.Datasets {
		datasets[d] = true
	}
	for _, v := range inv.Volumes {
		datasets[v] = true
	}
	zoneOf = map[string]hostapi.InventoryZone{}
	for _, z := range inv.Zones {
		ds := inv.ZonesDataset + "/" + z.Name
		vol := inv.VolumesDataset + "/" + z.Name
		if p, ok := bound[z.UID]; ok && z.UID != "" {
			adopted = append(adopted, z)
			zoneOf[p.UID] = z
			for _, v := range z.VNICs {
				claimed[v] = true
			}
			claimed[ds] = true
			claimed[vol] = true
			continue
		}
		o := hostapi.Orphan{Key: "zone/" + z.Name, Zone: z.Name, Namespace: z.Namespace(), Name: z.PodName(), UID: z.UID}
		for _, v := range z.VNICs {
			if vnics[v] && !claimed[v] {
				o.VNICs = append(o.VNICs, v)
				claimed[v] = true
			}
		}
		if datasets[ds] && !claimed[ds] {
			o.Dataset = ds
			claimed[ds] = true
		}
		if datasets[vol] && !claimed[vol] {
			o.Volume = vol
			claimed[vol] = true
		}
		orphans = append(orphans, o)
	}
	return adopted, orphans, zoneOf
}

// unclaimedOrphans are the orphan VNICs, datasets and volumes no zone took.
func unclaimedOrphans(inv hostapi.HostInventory, claimed map[string]bool) []hostapi.Orphan {
	var orphans []hostapi.Orphan
	for _, v := range inv.VNICs {
		if !claimed[v] {
			orphans = append(orphans, hostapi.Orphan{Key: "vnic/" + v, VNICs: []string{v}})
		}
	}
	for _, d := range inv.Datasets {
		if !claimed[d] {
			orphans = append(orphans, hostapi.Orphan{Key: "dataset/" + d, Dataset: d})
		}
	}
	for _, v := range inv.Volumes {
		if !claimed[v] {
			orphans = append(orphans, hostapi.Orphan{Key: "volume/" + v, Volume: v})
		}
	}
	return orphans
}

// driftOf lists the running pods whose zone is missing or not running.
func driftOf(pods []BoundPod, zoneOf map[string]hostapi.InventoryZone) []PodDrift {
	var out []PodDrift
	for _, p := range pods {
		if p.Phase != model.PodRunning || p.Deleting {
			continue
		}
		s := hostapi.PodSandbox{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		z, ok := zoneOf[p.UID]
		switch {
		case !ok:
			out = append(out, PodDrift{Pod: p, Zone: s.ZoneName(), Reason: DriftZoneMissing})
		case z.State != string(illumos.ZoneRunning):
			out = append(out, PodDrift{Pod: p, Zone: z.Name, State: z.State, Reason: DriftZoneNotRunning})
		}
	}
	return out
}
