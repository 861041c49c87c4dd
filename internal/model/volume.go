package model

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
)

// KindPersistentVolumeClaim is a request for storage that outlives pods.
const KindPersistentVolumeClaim = "PersistentVolumeClaim"

// Claim phases.
const (
	ClaimPending = "Pending" // not bound to a node yet: no pod used it
	ClaimBound   = "Bound"   // its dataset lives on status.nodeName
	// ClaimLost: the node holding its dataset is unreachable or gone; pods
	// of the claim wait rather than start without their data.
	ClaimLost = "Lost"
)

// AccessModeReadWriteOnce is the only access mode served: a ZFS dataset
// on one node, used by any number of pods there.
const AccessModeReadWriteOnce = "ReadWriteOnce"

// Reclaim policies: what becomes of a claim's data when it is deleted.
const (
	ReclaimDelete = "Delete" // the dataset is destroyed
	ReclaimRetain = "Retain" // the dataset stays on its node
)

// PersistentVolumeClaim is storage on one node, a ZFS dataset with the
// requested size as its quota, bound to the node of the first pod that
// uses it (Kubernetes' WaitForFirstConsumer).
type PersistentVolumeClaim struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta                  `json:"metadata"`
	Spec     PersistentVolumeClaimSpec   `json:"spec"`
	Status   PersistentVolumeClaimStatus `json:"status"`
}

// PersistentVolumeClaimSpec is what the claim asks for.
type PersistentVolumeClaimSpec struct {
	AccessModes []string                   `json:"accessModes,omitempty"`
	Resources   VolumeResourceRequirements `json:"resources"`
	// PersistentVolumeReclaimPolicy is Delete (default) or Retain.
	// Kubernetes keeps it on the PersistentVolume; zonewright has none.
	PersistentVolumeReclaimPolicy string `json:"persistentVolumeReclaimPolicy,omitempty"`
	// DataSource, a VolumeSnapshot, makes the claim a clone of it (on the
	// snapshot's node).
	DataSource *TypedLocalObjectReference `json:"dataSource,omitempty"`
}

// VolumeResourceRequirements holds requests.storage.
type VolumeResourceRequirements struct {
	Requests ResourceList `json:"requests,omitempty"`
}

// ResourceStorage names a claim's size.
const ResourceStorage = "storage"

// PersistentVolumeClaimStatus says where the claim's data is.
type PersistentVolumeClaimStatus struct {
	Phase       string       `json:"phase,omitempty"`
	AccessModes []string     `json:"accessModes,omitempty"`
	Capacity    ResourceList `json:"capacity,omitempty"`
	// NodeName is the node holding the claim's dataset once it is bound.
	NodeName string `json:"nodeName,omitempty"`
	// SourceSnapshotUID and SourceClaimUID name the snapshot the claim
	// was cloned from (its dataSource, when it bound).
	SourceSnapshotUID string `json:"sourceSnapshotUID,omitempty"`
	SourceClaimUID    string `json:"sourceClaimUID,omitempty"`
	// Move is the claim's data moving to another node with its pods, as
	// its node is drained; nil when it stays where it is.
	Move *ClaimMove `json:"move,omitempty"`
	// VolumeMode is what the claim's data is, fixed when it binds by the
	// first pod that uses it: Filesystem (a dataset mounted into zones)
	// or Block (a zvol, a bhyve pod's disk). Empty: Filesystem.
	VolumeMode string `json:"volumeMode,omitempty"`
	// Conditions: Resizing while its node has not applied a larger size.
	Conditions []PersistentVolumeClaimCondition `json:"conditions,omitempty"`
}

// PersistentVolumeClaimCondition has the fields of a pod's condition.
type PersistentVolumeClaimCondition = PodCondition

// ClaimResizing is the condition of a claim whose node has not applied
// its new size yet.
const ClaimResizing = "Resizing"

// Volume modes of a claim (Kubernetes' PersistentVolumeMode).
const (
	VolumeFilesystem = "Filesystem" // a ZFS filesystem, mounted into zones
	VolumeBlock      = "Block"      // a zvol, a disk of bhyve pods
)

// Mode is the claim's volume mode once bound.
func (c *PersistentVolumeClaim) Mode() string {
	if c.Status.VolumeMode == "" {
		return VolumeFilesystem
	}
	return c.Status.VolumeMode
}

// VolumeModeOf is the volume mode a pod's claims take: bhyve pods use
// disks, every other brand filesystems.
func VolumeModeOf(s *PodSpec) string {
	if s.RuntimeClassName == BrandBhyve {
		return VolumeBlock
	}
	return VolumeFilesystem
}

