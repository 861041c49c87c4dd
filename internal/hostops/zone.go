package hostops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
)

// Zone attributes that mark a zone as zonewright's and say whose it is, so
// the agent (and the reconciler) can tell its zones from the operator's.
const (
	AttrPod = "zonewright.pod" // namespace/name
	AttrUID = "zonewright.uid"
)

// DefaultBrand is the brand of a sandbox that names none.
const DefaultBrand = "sparse"

// CreateDatasets creates the pod's zone dataset, mounted at the zonepath.
func (h *Host) CreateDatasets(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "create the zone dataset"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	ds, err := h.dataset(s)
	if err != nil {
		return h.invalid(ctx, step, s, err)
	}
	zp := h.zonepath(s)
	zfs := h.Host.ZFS()
	props := map[string]string{"mountpoint": zp}
	quota := "0" // none, as zfs get -p prints it
	if q := h.zoneQuota(s); q > 0 {
		quota = strconv.FormatInt(q, 10)
		props["quota"] = quota
	}
	// zfs create -p succeeds on an existing dataset and leaves its
	// properties alone, so a re-run checks them itself.
	if err := zfs.Create(ctx, ds, props); err != nil {
		return h.fail(ctx, step, s, err)
	}
	have, err := zfs.GetProps(ctx, ds, "mountpoint", "quota")
	if err != nil {
		return h.fail(ctx, step, s, err)
	}
	fix := map[string]string{}
	if have["mountpoint"] != zp {
		fix["mountpoint"] = zp
	}
	if have["quota"] != quota {
		fix["quota"] = quota
		if quota == "0" {
			fix["quota"] = "none"
		}
	}
	if len(fix) > 0 {
		if err := zfs.Set(ctx, ds, fix); err != nil {
			return h.fail(ctx, step, s, err)
		}
	}
	if h.PrepareZonepath != nil {
		if err := h.PrepareZonepath(zp); err != nil {
			return h.fail(ctx, step, s, fmt.Errorf("prepare zonepath %s: %w", zp, err))
		}
	}
	if err := h.createClaimVolumes(ctx, s); err != nil {
		return h.fail(ctx, "create the claims' datasets", s, err)
	}
	if s.Brand == "bhyve" && s.ImageKind == model.ImageBhyveDisk {
		return h.createBootDisk(ctx, s)
	}
	return nil
}

// zoneQuota is the quota of the pod's zone dataset: what its containers
// ask for as ephemeral storage, else the node's default; 0: none.
func (h *Host) zoneQuota(s hostapi.PodSandbox) int64 {
	if s.EphemeralStorageBytes > 0 {
		return s.EphemeralStorageBytes
	}
	return h.ZoneQuota
}

// bootDisk is the volume a bhyve pod boots from: a clone of its image.
func (h *Host) bootDisk(s hostapi.PodSandbox) (string, error) {
	return names.DatasetName(h.VolumesDataset, s.ZoneName())
}

// createBootDisk clones the pod's disk image to its boot volume.
func (h *Host) createBootDisk(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "clone the boot disk"
	vol, err := h.bootDisk(s)
	if err != nil {
		return h.invalid(ctx, step, s, err)
	}
	snap, err := h.imageSnapshot(s.Image)
	if err != nil {
		return h.invalid(ctx, step, s, err)
	}
	zfs := h.Host.ZFS()
	origin, err := zfs.Get(ctx, vol, "origin")
	switch {
	case err == nil && origin == snap:
		return nil // cloned by an earlier attempt
	case err == nil:
		return h.conflict(ctx, step, s, "volume %s exists and is not a clone of %s (origin %s)", vol, snap, origin)
	case !errors.Is(err, illumos.ErrNotFound):
		return h.fail(ctx, step, s, err)
	}
	if ok, err := zfs.Exists(ctx, snap); err != nil {
		return h.fail(ctx, step, s, err)
	} else if !ok {
		return h.imageMissing(s, snap)
	}
	if err := zfs.Clone(ctx, snap, vol, nil); err != nil {
		return h.fail(ctx, step, s, err)
	}
	return nil
}

