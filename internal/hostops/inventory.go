package hostops

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
)

// zoneNameRE matches the names names.ZoneName derives: a readable part
// and a 12-hex-digit hash, or "z" and the hash alone.
var zoneNameRE = regexp.MustCompile(`^(z[0-9a-f]{12}|[a-z0-9][a-z0-9_.-]*-[0-9a-f]{12})$`)

// vnicNameRE matches the VNIC names PodSandbox.VNICName derives:
// names.LinkName("zw", uid) is "zw…_" and ten decimal digits.
var vnicNameRE = regexp.MustCompile(`^zw[a-z0-9_]*_[1-9][0-9]{9}$`)

// IsZonewrightZoneName reports whether name has the shape of a derived
// pod zone name.
func IsZonewrightZoneName(name string) bool { return zoneNameRE.MatchString(name) }

// IsZonewrightVNICName reports whether name has the shape of a derived pod
// VNIC name.
func IsZonewrightVNICName(name string) bool { return vnicNameRE.MatchString(name) }

// Inventory lists what zonewright owns on the node. A zone is zonewright's
// when it carries both zonewright attributes, or when it has a derived
// zone name, its zonepath under ZonesPath and its dataset under
// ZonesDataset. A VNIC is zonewright's when it has a derived name and sits
// over the node's etherstub; a dataset when it is a child of ZonesDataset
// with a derived zone name. It changes nothing.
func (h *Host) Inventory(ctx context.Context) (hostapi.HostInventory, error) {
	inv := hostapi.HostInventory{Node: h.Node, ZonesDataset: h.ZonesDataset, VolumesDataset: h.VolumesDataset}
	fail := func(what string, err error) (hostapi.HostInventory, error) {
		return hostapi.HostInventory{}, fmt.Errorf("inventory of node %s: %s: %w", h.Node, what, err)
	}

	ds, err := h.Host.ZFS().List(ctx, illumos.ListOptions{Names: []string{h.ZonesDataset}, Depth: 1, Types: []string{"filesystem"}})
	if err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return fail("list datasets", err)
	}
	ownDatasets := map[string]bool{}
	for _, d := range ds {
		child, ok := strings.CutPrefix(d.Name, h.ZonesDataset+"/")
		if !ok || strings.Contains(child, "/") || !IsZonewrightZoneName(child) {
			continue
		}
		inv.Datasets = append(inv.Datasets, d.Name)
		ownDatasets[child] = true
	}

	if h.VolumesDataset != "" {
		vols, err := h.Host.ZFS().List(ctx, illumos.ListOptions{Names: []string{h.VolumesDataset}, Depth: 1, Types: []string{"volume"}})
		if err != nil && !errors.Is(err, illumos.ErrNotFound) {
			return fail("list volumes", err)
		}
		for _, v := range vols {
			if h.isBootVolume(v.Name) {
				inv.Volumes = append(inv.Volumes, v.Name)
			}
		}
	}

	vnics, err := h.Host.Dladm().VNICs(ctx)
	if err != nil {
		return fail("list VNICs", err)
	}
	for _, v := range vnics {
		if v.Over == h.Etherstub && IsZonewrightVNICName(v.Name) {
			inv.VNICs = append(inv.VNICs, v.Name)
		}
	}

	zones, err := h.Host.Zoneadm().List(ctx)
	if err != nil {
		return fail("list zones", err)
	}
	h.forgetConfigs(zones)
	for _, z := range zones {
		if z.Name == "global" {
			continue
		}
		info, err := h.installedConfig(ctx, z)
		if errors.Is(err, illumos.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return fail("read the configuration of zone "+z.Name, err)
		}
		iz := hostapi.InventoryZone{Name: z.Name, State: string(z.State), Brand: z.Brand, ID: z.ID,
			Pod: attrValue(info.Config, AttrPod), UID: attrValue(info.Config, AttrUID)}
		tagged := iz.UID != "" && strings.Count(iz.Pod, "/") == 1
		named := IsZonewrightZoneName(z.Name) && ownDatasets[z.Name] &&
			info.Config.Zonepath == path.Join(h.ZonesPath, z.Name)
		if !tagged && !named {
			continue // not ours
		}
		if !tagged {
			iz.Pod, iz.UID = "", ""
		}
		for _, n := range info.Config.Nets {
			iz.VNICs = append(iz.VNICs, n.Physical)
		}
		inv.Zones = append(inv.Zones, iz)
	}
	return inv, nil
}

// installedConfig reads the zone's configuration once per zone (name and
// uuid), not at every inventory: a zonecfg per zone per pass would cost a
// node a command per pod for nothing. zonewright changes a configuration
// only through ConfigureZone and DeleteZoneConfig, which drop the cached
// one; an operator's in-place edit of a zone's zonewright attributes is
// seen once the agent restarts.
func (h *Host) installedConfig(ctx context.Context, z illumos.Zone) (illumos.ZoneInfo, error) {
	h.mu.Lock()
	c, ok := h.configs[z.Name]
	h.mu.Unlock()
	if ok && z.UUID != "" && c.uuid == z.UUID {
		return c.info, nil
	}
	info, err := h.Host.Zonecfg().Info(ctx, z.Name)
	if err != nil || z.UUID == "" {
		return info, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.configs == nil {
		h.configs = map[string]cachedConfig{}
	}
	h.configs[z.Name] = cachedConfig{uuid: z.UUID, info: info}
	return info, nil
}

// forgetConfig drops the zone's cached configuration.
func (h *Host) forgetConfig(zone string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.configs, zone)
}

