package hostops

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
)

// volSize is the size of the claim's volume: a whole number of blocks
// (volBlockSize, as image volumes).
func volSize(c *hostapi.ClaimVolume) uint64 {
	return (uint64(c.Bytes) + volBlockSize - 1) / volBlockSize * volBlockSize
}

// volumeMountProps are the mount options of every filesystem a pod's
// volume lives on: they are mounted in the global zone too (the special
// of the zone's lofs mount), where a setuid file or a device node a pod
// planted would serve the host's users. Executables stay allowed, as on
// a Kubernetes volume.
var volumeMountProps = map[string]string{"setuid": "off", "devices": "off"}

// withVolumeMountProps is props with volumeMountProps added.
func withVolumeMountProps(props map[string]string) map[string]string {
	all := make(map[string]string, len(props)+len(volumeMountProps))
	for k, v := range props {
		all[k] = v
	}
	for k, v := range volumeMountProps {
		all[k] = v
	}
	return all
}

// claimDataset is the claim's dataset.
func (h *Host) claimDataset(c *hostapi.ClaimVolume) (string, error) {
	if c.UID == "" {
		return "", fmt.Errorf("claim %q was not bound to this node when the pod was placed", c.Name)
	}
	return names.DatasetName(h.VolumesDataset, c.UID)
}

// volumeDir is where a volume's dataset is mounted in the global zone,
// the special of the zone's lofs mount: set explicitly on each dataset,
// so the zone's configuration can name it before the dataset exists.
func (h *Host) volumeDir(s hostapi.PodSandbox, v hostapi.PodVolume) (string, error) {
	if v.Claim != nil {
		ds, err := h.claimDataset(v.Claim)
		return "/" + ds, err
	}
	return path.Join(h.zonepath(s), "vol-"+v.Name), nil
}