// DestroyDatasets destroys the pod's datasets; missing ones are fine.
func (h *Host) DestroyDatasets(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "destroy the zone dataset"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	ds, err := h.dataset(s)
	if err != nil {
		return h.invalid(ctx, step, s, err)
	}
	if err := h.Host.ZFS().Destroy(ctx, ds); err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return h.fail(ctx, step, s, err)
	}
	// A bhyve pod's boot volume, if it has one (whatever ImageKind says
	// now, so a teardown never leaves one behind).
	if s.Brand == "bhyve" {
		vol, err := h.bootDisk(s)
		if err != nil {
			return h.invalid(ctx, step, s, err)
		}
		if err := h.Host.ZFS().Destroy(ctx, vol); err != nil && !errors.Is(err, illumos.ErrNotFound) {
			return h.fail(ctx, "destroy the boot disk", s, err)
		}
	}
	return nil
}

// CreateVNIC creates the pod's VNIC over the node's etherstub.
func (h *Host) CreateVNIC(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "create the VNIC"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	dl := h.Host.Dladm()
	name := s.VNICName()
	err := dl.CreateVNIC(ctx, illumos.VNICSpec{Name: name, Over: h.Etherstub})
	if err == nil {
		return nil
	}
	if !errors.Is(err, illumos.ErrAlreadyExists) {
		return h.fail(ctx, step, s, err)
	}
	// Made by an earlier attempt, or a link of that name that is not ours.
	v, gerr := dl.VNIC(ctx, name)
	if gerr != nil {
		if errors.Is(gerr, illumos.ErrNotFound) {
			return h.conflict(ctx, step, s, "link %s exists and is not a VNIC: %v", name, err)
		}
		return h.fail(ctx, step, s, gerr)
	}
	if v.Over != h.Etherstub {
		return h.conflict(ctx, step, s, "VNIC %s exists over %s, not over the etherstub %s; delete it (dladm delete-vnic %s) if it is left over",
			name, v.Over, h.Etherstub, name)
	}
	return nil
}

// DeleteVNIC deletes the pod's VNIC; a missing one is fine.
func (h *Host) DeleteVNIC(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "delete the VNIC"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	if err := h.Host.Dladm().DeleteVNIC(ctx, s.VNICName()); err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return h.fail(ctx, step, s, err)
	}
	return nil
}

// zoneConfig is the configuration the sandbox's zone gets.
func (h *Host) zoneConfig(s hostapi.PodSandbox) (illumos.ZoneConfig, error) {
	if err := checkSandbox(s); err != nil {
		return illumos.ZoneConfig{}, err
	}
	prefix, err := checkSandboxNet(s, h.PodCIDR)
	if err != nil {
		return illumos.ZoneConfig{}, err
	}
	if s.MilliCPU < 0 || s.MemoryBytes < 0 {
		return illumos.ZoneConfig{}, fmt.Errorf("negative cpu (%dm) or memory (%d bytes)", s.MilliCPU, s.MemoryBytes)
	}
	brand := s.Brand
	if brand == "" {
		brand = DefaultBrand
	}
	cfg := illumos.ZoneConfig{
		Name:     s.ZoneName(),
		Brand:    brand,
		Zonepath: h.zonepath(s),
		Autoboot: false,
		IPType:   illumos.IPExclusive,
		Nets:     []illumos.Net{{Physical: s.VNICName(), AllowedAddress: prefix.String(), Defrouter: s.Gateway}},
		Attrs: []illumos.Attr{
			{Name: AttrPod, Type: "string", Value: s.Namespace + "/" + s.Name},
			{Name: AttrUID, Type: "string", Value: s.UID},
		},
	}
	const mib = 1 << 20
	memory := uint64((s.MemoryBytes + mib - 1) / mib * mib) // zonecfg reads back whole units
	if brand == "bhyve" {
		// A bhyve zone is a VM: its size is the guest's, not a cap.
		b := &illumos.BhyveConfig{RAM: memory}
		if s.MilliCPU > 0 {
			b.VCPUs = int((s.MilliCPU + 999) / 1000)
		}
		if s.ImageKind == model.ImageBhyveDisk {
			// The boot volume is delegated to the zone and named as its
			// boot disk (bhyve.7); the device path is illumos's own.
			vol, err := h.bootDisk(s)
			if err != nil {
				return illumos.ZoneConfig{}, err
			}
			cfg.Devices = []string{illumos.ZvolDevice(illumos.DefaultZvolDir, vol)}
			b.BootDisk = vol
		}
		// The claims' volumes follow the boot disk, in the pod's order.
		devs, err := h.claimDevices(s)
		if err != nil {
			return illumos.ZoneConfig{}, err
		}
		cfg.Devices = append(cfg.Devices, devs...)
		if b.RAM != 0 || b.VCPUs != 0 || b.BootDisk != "" {
			cfg.Bhyve = b
		}
		return cfg, nil
	}
	if cfg.FS, err = h.volumeFS(s); err != nil {
		return illumos.ZoneConfig{}, err
	}
	if s.MilliCPU > 0 {
		// capped-cpu is kept in hundredths of a CPU (zone.cpu-cap).
		cfg.CPUCap = math.Ceil(float64(s.MilliCPU)/10) / 100
	}
	if memory > 0 {
		// No swap beyond the memory cap, as Kubernetes runs pods without
		// swap: zone.max-swap bounds what the zone reserves in all (RAM
		// and swap), so a zone cannot page its excess out onto the
		// host's swap. zonecfg's floor for it is 50M.
		cfg.Memory = &illumos.CappedMemory{Physical: memory, Swap: max(memory, minZoneSwap)}
	}
	cfg.MaxProcesses = processLimit(s.MaxProcesses, h.MaxProcesses)
	cfg.MaxLWPs = processLimit(s.MaxLWPs, h.MaxLWPs)
	return cfg, nil
}