// forgetConfigs drops the cached configurations of zones no longer listed.
func (h *Host) forgetConfigs(listed []illumos.Zone) {
	names := make(map[string]bool, len(listed))
	for _, z := range listed {
		names[z.Name] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.configs {
		if !names[name] {
			delete(h.configs, name)
		}
	}
}

// RemoveOrphan tears an orphan down completely: the zone is halted,
// uninstalled and unconfigured, then its VNICs and dataset go. It checks
// again, on the host, that what it removes is zonewright's (a zone with
// other attributes than the orphan's, a VNIC over another link or a
// dataset outside the zones dataset is left alone), and it is idempotent:
// what is already gone is fine.
func (h *Host) RemoveOrphan(ctx context.Context, o hostapi.Orphan) error {
	const step = "remove an orphan"
	if o.Zone != "" {
		if err := h.removeOrphanZone(ctx, o); err != nil {
			return err
		}
	}
	for _, v := range o.VNICs {
		if !IsZonewrightVNICName(v) {
			return &InvalidError{Err: fmt.Errorf("%s on node %s: %q is not a zonewright VNIC name", step, h.Node, v)}
		}
		got, err := h.Host.Dladm().VNIC(ctx, v)
		if errors.Is(err, illumos.ErrNotFound) {
			continue
		}
		if err != nil {
			return h.orphanFail(ctx, step, o, err)
		}
		if got.Over != h.Etherstub {
			h.log().Warn("leaving a VNIC that is not over the etherstub", "vnic", v, "over", got.Over)
			continue
		}
		if err := h.Host.Dladm().DeleteVNIC(ctx, v); err != nil && !errors.Is(err, illumos.ErrNotFound) {
			return h.orphanFail(ctx, step, o, err)
		}
	}
	if o.Dataset != "" {
		child, ok := strings.CutPrefix(o.Dataset, h.ZonesDataset+"/")
		if !ok || strings.Contains(child, "/") || !IsZonewrightZoneName(child) {
			return &InvalidError{Err: fmt.Errorf("%s on node %s: %q is not a zonewright zone dataset", step, h.Node, o.Dataset)}
		}
		if err := h.Host.ZFS().Destroy(ctx, o.Dataset); err != nil && !errors.Is(err, illumos.ErrNotFound) {
			return h.orphanFail(ctx, step, o, err)
		}
	}
	if o.Volume != "" {
		if !h.isBootVolume(o.Volume) {
			return &InvalidError{Err: fmt.Errorf("%s on node %s: %q is not a zonewright boot volume", step, h.Node, o.Volume)}
		}
		if err := h.Host.ZFS().Destroy(ctx, o.Volume); err != nil && !errors.Is(err, illumos.ErrNotFound) {
			return h.orphanFail(ctx, step, o, err)
		}
	}
	h.log().Info("orphan removed", "orphan", o.String())
	return nil
}

// removeOrphanZone halts, uninstalls and unconfigures the orphan's zone,
// through the pod teardown steps when its pod is known.
func (h *Host) removeOrphanZone(ctx context.Context, o hostapi.Orphan) error {
	const step = "remove an orphan zone"
	info, err := h.Host.Zonecfg().Info(ctx, o.Zone)
	if errors.Is(err, illumos.ErrNotFound) {
		return nil
	}
	if err != nil {
		return h.orphanFail(ctx, step, o, err)
	}
	if uid := attrValue(info.Config, AttrUID); uid != o.UID {
		return &ConflictError{Reason: fmt.Sprintf("%s on node %s: zone %s now belongs to uid %q, not %q; left alone",
			step, h.Node, o.Zone, uid, o.UID)}
	}
	s := hostapi.PodSandbox{Namespace: o.Namespace, Name: o.Name, UID: o.UID}
	if checkSandbox(s) == nil && s.ZoneName() == o.Zone {
		if err := h.HaltZone(ctx, s); err != nil {
			return err
		}
		if err := h.UninstallZone(ctx, s); err != nil {
			return err
		}
		return h.DeleteZoneConfig(ctx, s)
	}
	// A zone known by its name only: the same steps by name.
	za := h.Host.Zoneadm()
	if err := za.Halt(ctx, o.Zone); err != nil && !errors.Is(err, illumos.ErrWrongState) && !errors.Is(err, illumos.ErrNotFound) {
		return h.orphanFail(ctx, step, o, err)
	}
	unlock, err := h.lockZone(ctx, o.Zone)
	if err != nil {
		return h.orphanFail(ctx, step, o, err)
	}
	defer unlock()
	if z, err := za.Get(ctx, o.Zone); err == nil && (z.State == illumos.ZoneInstalled || z.State == illumos.ZoneIncomplete) {
		if err := za.Uninstall(ctx, o.Zone); err != nil && !errors.Is(err, illumos.ErrNotFound) {
			return h.orphanFail(ctx, step, o, err)
		}
	} else if err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return h.orphanFail(ctx, step, o, err)
	}
	if err := h.Host.Zonecfg().Delete(ctx, o.Zone); err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return h.orphanFail(ctx, step, o, err)
	}
	return nil
}

func (h *Host) orphanFail(ctx context.Context, step string, o hostapi.Orphan, err error) error {
	h.log().Warn("orphan removal failed", "orphan", o.String(), "kind", illumos.KindOf(err).String(), "err", err)
	return &Error{What: fmt.Sprintf("%s (%s) on node %s", step, o, h.Node), Err: err}
}

// isBootVolume reports whether name is a direct child of VolumesDataset
// with a derived zone name: a pod's boot volume.
func (h *Host) isBootVolume(name string) bool {
	child, ok := strings.CutPrefix(name, h.VolumesDataset+"/")
	return ok && h.VolumesDataset != "" && !strings.Contains(child, "/") && IsZonewrightZoneName(child)
}
