package model

import "time"

// KindVolumeSnapshot is a point-in-time copy of a claim's data.
const KindVolumeSnapshot = "VolumeSnapshot"

// APIGroupSnapshot is the VolumeSnapshot's API group, and
// APIVersionSnapshot its group version.
const (
	APIGroupSnapshot   = "snapshot.storage.k8s.io"
	APIVersionSnapshot = APIGroupSnapshot + "/v1"
)

// VolumeSnapshot is a ZFS snapshot of a claim's dataset, on the claim's
// node: <dataset>@<snapshot uid>.
type VolumeSnapshot struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta           `json:"metadata"`
	Spec     VolumeSnapshotSpec   `json:"spec"`
	Status   VolumeSnapshotStatus `json:"status"`
}

// VolumeSnapshotSpec names the claim to snapshot.
type VolumeSnapshotSpec struct {
	Source VolumeSnapshotSource `json:"source"`
}

// VolumeSnapshotSource is the claim a snapshot is taken of.
type VolumeSnapshotSource struct {
	PersistentVolumeClaimName *string `json:"persistentVolumeClaimName,omitempty"`
}

// VolumeSnapshotStatus says whether the snapshot can be restored.
type VolumeSnapshotStatus struct {
	ReadyToUse   *bool      `json:"readyToUse,omitempty"`
	CreationTime *time.Time `json:"creationTime,omitempty"`
	// RestoreSize is the smallest claim it restores into: its claim's size.
	RestoreSize string               `json:"restoreSize,omitempty"`
	Error       *VolumeSnapshotError `json:"error,omitempty"`
	// NodeName and SourceClaimUID say where the snapshot is: the claim's
	// node, the claim's dataset.
	NodeName       string `json:"nodeName,omitempty"`
	SourceClaimUID string `json:"sourceClaimUID,omitempty"`
}

// VolumeSnapshotError is why a snapshot could not be taken.
type VolumeSnapshotError struct {
	Message string     `json:"message,omitempty"`
	Time    *time.Time `json:"time,omitempty"`
}

func (s *VolumeSnapshot) GetTypeMeta() *TypeMeta    { return &s.TypeMeta }
func (s *VolumeSnapshot) GetMeta() *ObjectMeta      { return &s.Metadata }
func (s *VolumeSnapshot) Parts() (spec, status any) { return &s.Spec, &s.Status }

// Ready reports a snapshot that claims can be restored from.
func (s *VolumeSnapshot) Ready() bool { return s.Status.ReadyToUse != nil && *s.Status.ReadyToUse }

// DefaultVolumeSnapshot fills in the type.
func DefaultVolumeSnapshot(s *VolumeSnapshot) {
	s.APIVersion, s.Kind = APIVersionSnapshot, KindVolumeSnapshot
}

// ValidateVolumeSnapshot checks a snapshot as created.
func ValidateVolumeSnapshot(s *VolumeSnapshot) FieldErrors {
	errs := ValidateMeta(&s.Metadata, true)
	if s.Spec.Source.PersistentVolumeClaimName == nil {
		errs.add("spec.source.persistentVolumeClaimName", FieldRequired, "Required value: the claim to snapshot")
	} else {
		errs = append(errs, ValidateName("spec.source.persistentVolumeClaimName", *s.Spec.Source.PersistentVolumeClaimName)...)
	}
	return errs
}

// TypedLocalObjectReference names an object of the same namespace by
// group and kind: a claim's dataSource.
type TypedLocalObjectReference struct {
	APIGroup *string `json:"apiGroup,omitempty"`
	Kind     string  `json:"kind"`
	Name     string  `json:"name"`
}

// validateDataSource accepts a VolumeSnapshot of the claim's namespace.
func validateDataSource(ds *TypedLocalObjectReference) FieldErrors {
	var errs FieldErrors
	if ds == nil {
		return nil
	}
	if ds.Kind != KindVolumeSnapshot || ds.APIGroup == nil || *ds.APIGroup != APIGroupSnapshot {
		errs.add("spec.dataSource", FieldNotSupported, "Unsupported value: %s: supported values: a %s of apiGroup %q", ds.Kind, KindVolumeSnapshot, APIGroupSnapshot)
	}
	return append(errs, ValidateName("spec.dataSource.name", ds.Name)...)
}
