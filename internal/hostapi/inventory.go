package hostapi

import (
	"fmt"
	"strings"
)

// HostInventory is what zonewright owns on one node: its zones, the VNICs
// over the node's etherstub and the datasets under its zones dataset, as
// the host reports them. Anything zonewright did not create is left out,
// so nothing listed here is ever someone else's.
type HostInventory struct {
	Node         string
	ZonesDataset string
	Zones        []InventoryZone
	VNICs        []string // zonewright VNICs over the node's etherstub
	Datasets     []string // zonewright zone datasets under ZonesDataset
	// VolumesDataset holds the bhyve pods' boot volumes, one per zone.
	VolumesDataset string
	Volumes        []string // zonewright boot volumes under VolumesDataset
}

// InventoryZone is one zonewright zone.
type InventoryZone struct {
	Name  string
	State string // zoneadm state
	Brand string
	// ID is the kernel zone id, -1 when the zone is not in the kernel.
	ID int
	// Pod ("namespace/name") and UID come from the zone's zonewright
	// attributes; both are empty for a zone recognised only by its
	// derived name and dataset (its configuration lost its attributes).
	Pod string
	UID string
	// VNICs are the zone's configured net resources.
	VNICs []string
}

// Namespace and Name split Pod.
func (z InventoryZone) Namespace() string { ns, _, _ := strings.Cut(z.Pod, "/"); return ns }

// PodName is the pod's name part of Pod.
func (z InventoryZone) PodName() string { _, n, _ := strings.Cut(z.Pod, "/"); return n }

// Orphan is one pod's leftovers on a node with no pod bound there to own
// them: a zone (with the VNICs and dataset it uses), or a lone VNIC or
// dataset. Key names it stably across reconciliations.
type Orphan struct {
	Key       string
	Zone      string   `json:",omitempty"`
	Namespace string   `json:",omitempty"`
	Name      string   `json:",omitempty"`
	UID       string   `json:",omitempty"`
	VNICs     []string `json:",omitempty"`
	Dataset   string   `json:",omitempty"`
	Volume    string   `json:",omitempty"` // a bhyve pod's boot volume
}

// String says what the orphan is, for events and logs.
func (o Orphan) String() string {
	var parts []string
	if o.Zone != "" {
		z := "zone " + o.Zone
		if o.Namespace != "" {
			z += fmt.Sprintf(" (pod %s/%s uid %s)", o.Namespace, o.Name, o.UID)
		}
		parts = append(parts, z)
	}
	for _, v := range o.VNICs {
		parts = append(parts, "VNIC "+v)
	}
	if o.Dataset != "" {
		parts = append(parts, "dataset "+o.Dataset)
	}
	if o.Volume != "" {
		parts = append(parts, "volume "+o.Volume)
	}
	return strings.Join(parts, ", ")
}