// volumeFS is the zone's lofs mounts, in the order of the pod's mounts.
func (h *Host) volumeFS(s hostapi.PodSandbox) ([]illumos.FS, error) {
	byName := map[string]hostapi.PodVolume{}
	for _, v := range s.Volumes {
		byName[v.Name] = v
	}
	var fs []illumos.FS
	for _, m := range s.Mounts {
		v, ok := byName[m.Volume]
		if !ok {
			return nil, fmt.Errorf("mount of %s names no volume of the pod: %q", m.Path, m.Volume)
		}
		dir, err := h.volumeDir(s, v)
		if err != nil {
			return nil, err
		}
		f := illumos.FS{Dir: m.Path, Special: dir, Type: "lofs"}
		if m.ReadOnly {
			f.Options = []string{"ro"}
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// createClaimVolumes makes the pod's claims' datasets exist, each with
// its quota and the user properties naming its claim. A dataset that
// exists is kept with its data; its quota only ever grows.
func (h *Host) createClaimVolumes(ctx context.Context, s hostapi.PodSandbox) error {
	for _, v := range s.Volumes {
		if v.Claim == nil {
			continue
		}
		if err := h.ensureVolume(ctx, v.Claim, hostapi.ClaimProps(s.Namespace, *v.Claim)); err != nil {
			return err
		}
	}
	return nil
}

// ensureVolume creates the claim's dataset with props, or grows the
// quota of the one there.
func (h *Host) ensureVolume(ctx context.Context, c *hostapi.ClaimVolume, props map[string]string) error {
	ds, err := h.claimDataset(c)
	if err != nil {
		return &InvalidError{Err: err}
	}
	zfs := h.Host.ZFS()
	if c.Block {
		return h.ensureBlockVolume(ctx, ds, c, props)
	}
	quota := strconv.FormatInt(c.Bytes, 10)
	have, err := zfs.GetProps(ctx, ds, "quota", "setuid", "devices")
	switch {
	case errors.Is(err, illumos.ErrNotFound):
		all := withVolumeMountProps(props)
		all["mountpoint"], all["quota"] = "/"+ds, quota
		if c.FromSnapshot != nil {
			snap, err := h.snapshotName(c.FromSnapshot)
			if err != nil {
				return &InvalidError{Err: err}
			}
			return zfs.Clone(ctx, snap, ds, all)
		}
		return zfs.Create(ctx, ds, all)
	case err != nil:
		return err
	}
	// A dataset made before the mount options were set gets them here.
	fix := map[string]string{}
	for k, v := range volumeMountProps {
		if have[k] != v {
			fix[k] = v
		}
	}
	if n, err := strconv.ParseInt(have["quota"], 10, 64); err != nil || n < c.Bytes || n == 0 {
		fix["quota"] = quota
	}
	if len(fix) == 0 {
		return nil
	}
	return zfs.Set(ctx, ds, fix)
}

// ensureBlockVolume creates the claim's volume with props, or grows the
// one there (volsize, online).
func (h *Host) ensureBlockVolume(ctx context.Context, ds string, c *hostapi.ClaimVolume, props map[string]string) error {
	zfs := h.Host.ZFS()
	size := volSize(c)
	have, err := zfs.Get(ctx, ds, "volsize")
	switch {
	case errors.Is(err, illumos.ErrNotFound):
		if c.FromSnapshot == nil {
			all := map[string]string{"volblocksize": strconv.Itoa(volBlockSize)}
			for k, v := range props {
				all[k] = v
			}
			return zfs.CreateVolume(ctx, ds, size, all)
		}
		// A clone has its origin's size; it is grown below if asked for
		// more.
		snap, err := h.snapshotName(c.FromSnapshot)
		if err != nil {
			return &InvalidError{Err: err}
		}
		if err := zfs.Clone(ctx, snap, ds, props); err != nil {
			return err
		}
		if have, err = zfs.Get(ctx, ds, "volsize"); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if n, err := strconv.ParseUint(have, 10, 64); err == nil && n >= size {
		return nil
	}
	return zfs.Set(ctx, ds, map[string]string{"volsize": strconv.FormatUint(size, 10)})
}

// claimDevices are the devices of the pod's claims' volumes (bhyve):
// the zone is delegated each, and the guest sees each as a disk.
func (h *Host) claimDevices(s hostapi.PodSandbox) ([]string, error) {
	var devs []string
	for _, v := range s.Volumes {
		if v.Claim == nil || !v.Claim.Block {
			continue
		}
		ds, err := h.claimDataset(v.Claim)
		if err != nil {
			return nil, err
		}
		devs = append(devs, illumos.ZvolDevice(illumos.DefaultZvolDir, ds))
	}
	return devs, nil
}

// createEmptyDirs makes the pod's emptyDir datasets, children of the
// zone's dataset (destroyed with it), once the zone is installed: the
// install wants the zonepath to itself.
func (h *Host) createEmptyDirs(ctx context.Context, s hostapi.PodSandbox) error {
	zoneDS, err := h.dataset(s)
	if err != nil {
		return err
	}
	for _, v := range s.Volumes {
		if v.Claim != nil {
			continue
		}
		ds, err := names.DatasetName(zoneDS, "vol-"+v.Name)
		if err != nil {
			return err
		}
		dir, _ := h.volumeDir(s, v)
		props := withVolumeMountProps(map[string]string{"mountpoint": dir})
		if v.SizeLimit > 0 {
			props["quota"] = strconv.FormatInt(v.SizeLimit, 10)
		}
		// zfs create -p succeeds on an existing dataset: a re-run keeps it.
		if err := h.Host.ZFS().Create(ctx, ds, props); err != nil {
			return err
		}
	}
	return nil
}

// ResizeClaimVolume grows the claim's dataset's quota (a volume's
// volsize) to Bytes, online.
func (h *Host) ResizeClaimVolume(ctx context.Context, c hostapi.ClaimVolume) error {
	ds, err := h.claimDataset(&c)
	if err != nil {
		return &InvalidError{Err: err}
	}
	if err := h.ensureVolume(ctx, &c, nil); err != nil {
		return &Error{What: fmt.Sprintf("grow the dataset %s of claim %s on node %s", ds, c.Name, h.Node), Err: err}
	}
	return nil
}

// DestroyClaimVolume destroys the claim's dataset with its data; one
// already gone is fine.
func (h *Host) DestroyClaimVolume(ctx context.Context, c hostapi.ClaimVolume) error {
	ds, err := h.claimDataset(&c)
	if err != nil {
		return &InvalidError{Err: err}
	}
	if err := h.Host.ZFS().Destroy(ctx, ds); err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return &Error{What: fmt.Sprintf("destroy the dataset %s of claim %s on node %s", ds, c.Name, h.Node), Err: err}
	}
	return nil
}

// snapshotName is the snapshot's full ZFS name.
func (h *Host) snapshotName(s *hostapi.ClaimSnapshot) (string, error) {
	if s.UID == "" || s.ClaimUID == "" {
		return "", fmt.Errorf("snapshot %q of claim %q is not a snapshot of a claim on this node", s.UID, s.ClaimUID)
	}
	ds, err := names.DatasetName(h.VolumesDataset, s.ClaimUID)
	return ds + "@" + s.UID, err
}

// SnapshotClaimVolume takes the snapshot of its claim's dataset; one
// already taken is fine.
func (h *Host) SnapshotClaimVolume(ctx context.Context, s hostapi.ClaimSnapshot) error {
	name, err := h.snapshotName(&s)
	if err != nil {
		return &InvalidError{Err: err}
	}
	zfs := h.Host.ZFS()
	if ok, err := zfs.Exists(ctx, name); err != nil || ok {
		return err
	}
	ds, snap, _ := strings.Cut(name, "@")
	if err := zfs.Snapshot(ctx, ds, snap); err != nil && !errors.Is(err, illumos.ErrAlreadyExists) {
		return &Error{What: fmt.Sprintf("snapshot %s on node %s", name, h.Node), Err: err}
	}
	return nil
}

// DestroyClaimSnapshot destroys the snapshot; one already gone is fine.
// ZFS refuses while a clone of it exists.
func (h *Host) DestroyClaimSnapshot(ctx context.Context, s hostapi.ClaimSnapshot) error {
	name, err := h.snapshotName(&s)
	if err != nil {
		return &InvalidError{Err: err}
	}
	if err := h.Host.ZFS().Destroy(ctx, name); err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return &Error{What: fmt.Sprintf("destroy snapshot %s on node %s", name, h.Node), Err: err}
	}
	return nil
}