// minZoneSwap is the least capped-memory swap zonecfg takes.
const minZoneSwap = 50 << 20

// processLimit is a zone's process limit: the pod's when it asks for one
// below the node's, else the node's; 0: none.
func processLimit(pod, node int64) uint64 {
	switch {
	case pod > 0 && (node <= 0 || pod < node):
		return uint64(pod)
	case node > 0:
		return uint64(node)
	}
	return 0
}

// configDiff lists how have differs from want in what zonewright sets.
func configDiff(have, want illumos.ZoneConfig) []string {
	var d []string
	if have.Brand != want.Brand {
		d = append(d, fmt.Sprintf("brand %q, want %q", have.Brand, want.Brand))
	}
	if have.Zonepath != want.Zonepath {
		d = append(d, fmt.Sprintf("zonepath %q, want %q", have.Zonepath, want.Zonepath))
	}
	if have.Autoboot != want.Autoboot {
		d = append(d, fmt.Sprintf("autoboot %v, want %v", have.Autoboot, want.Autoboot))
	}
	if ip := have.IPType; ip != "" && ip != want.IPType {
		d = append(d, fmt.Sprintf("ip-type %q, want %q", ip, want.IPType))
	}
	if !slices.Equal(have.Nets, want.Nets) {
		d = append(d, fmt.Sprintf("net %+v, want %+v", have.Nets, want.Nets))
	}
	if math.Abs(have.CPUCap-want.CPUCap) > 0.005 {
		d = append(d, fmt.Sprintf("capped-cpu %v, want %v", have.CPUCap, want.CPUCap))
	}
	var hm, wm uint64
	if have.Memory != nil {
		hm = have.Memory.Physical
	}
	if want.Memory != nil {
		wm = want.Memory.Physical
	}
	if hm != wm {
		d = append(d, fmt.Sprintf("capped-memory physical %d, want %d", hm, wm))
	}
	var hb, wb illumos.BhyveConfig
	if have.Bhyve != nil {
		hb = *have.Bhyve
	}
	if want.Bhyve != nil {
		wb = *want.Bhyve
	}
	if hb.VCPUs != wb.VCPUs || hb.RAM != wb.RAM {
		d = append(d, fmt.Sprintf("bhyve vcpus %d ram %d, want vcpus %d ram %d", hb.VCPUs, hb.RAM, wb.VCPUs, wb.RAM))
	}
	if hb.BootDisk != wb.BootDisk {
		d = append(d, fmt.Sprintf("bhyve bootdisk %q, want %q", hb.BootDisk, wb.BootDisk))
	}
	if !slices.EqualFunc(have.FS, want.FS, func(a, b illumos.FS) bool {
		return a.Dir == b.Dir && a.Special == b.Special && a.Type == b.Type && slices.Equal(a.Options, b.Options)
	}) {
		d = append(d, fmt.Sprintf("fs %+v, want %+v", have.FS, want.FS))
	}
	if !slices.Equal(have.Devices, want.Devices) {
		d = append(d, fmt.Sprintf("devices %q, want %q", have.Devices, want.Devices))
	}
	for _, a := range want.Attrs {
		if v := attrValue(have, a.Name); v != a.Value {
			d = append(d, fmt.Sprintf("attr %s %q, want %q", a.Name, v, a.Value))
		}
	}
	return d
}