// VolumeModeConflict says why a pod of the other volume mode cannot use
// claim name, bound in mode have.
func VolumeModeConflict(name, have string) string {
	if have == VolumeBlock {
		return fmt.Sprintf("persistentvolumeclaim %q is a block volume (a zvol, bound by a bhyve pod): only bhyve pods can use it", name)
	}
	return fmt.Sprintf("persistentvolumeclaim %q is a filesystem volume (bound by a zone pod): a bhyve pod, whose volumes are disks, cannot use it", name)
}

// Phases of a claim's move.
const (
	// MovePlanning: the claim's node is drained; a destination is sought
	// while its pods keep running on it.
	MovePlanning = "Planning"
	// MoveCopying: a snapshot of the data is being copied to the
	// destination while the pods still run (the pre-copy).
	MoveCopying = "Copying"
	// MoveSwitching: the pods were told to leave; once they are gone, what
	// changed since the pre-copy follows and the claim is switched over.
	MoveSwitching = "Switching"
	// MoveCleaning: the claim is on the destination (status.nodeName);
	// the source's copy and the move's snapshots are being removed.
	MoveCleaning = "Cleaning"
	// MoveCloning: a claim restored from a VolumeSnapshot on another node
	// (From) than the one its first pod was placed on (To, its node): the
	// snapshot is being copied there; its pods wait.
	MoveCloning = "Cloning"
)

// ClaimMove is a move of a claim's dataset from node From to node To.
type ClaimMove struct {
	Phase string `json:"phase"`
	From  string `json:"from"`
	To    string `json:"to,omitempty"`
	// Asked is the node an operator asked for (POST …/move); empty: any
	// the scheduler picks.
	Asked string `json:"asked,omitempty"`
	// ID names the move's snapshots (move-<ID>-1, the pre-copy, and
	// move-<ID>-2, the final increment) and transfers.
	ID      string `json:"id,omitempty"`
	Message string `json:"message,omitempty"`
	// Snapshot, on a clone's copy (MoveCloning), is the UID of the
	// VolumeSnapshot copied; empty on a move.
	Snapshot string `json:"snapshot,omitempty"`
}

// Moving reports whether the claim's pods must wait for its move: its
// data is not yet where it will be used.
func (c *PersistentVolumeClaim) Moving() bool {
	return c.Status.Move != nil && c.Status.Move.Phase != MoveCleaning
}

// MoveSnapshot is the name of step n (1: the pre-copy, 2: the final
// increment) of move id.
func MoveSnapshot(id string, n int) string { return fmt.Sprintf("move-%s-%d", id, n) }

// Volume is one of a pod's volumes.
type Volume struct {
	Name                  string                             `json:"name"`
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	EmptyDir              *EmptyDirVolumeSource              `json:"emptyDir,omitempty"`
}

