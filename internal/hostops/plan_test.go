package hostops_test

import (
	"reflect"
	"testing"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
)

func TestPlanHost(t *testing.T) {
	const ds = "tank/zonewright/zones"
	web := hostapi.PodSandbox{Namespace: "default", Name: "web", UID: "u-web"}
	db := hostapi.PodSandbox{Namespace: "default", Name: "db", UID: "u-db"}
	gone := hostapi.PodSandbox{Namespace: "default", Name: "gone", UID: "u-gone"}
	const vols = "tank/zonewright/volumes"
	zone := func(s hostapi.PodSandbox, state string) hostapi.InventoryZone {
		return hostapi.InventoryZone{Name: s.ZoneName(), State: state, Pod: s.Namespace + "/" + s.Name, UID: s.UID, VNICs: []string{s.VNICName()}}
	}
	all := func(zones ...hostapi.InventoryZone) hostapi.HostInventory {
		inv := hostapi.HostInventory{Node: "n1", ZonesDataset: ds, Zones: zones}
		for _, z := range zones {
			inv.VNICs = append(inv.VNICs, z.VNICs...)
			inv.Datasets = append(inv.Datasets, ds+"/"+z.Name)
		}
		return inv
	}
	bound := func(s hostapi.PodSandbox, phase string) hostops.BoundPod {
		return hostops.BoundPod{Namespace: s.Namespace, Name: s.Name, UID: s.UID, Phase: phase}
	}
	webOrphan := hostapi.Orphan{Key: "zone/" + web.ZoneName(), Zone: web.ZoneName(), Namespace: "default", Name: "web", UID: "u-web",
		VNICs: []string{web.VNICName()}, Dataset: ds + "/" + web.ZoneName()}

	tests := []struct {
		name string
		inv  hostapi.HostInventory
		pods []hostops.BoundPod
		want hostops.HostPlan
	}{
		{
			name: "a zone of a pod bound here is adopted with its VNIC and dataset",
			inv:  all(zone(web, "running")),
			pods: []hostops.BoundPod{bound(web, "Running")},
			want: hostops.HostPlan{Adopted: []hostapi.InventoryZone{zone(web, "running")}},
		},
		{
			name: "a zone whose pod is gone is an orphan with its VNIC and dataset",
			inv:  all(zone(web, "running")),
			want: hostops.HostPlan{Orphans: []hostapi.Orphan{webOrphan}},
		},
		{
			name: "a pod bound elsewhere under the same name but another uid does not own the zone",
			inv:  all(zone(web, "running")),
			pods: []hostops.BoundPod{{Namespace: "default", Name: "web", UID: "u-web-2", Phase: "Running"}},
			want: hostops.HostPlan{Orphans: []hostapi.Orphan{webOrphan}, Drift: []hostops.PodDrift{{
				Pod:  hostops.BoundPod{Namespace: "default", Name: "web", UID: "u-web-2", Phase: "Running"},
				Zone: hostapi.PodSandbox{Namespace: "default", Name: "web", UID: "u-web-2"}.ZoneName(), Reason: hostops.DriftZoneMissing}}},
		},
		{
			name: "a pending pod bound here keeps its half-made VNIC and dataset",
			inv:  hostapi.HostInventory{ZonesDataset: ds, VNICs: []string{web.VNICName()}, Datasets: []string{ds + "/" + web.ZoneName()}},
			pods: []hostops.BoundPod{bound(web, "Pending")},
			want: hostops.HostPlan{},
		},
		{
			name: "lone VNICs and datasets of no pod are orphans of their own",
			inv:  hostapi.HostInventory{ZonesDataset: ds, VNICs: []string{db.VNICName()}, Datasets: []string{ds + "/" + db.ZoneName()}},
			want: hostops.HostPlan{Orphans: []hostapi.Orphan{
				{Key: "dataset/" + ds + "/" + db.ZoneName(), Dataset: ds + "/" + db.ZoneName()},
				{Key: "vnic/" + db.VNICName(), VNICs: []string{db.VNICName()}},
			}},
		},
		{
			name: "a running pod whose zone is installed but not running drifted",
			inv:  all(zone(web, "installed"), zone(db, "running")),
			pods: []hostops.BoundPod{bound(web, "Running"), bound(db, "Running")},
			want: hostops.HostPlan{Adopted: []hostapi.InventoryZone{zone(web, "installed"), zone(db, "running")},
				Drift: []hostops.PodDrift{{Pod: bound(web, "Running"), Zone: web.ZoneName(), State: "installed", Reason: hostops.DriftZoneNotRunning}}},
		},
		{
			name: "a running pod without a zone drifted; deleting and pending pods do not",
			inv:  all(),
			pods: []hostops.BoundPod{bound(web, "Running"), {Namespace: "default", Name: "db", UID: "u-db", Phase: "Running", Deleting: true},
				{Namespace: "default", Name: "new", UID: "u-new", Phase: "Pending"}},
			want: hostops.HostPlan{Drift: []hostops.PodDrift{{Pod: bound(web, "Running"), Zone: web.ZoneName(), Reason: hostops.DriftZoneMissing}}},
		},
		{
			name: "a bhyve pod's boot volume goes with its orphan zone, stays with a bound pod, and is an orphan alone",
			inv: hostapi.HostInventory{ZonesDataset: ds, VolumesDataset: vols,
				Zones:   []hostapi.InventoryZone{zone(web, "running"), zone(db, "installed")},
				Volumes: []string{vols + "/" + web.ZoneName(), vols + "/" + db.ZoneName(), vols + "/" + gone.ZoneName()}},
			pods: []hostops.BoundPod{bound(web, "Running")},
			want: hostops.HostPlan{Adopted: []hostapi.InventoryZone{zone(web, "running")}, Orphans: []hostapi.Orphan{
				{Key: "volume/" + vols + "/" + gone.ZoneName(), Volume: vols + "/" + gone.ZoneName()},
				{Key: "zone/" + db.ZoneName(), Zone: db.ZoneName(), Namespace: "default", Name: "db", UID: "u-db", Volume: vols + "/" + db.ZoneName()},
			}},
		},
		{
			name: "a zone left on a lost node by a pod that stayed Failed there is an orphan",
			inv:  all(zone(web, "running")),
			pods: []hostops.BoundPod{bound(web, "Failed")},
			want: hostops.HostPlan{Orphans: []hostapi.Orphan{webOrphan}},
		},
		{
			name: "a zone known by name only (no attrs) is an orphan",
			inv: hostapi.HostInventory{ZonesDataset: ds, Datasets: []string{ds + "/" + db.ZoneName()},
				Zones: []hostapi.InventoryZone{{Name: db.ZoneName(), State: "installed"}}},
			pods: []hostops.BoundPod{bound(web, "Pending")},
			want: hostops.HostPlan{Orphans: []hostapi.Orphan{{Key: "zone/" + db.ZoneName(), Zone: db.ZoneName(), Dataset: ds + "/" + db.ZoneName()}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hostops.PlanHost(tt.inv, tt.pods)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PlanHost:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}
