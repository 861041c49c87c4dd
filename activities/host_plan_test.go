package activities_test

import (
	"reflect"
	"testing"

	"github.com/zonewright/zonewright/activities"
)

func TestPlanHost(t *testing.T) {
	const ds = "tank/zonewright/zones"
	web := activities.PodSandbox{Namespace: "default", Name: "web", UID: "u-web"}
	db := activities.PodSandbox{Namespace: "default", Name: "db", UID: "u-db"}
	gone := activities.PodSandbox{Namespace: "default", Name: "gone", UID: "u-gone"}
	const vols = "tank/zonewright/volumes"
	zone := func(s activities.PodSandbox, state string) activities.InventoryZone {
		return activities.InventoryZone{Name: s.ZoneName(), State: state, Pod: s.Namespace + "/" + s.Name, UID: s.UID, VNICs: []string{s.VNICName()}}
	}
	all := func(zones ...activities.InventoryZone) activities.HostInventory {
		inv := activities.HostInventory{Node: "n1", ZonesDataset: ds, Zones: zones}
		for _, z := range zones {
			inv.VNICs = append(inv.VNICs, z.VNICs...)
			inv.Datasets = append(inv.Datasets, ds+"/"+z.Name)
		}
		return inv
	}
	bound := func(s activities.PodSandbox, phase string) activities.BoundPod {
		return activities.BoundPod{Namespace: s.Namespace, Name: s.Name, UID: s.UID, Phase: phase}
	}
	webOrphan := activities.Orphan{Key: "zone/" + web.ZoneName(), Zone: web.ZoneName(), Namespace: "default", Name: "web", UID: "u-web",
		VNICs: []string{web.VNICName()}, Dataset: ds + "/" + web.ZoneName()}

	tests := []struct {
		name string
		inv  activities.HostInventory
		pods []activities.BoundPod
		want activities.HostPlan
	}{
		{
			name: "a zone of a pod bound here is adopted with its VNIC and dataset",
			inv:  all(zone(web, "running")),
			pods: []activities.BoundPod{bound(web, "Running")},
			want: activities.HostPlan{Adopted: []activities.InventoryZone{zone(web, "running")}},
		},
		{
			name: "a zone whose pod is gone is an orphan with its VNIC and dataset",
			inv:  all(zone(web, "running")),
			want: activities.HostPlan{Orphans: []activities.Orphan{webOrphan}},
		},
		{
			name: "a pod bound elsewhere under the same name but another uid does not own the zone",
			inv:  all(zone(web, "running")),
			pods: []activities.BoundPod{{Namespace: "default", Name: "web", UID: "u-web-2", Phase: "Running"}},
			want: activities.HostPlan{Orphans: []activities.Orphan{webOrphan}, Drift: []activities.PodDrift{{
				Pod:  activities.BoundPod{Namespace: "default", Name: "web", UID: "u-web-2", Phase: "Running"},
				Zone: activities.PodSandbox{Namespace: "default", Name: "web", UID: "u-web-2"}.ZoneName(), Reason: activities.DriftZoneMissing}}},
		},
		{
			name: "a pending pod bound here keeps its half-made VNIC and dataset",
			inv:  activities.HostInventory{ZonesDataset: ds, VNICs: []string{web.VNICName()}, Datasets: []string{ds + "/" + web.ZoneName()}},
			pods: []activities.BoundPod{bound(web, "Pending")},
			want: activities.HostPlan{},
		},
		{
			name: "lone VNICs and datasets of no pod are orphans of their own",
			inv:  activities.HostInventory{ZonesDataset: ds, VNICs: []string{db.VNICName()}, Datasets: []string{ds + "/" + db.ZoneName()}},
			want: activities.HostPlan{Orphans: []activities.Orphan{
				{Key: "dataset/" + ds + "/" + db.ZoneName(), Dataset: ds + "/" + db.ZoneName()},
				{Key: "vnic/" + db.VNICName(), VNICs: []string{db.VNICName()}},
			}},
		},
		{
			name: "a running pod whose zone is installed but not running drifted",
			inv:  all(zone(web, "installed"), zone(db, "running")),
			pods: []activities.BoundPod{bound(web, "Running"), bound(db, "Running")},
			want: activities.HostPlan{Adopted: []activities.InventoryZone{zone(web, "installed"), zone(db, "running")},
				Drift: []activities.PodDrift{{Pod: bound(web, "Running"), Zone: web.ZoneName(), State: "installed", Reason: activities.DriftZoneNotRunning}}},
		},
		{
			name: "a running pod without a zone drifted; deleting and pending pods do not",
			inv:  all(),
			pods: []activities.BoundPod{bound(web, "Running"), {Namespace: "default", Name: "db", UID: "u-db", Phase: "Running", Deleting: true},
				{Namespace: "default", Name: "new", UID: "u-new", Phase: "Pending"}},
			want: activities.HostPlan{Drift: []activities.PodDrift{{Pod: bound(web, "Running"), Zone: web.ZoneName(), Reason: activities.DriftZoneMissing}}},
		},
		{
			name: "a bhyve pod's boot volume goes with its orphan zone, stays with a bound pod, and is an orphan alone",
			inv: activities.HostInventory{ZonesDataset: ds, VolumesDataset: vols,
				Zones:   []activities.InventoryZone{zone(web, "running"), zone(db, "installed")},
				Volumes: []string{vols + "/" + web.ZoneName(), vols + "/" + db.ZoneName(), vols + "/" + gone.ZoneName()}},
			pods: []activities.BoundPod{bound(web, "Running")},
			want: activities.HostPlan{Adopted: []activities.InventoryZone{zone(web, "running")}, Orphans: []activities.Orphan{
				{Key: "volume/" + vols + "/" + gone.ZoneName(), Volume: vols + "/" + gone.ZoneName()},
				{Key: "zone/" + db.ZoneName(), Zone: db.ZoneName(), Namespace: "default", Name: "db", UID: "u-db", Volume: vols + "/" + db.ZoneName()},
			}},
		},
		{
			name: "a zone left on a lost node by a pod that stayed Failed there is an orphan",
			inv:  all(zone(web, "running")),
			pods: []activities.BoundPod{bound(web, "Failed")},
			want: activities.HostPlan{Orphans: []activities.Orphan{webOrphan}},
		},
		{
			name: "a zone known by name only (no attrs) is an orphan",
			inv: activities.HostInventory{ZonesDataset: ds, Datasets: []string{ds + "/" + db.ZoneName()},
				Zones: []activities.InventoryZone{{Name: db.ZoneName(), State: "installed"}}},
			pods: []activities.BoundPod{bound(web, "Pending")},
			want: activities.HostPlan{Orphans: []activities.Orphan{{Key: "zone/" + db.ZoneName(), Zone: db.ZoneName(), Dataset: ds + "/" + db.ZoneName()}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := activities.PlanHost(tt.inv, tt.pods)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PlanHost:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}