// limitsDiff lists how have's swap cap and process limits differ from
// want's. A zone installed with others (by an agent of another version, or
// under other node limits) is kept as it is: they are not what makes the
// zone the pod's.
func limitsDiff(have, want illumos.ZoneConfig) []string {
	var d []string
	var hs, ws uint64
	if have.Memory != nil {
		hs = have.Memory.Swap
	}
	if want.Memory != nil {
		ws = want.Memory.Swap
	}
	if hs != ws {
		d = append(d, fmt.Sprintf("capped-memory swap %d, want %d", hs, ws))
	}
	if have.MaxProcesses != want.MaxProcesses || have.MaxLWPs != want.MaxLWPs {
		d = append(d, fmt.Sprintf("max-processes %d max-lwps %d, want max-processes %d max-lwps %d",
			have.MaxProcesses, have.MaxLWPs, want.MaxProcesses, want.MaxLWPs))
	}
	return d
}

func attrValue(cfg illumos.ZoneConfig, name string) string {
	for _, a := range cfg.Attrs {
		if a.Name == name {
			return a.Value
		}
	}
	return ""
}

// ConfigureZone writes the zone configuration (zonecfg). A configuration
// left by an earlier attempt is checked: the same one is success, another
// one of a zone not yet installed is replaced, and a zone of the pod's
// name that belongs to another pod, or that is installed with another
// configuration, is a Conflict.
func (h *Host) ConfigureZone(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "configure the zone"
	cfg, err := h.zoneConfig(s)
	if err != nil {
		return h.invalid(ctx, step, s, err)
	}
	h.forgetConfig(s.ZoneName())
	zc := h.Host.Zonecfg()
	err = zc.Create(ctx, cfg)
	if err == nil {
		return nil
	}
	if !errors.Is(err, illumos.ErrAlreadyExists) {
		return h.fail(ctx, step, s, err)
	}
	info, err := zc.Info(ctx, cfg.Name)
	if err != nil {
		return h.fail(ctx, step, s, err)
	}
	diff, limits := configDiff(info.Config, cfg), limitsDiff(info.Config, cfg)
	if len(diff)+len(limits) == 0 {
		return nil
	}
	if uid := attrValue(info.Config, AttrUID); uid != "" && uid != s.UID {
		return h.conflict(ctx, step, s, "zone %s exists and belongs to pod uid %s", cfg.Name, uid)
	}
	z, err := h.Host.Zoneadm().Get(ctx, cfg.Name)
	if err != nil {
		return h.fail(ctx, step, s, err)
	}
	if z.State != illumos.ZoneConfigured {
		if len(diff) == 0 {
			h.log().Warn("zone installed with other limits is kept as it is", "zone", cfg.Name, "diff", limits)
			return nil
		}
		return h.conflict(ctx, step, s, "zone %s is %s with another configuration (%s); uninstall it first",
			cfg.Name, z.State, strings.Join(diff, "; "))
	}
	diff = append(diff, limits...)
	h.log().Info("replacing a zone configuration left by an earlier attempt", "zone", cfg.Name, "diff", diff)
	if err := zc.Replace(ctx, cfg); err != nil {
		return h.fail(ctx, step, s, err)
	}
	return nil
}