// PersistentVolumeClaimVolumeSource names a claim of the pod's namespace.
type PersistentVolumeClaimVolumeSource struct {
	ClaimName string `json:"claimName"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// EmptyDirVolumeSource is scratch space that lives and dies with the pod.
type EmptyDirVolumeSource struct {
	SizeLimit string `json:"sizeLimit,omitempty"`
}

// VolumeDevice attaches a claim to a bhyve pod as a disk (a zvol); the
// guest names its disks itself, so DevicePath is the name the pod's
// author gives it, kept but not enforced.
type VolumeDevice struct {
	Name       string `json:"name"`
	DevicePath string `json:"devicePath"`
}

// VolumeMount puts a volume at a path in the pod's zone.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// ClaimNames lists the claims a pod spec uses.
func (s *PodSpec) ClaimNames() []string {
	var names []string
	for _, v := range s.Volumes {
		if v.PersistentVolumeClaim != nil {
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return names
}

// DefaultPersistentVolumeClaim fills in the defaults.
func DefaultPersistentVolumeClaim(c *PersistentVolumeClaim) {
	c.APIVersion, c.Kind = APIVersion, KindPersistentVolumeClaim
	if len(c.Spec.AccessModes) == 0 {
		c.Spec.AccessModes = []string{AccessModeReadWriteOnce}
	}
	if c.Spec.PersistentVolumeReclaimPolicy == "" {
		c.Spec.PersistentVolumeReclaimPolicy = ReclaimDelete
	}
}

// validateSize checks a size of storage: positive and at most
// MaxStorageBytes.
func validateSize(field, v string) FieldErrors {
	var errs FieldErrors
	if d := quantityProblem(ResourceStorage, v); d != "" {
		errs.add(field, FieldInvalid, "%s", d)
	} else if n, _ := Bytes(v); n <= 0 {
		errs.add(field, FieldInvalid, "Invalid value: %q: must be a positive quantity such as 1Gi", v)
	}
	return errs
}

// ClaimBytes is the claim's requested size in bytes; validation ensured
// it parses.
func ClaimBytes(c *PersistentVolumeClaim) int64 {
	n, _ := Bytes(c.Spec.Resources.Requests[ResourceStorage])
	return n
}

// ValidatePersistentVolumeClaim checks a claim as created.
func ValidatePersistentVolumeClaim(c *PersistentVolumeClaim) FieldErrors {
	errs := ValidateMeta(&c.Metadata, true)
	for i, m := range c.Spec.AccessModes {
		if m != AccessModeReadWriteOnce {
			errs.add(fmt.Sprintf("spec.accessModes[%d]", i), FieldNotSupported,
				"Unsupported value: %q: supported values: %q (a claim is a dataset on one node)", m, AccessModeReadWriteOnce)
		}
	}
	storage, ok := c.Spec.Resources.Requests[ResourceStorage]
	if !ok {
		errs.add("spec.resources.requests.storage", FieldRequired, "Required value")
	} else {
		errs = append(errs, validateSize("spec.resources.requests.storage", storage)...)
	}
	for name := range c.Spec.Resources.Requests {
		if name != ResourceStorage {
			errs.add("spec.resources.requests["+name+"]", FieldNotSupported, "Unsupported value: %q: supported values: \"storage\"", name)
		}
	}
	errs = append(errs, validateDataSource(c.Spec.DataSource)...)
	if p := c.Spec.PersistentVolumeReclaimPolicy; p != ReclaimDelete && p != ReclaimRetain {
		errs.add("spec.persistentVolumeReclaimPolicy", FieldNotSupported, "Unsupported value: %q: supported values: \"Delete\", \"Retain\"", p)
	}
	return errs
}

// ValidatePersistentVolumeClaimUpdate checks a claim's new spec against
// the stored one: only the size may change, and only grow (Kubernetes'
// volume expansion).
func ValidatePersistentVolumeClaimUpdate(c, old *PersistentVolumeClaim) FieldErrors {
	errs := ValidatePersistentVolumeClaim(c)
	if len(errs) > 0 {
		return errs
	}
	if !slices.Equal(c.Spec.AccessModes, old.Spec.AccessModes) || c.Spec.PersistentVolumeReclaimPolicy != old.Spec.PersistentVolumeReclaimPolicy ||
		!reflect.DeepEqual(c.Spec.DataSource, old.Spec.DataSource) {
		errs.add("spec", FieldForbidden, "Forbidden: spec is immutable after creation except resources.requests.storage for bound claims")
	}
	if ClaimBytes(c) < ClaimBytes(old) {
		errs.add("spec.resources.requests.storage", FieldForbidden, "Forbidden: field can not be less than previous value")
	}
	return errs
}

// maxMountPath is illumos's MAXPATHLEN less room for the zone root the
// global zone sees it under.
const maxMountPath = 512

// validateVolumes checks the pod's volumes and its containers' mounts.
// The containers of a pod share its zone, so a mount path is the pod's:
// two mounts of one path are refused across containers too.
func validateVolumes(s *PodSpec) FieldErrors {
	errs, names := validateVolumeSources(s.Volumes)
	bhyve := s.RuntimeClassName == BrandBhyve
	claims := map[string]bool{}
	for i, v := range s.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.Name] = true
		}
		if v.EmptyDir != nil && bhyve {
			errs.add(fmt.Sprintf("spec.volumes[%d].emptyDir", i), FieldForbidden,
				"Forbidden: a bhyve pod is a virtual machine: its volumes are disks, persistentVolumeClaims only")
		}
	}
	errs = append(errs, validateVolumeDevices(s.Containers, bhyve, names, claims)...)
	return append(errs, validateVolumeMounts(s.Containers, bhyve, names)...)
}

// validateVolumeSources checks each volume's name and source, and returns
// the names given.
func validateVolumeSources(volumes []Volume) (errs FieldErrors, names map[string]bool) {
	names = map[string]bool{}
	for i, v := range volumes {
		f := fmt.Sprintf("spec.volumes[%d]", i)
		errs = append(errs, ValidateName(f+".name", v.Name)...)
		if names[v.Name] {
			errs.add(f+".name", FieldDuplicate, "Duplicate value: %q", v.Name)
		}
		names[v.Name] = true
		switch {
		case v.PersistentVolumeClaim != nil && v.EmptyDir != nil:
			errs.add(f, FieldForbidden, "Forbidden: may not specify more than 1 volume type")
		case v.PersistentVolumeClaim != nil:
			errs = append(errs, ValidateName(f+".persistentVolumeClaim.claimName", v.PersistentVolumeClaim.ClaimName)...)
		case v.EmptyDir != nil:
			if l := v.EmptyDir.SizeLimit; l != "" {
				errs = append(errs, validateSize(f+".emptyDir.sizeLimit", l)...)
			}
		default:
			errs.add(f, FieldRequired, "Required value: must specify a volume type (persistentVolumeClaim or emptyDir)")
		}
	}
	return errs, names
}

// validateVolumeDevices checks the containers' raw block devices: a bhyve
// pod's only, each of a claim volume (volume names and claims) at a path
// of its own.
func validateVolumeDevices(containers []Container, bhyve bool, names, claims map[string]bool) FieldErrors {
	var errs FieldErrors
	devices := map[string]string{}
	for i, c := range containers {
		for j, d := range c.VolumeDevices {
			f := fmt.Sprintf("spec.containers[%d].volumeDevices[%d]", i, j)
			switch {
			case !bhyve:
				errs.add(f, FieldForbidden, "Forbidden: raw block devices are for bhyve pods (their claims are zvols); use volumeMounts")
				continue
			case !names[d.Name]:
				errs.add(f+".name", FieldNotFound, "Not found: %q", d.Name)
			case !claims[d.Name]:
				errs.add(f+".name", FieldInvalid, "Invalid value: %q: must name a persistentVolumeClaim volume", d.Name)
			}
			switch {
			case !strings.HasPrefix(d.DevicePath, "/") || path.Clean(d.DevicePath) != d.DevicePath || len(d.DevicePath) > maxMountPath:
				errs.add(f+".devicePath", FieldInvalid, "Invalid value: %q: must be a clean absolute path of at most %d bytes", d.DevicePath, maxMountPath)
			case devices[d.DevicePath] != "":
				errs.add(f+".devicePath", FieldInvalid, "Invalid value: %q: must be unique in the pod (first used by %s)", d.DevicePath, devices[d.DevicePath])
			default:
				devices[d.DevicePath] = c.Name
			}
		}
	}
	return errs
}

// validateVolumeMounts checks the containers' mounts: not in a bhyve
// pod, each of a volume named, at a path of its own in the pod's zone.
func validateVolumeMounts(containers []Container, bhyve bool, names map[string]bool) FieldErrors {
	var errs FieldErrors
	paths := map[string]string{}
	for i, c := range containers {
		if bhyve && len(c.VolumeMounts) > 0 {
			errs.add(fmt.Sprintf("spec.containers[%d].volumeMounts", i), FieldForbidden,
				"Forbidden: a bhyve pod's claims are disks (zvols), not mounted file systems; use volumeDevices")
			continue
		}
		for j, m := range c.VolumeMounts {
			f := fmt.Sprintf("spec.containers[%d].volumeMounts[%d]", i, j)
			if !names[m.Name] {
				errs.add(f+".name", FieldNotFound, "Not found: %q", m.Name)
			}
			switch {
			case !strings.HasPrefix(m.MountPath, "/"):
				errs.add(f+".mountPath", FieldInvalid, "Invalid value: %q: must be an absolute path", m.MountPath)
			case len(m.MountPath) > maxMountPath:
				errs.add(f+".mountPath", FieldTooLong, "Too long: must have at most %d bytes (a path in the zone)", maxMountPath)
			case m.MountPath == "/" || path.Clean(m.MountPath) != m.MountPath || strings.ContainsAny(m.MountPath, " \t\n;\"'"):
				errs.add(f+".mountPath", FieldInvalid, "Invalid value: %q: must be a clean absolute path other than / (no '..', no spaces or quotes)", m.MountPath)
			case paths[m.MountPath] != "":
				errs.add(f+".mountPath", FieldInvalid, "Invalid value: %q: must be unique in the pod (its containers share one zone; first mounted by %s)", m.MountPath, paths[m.MountPath])
			default:
				paths[m.MountPath] = c.Name
			}
		}
	}
	return errs
}

func (c *PersistentVolumeClaim) GetTypeMeta() *TypeMeta    { return &c.TypeMeta }
func (c *PersistentVolumeClaim) GetMeta() *ObjectMeta      { return &c.Metadata }
func (c *PersistentVolumeClaim) Parts() (spec, status any) { return &c.Spec, &c.Status }