// DeleteZoneConfig deletes the zone configuration; a missing one is fine.
func (h *Host) DeleteZoneConfig(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "delete the zone configuration"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	h.forgetConfig(s.ZoneName())
	if err := h.Host.Zonecfg().Delete(ctx, s.ZoneName()); err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return h.fail(ctx, step, s, err)
	}
	return nil
}

// installOptions are the brand arguments that install the sandbox's
// catalog image: an lx zone clones the image's golden snapshot (the fast
// path) or unpacks its tarball; a bhyve zone boots from the volume
// CreateDatasets cloned; a zone template, or no catalog image, installs
// plainly. An image the node lacks is an *ImageMissingError.
func (h *Host) installOptions(ctx context.Context, s hostapi.PodSandbox) (illumos.InstallOptions, error) {
	brand := s.Brand
	if brand == "" {
		brand = DefaultBrand
	}
	switch {
	case s.ImageKind == "" || s.ImageKind == model.ImageZoneTemplate:
		return illumos.InstallOptions{}, nil
	case brand == "lx" && (s.ImageKind == model.ImageZFSStream || s.ImageKind == model.ImageOCI):
		snap, err := h.installSnapshot(s)
		if err != nil {
			return illumos.InstallOptions{}, h.invalid(ctx, "install the zone", s, err)
		}
		if ok, err := h.Host.ZFS().Exists(ctx, snap); err != nil {
			return illumos.InstallOptions{}, h.fail(ctx, "install the zone (look for the image)", s, err)
		} else if !ok {
			return illumos.InstallOptions{}, h.imageMissing(s, snap)
		}
		return illumos.InstallOptions{Source: snap}, nil
	case brand == "lx" && s.ImageKind == model.ImageLXTarball:
		p := h.tarballPath(s.Image)
		if _, err := os.Stat(p + ".sha256"); err != nil {
			return illumos.InstallOptions{}, h.imageMissing(s, p)
		}
		return illumos.InstallOptions{Tarball: p}, nil
	case brand == "bhyve" && s.ImageKind == model.ImageBhyveDisk:
		return illumos.InstallOptions{}, nil
	}
	return illumos.InstallOptions{}, h.invalid(ctx, "install the zone", s,
		fmt.Errorf("image %s of kind %s cannot install a %s zone", s.Image, s.ImageKind, brand))
}

// installSnapshot is the golden snapshot an lx zone of a dataset image
// clones: an oci image's is that of the digest its pod resolved.
func (h *Host) installSnapshot(s hostapi.PodSandbox) (string, error) {
	if s.ImageKind != model.ImageOCI {
		return h.imageSnapshot(s.Image)
	}
	if s.ImageDigest == "" {
		return "", fmt.Errorf("an oci image's zone needs the image's digest")
	}
	ds, err := h.ociDataset(s.Image, s.ImageDigest)
	return ds + "@" + baseSnapshot, err
}

// InstallZone installs the zone, reporting progress while it runs. An
// installed (or booted) zone is success; a zone left incomplete by a
// failed install is uninstalled and installed again. At most cap(h.Installs) installs run
// at once on the node.
//
// The zone installs from its catalog image (see installOptions), which
// the control plane pulls to the node beforehand.
func (h *Host) InstallZone(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "install the zone"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	name := s.ZoneName()
	za := h.Host.Zoneadm()
	unlock, err := h.lockZone(ctx, name)
	if err != nil {
		return h.fail(ctx, step, s, err)
	}
	defer unlock()

	for range 3 {
		z, err := za.Get(ctx, name)
		if err != nil {
			return h.fail(ctx, step, s, fmt.Errorf("is the zone configured? %w", err))
		}
		switch z.State {
		case illumos.ZoneConfigured:
			return h.install(ctx, step, s)
		case illumos.ZoneIncomplete:
			// A failed or interrupted install: start over.
			h.log().Warn("zone is incomplete after an earlier install; uninstalling it to install again", "zone", name)
			stop := h.heartbeat(ctx, func() any { return "uninstalling incomplete zone " + name })
			err := za.Uninstall(ctx, name)
			stop()
			if err != nil && !errors.Is(err, illumos.ErrWrongState) {
				return h.fail(ctx, step+" (uninstall -F of the incomplete zone)", s, err)
			}
		default:
			return nil // installed, or further along
		}
	}
	return h.fail(ctx, step, s, errors.New("the zone's state keeps changing under the install"))
}

func (h *Host) install(ctx context.Context, step string, s hostapi.PodSandbox) error {
	name := s.ZoneName()
	start := time.Now()
	if h.Installs != nil {
		stop := h.heartbeat(ctx, func() any { return "waiting for an install slot for " + name })
		select {
		case h.Installs <- struct{}{}:
			stop()
		case <-ctx.Done():
			stop()
			return h.fail(ctx, step+" (waiting for an install slot)", s, ctx.Err())
		}
		defer func() { <-h.Installs }()
	}
	stop := h.heartbeat(ctx, func() any {
		return fmt.Sprintf("installing zone %s (%s)", name, time.Since(start).Round(time.Second))
	})
	opts, err := h.installOptions(ctx, s)
	if err != nil {
		stop()
		return err
	}
	err = h.Host.Zoneadm().Install(ctx, name, opts)
	stop()
	if err != nil && !errors.Is(err, illumos.ErrAlreadyExists) {
		return h.fail(ctx, step, s, err)
	}
	h.log().Info("zone installed", "zone", name, "brand", s.Brand, "source", opts.Source, "tarball", opts.Tarball,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// UninstallZone uninstalls the zone (halting it first if it runs).
func (h *Host) UninstallZone(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "uninstall the zone"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	name := s.ZoneName()
	za := h.Host.Zoneadm()
	unlock, err := h.lockZone(ctx, name)
	if err != nil {
		return h.fail(ctx, step, s, err)
	}
	defer unlock()
	for range 3 {
		z, err := za.Get(ctx, name)
		if errors.Is(err, illumos.ErrNotFound) {
			return nil
		}
		if err != nil {
			return h.fail(ctx, step, s, err)
		}
		switch z.State {
		case illumos.ZoneConfigured:
			return nil
		case illumos.ZoneInstalled, illumos.ZoneIncomplete:
			h.keepLogs(s)
			stop := h.heartbeat(ctx, func() any { return "uninstalling zone " + name })
			err := za.Uninstall(ctx, name)
			stop()
			if err == nil {
				return nil
			}
			if !errors.Is(err, illumos.ErrWrongState) {
				return h.fail(ctx, step, s, err)
			}
		default: // in the kernel: halt first
			h.keepLogs(s)
			if err := za.Halt(ctx, name); err != nil && !errors.Is(err, illumos.ErrWrongState) {
				return h.fail(ctx, step+" (halt first)", s, err)
			}
		}
	}
	return h.fail(ctx, step, s, errors.New("the zone's state keeps changing under the uninstall"))
}

// BootZone boots the zone; a running zone is success.
func (h *Host) BootZone(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "boot the zone"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	name := s.ZoneName()
	za := h.Host.Zoneadm()
	z, err := za.Get(ctx, name)
	if err != nil {
		return h.fail(ctx, step, s, err)
	}
	if z.State == illumos.ZoneRunning {
		return nil
	}
	if err := h.createEmptyDirs(ctx, s); err != nil {
		return h.fail(ctx, step, s, err)
	}
	if err := h.writeZoneFiles(s); err != nil {
		return h.fail(ctx, step, s, err)
	}
	if err := za.Boot(ctx, name); err != nil {
		return h.fail(ctx, step, s, err)
	}
	if z.State == illumos.ZoneInstalled || z.State == illumos.ZoneReady {
		// Booted from there, zoneadm exits 0 only once the zone runs (a
		// failed boot tears it back to installed and exits 1): no need
		// to look again.
		return nil
	}
	// zoneadm says "already booted" (exit 0) for a zone on its way down too.
	if z, err = za.Get(ctx, name); err != nil {
		return h.fail(ctx, step, s, err)
	}
	if z.State != illumos.ZoneRunning {
		return h.fail(ctx, step, s, &illumos.Error{Op: "zoneadm boot", Subject: name, Kind: illumos.KindWrongState,
			Err: fmt.Errorf("zone is %s after boot", z.State)})
	}
	return nil
}

// HaltZone halts the zone at once; a zone not running (or not there) is
// fine.
func (h *Host) HaltZone(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "halt the zone"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	if h.Supervisor != nil {
		h.Supervisor.Forget(s.UID)
	}
	h.keepLogs(s)
	name := s.ZoneName()
	za := h.Host.Zoneadm()
	err := za.Halt(ctx, name)
	if err == nil || errors.Is(err, illumos.ErrNotFound) {
		return nil
	}
	if errors.Is(err, illumos.ErrWrongState) {
		// configured or incomplete: nothing runs.
		if z, gerr := za.Get(ctx, name); gerr == nil && (z.State == illumos.ZoneConfigured || z.State == illumos.ZoneIncomplete || z.State == illumos.ZoneInstalled) {
			return nil
		}
	}
	return h.fail(ctx, step, s, err)
}

// ShutdownZone shuts the zone down gracefully, waiting up to the grace
// period; it reports whether the zone stopped in time. A zone that is not
// running is stopped (true); a zone in the ready state, or a grace period
// of zero, is not shut down at all (false): halt it.
func (h *Host) ShutdownZone(ctx context.Context, in hostapi.ShutdownInput) (bool, error) {
	const step = "shut the zone down"
	s := in.Sandbox
	if err := checkSandbox(s); err != nil {
		return false, h.invalid(ctx, step, s, err)
	}
	name := s.ZoneName()
	za := h.Host.Zoneadm()
	stopped := func(z illumos.Zone) bool {
		return z.State == illumos.ZoneInstalled || z.State == illumos.ZoneConfigured || z.State == illumos.ZoneIncomplete
	}
	z, err := za.Get(ctx, name)
	if errors.Is(err, illumos.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, h.fail(ctx, step, s, err)
	}
	if stopped(z) {
		return true, nil
	}
	if z.State == illumos.ZoneReady || in.GraceSeconds <= 0 {
		return false, nil
	}
	// Kept now in case the stopped zone's root is out of reach; the
	// halt and the uninstall that follow keep it again, whole.
	h.keepLogs(s)

	// Saturated, not overflowed: the API bounds grace periods, but an
	// input from before the bound must still wait, not return at once.
	grace := time.Duration(min(in.GraceSeconds, model.MaxGracePeriodSeconds)) * time.Second
	sctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- za.Shutdown(sctx, name) }()
	start := time.Now()
	tick := time.NewTicker(h.pollInterval())
	defer tick.Stop()
	result := false
	cmdDone := false
loop:
	for {
		select {
		case err := <-done:
			cmdDone = true
			if err != nil && !errors.Is(err, illumos.ErrWrongState) && sctx.Err() == nil {
				h.log().Warn("zoneadm shutdown failed; waiting for the zone anyway", "zone", name, "err", err)
			}
			done = nil
		case <-sctx.Done():
			break loop
		case <-tick.C:
		}
		beat(ctx, fmt.Sprintf("waiting for zone %s to shut down (%s of %s)", name, time.Since(start).Round(time.Second), grace))
		z, err := za.Get(ctx, name)
		if errors.Is(err, illumos.ErrNotFound) || (err == nil && stopped(z)) {
			result = true
			break loop
		}
		if err != nil {
			h.log().Warn("zone state while shutting down", "zone", name, "err", err)
		}
	}
	cancel()
	if !cmdDone {
		<-done // cancel has interrupted it
	}
	if !result {
		// One last look: the zone may have stopped just at the deadline.
		if z, err := za.Get(ctx, name); errors.Is(err, illumos.ErrNotFound) || (err == nil && stopped(z)) {
			result = true
		}
	}
	if err := ctx.Err(); err != nil && !result {
		return false, h.fail(ctx, step, s, err)
	}
	h.log().Info("zone shutdown", "zone", name, "stopped", result, "took", time.Since(start).Round(time.Millisecond))
	return result, nil
}
