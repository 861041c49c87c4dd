package sim

import (
	"fmt"
	"time"
)

// What the simulator knows about a host, as stored (state.go keeps it).

// State is everything the simulator knows about one host. `illumos-sim
// state` prints it as is.
type State struct {
	Version    int       `json:"version"`
	BootTime   time.Time `json:"boot_time"`
	NextZoneID int       `json:"next_zone_id"`
	// NextZoneIndex numbers new zones, so listings keep creation order.
	NextZoneIndex int `json:"next_zone_index"`
	// Zones is filled only for `illumos-sim state`: each zone lives in its
	// own file, and commands reach zones through zone and zones.
	Zones    []*Zone    `json:"zones,omitempty"`
	Links    []*Link    `json:"links"`
	Datasets []*Dataset `json:"datasets"`
	// NAT is filled only for `illumos-sim state`: each IP stack's NAT
	// table lives in its own file (nat/STACK.json).
	NAT map[string]*NATTable `json:"nat,omitempty"`
	// FaultCalls counts the calls each probabilistic fault rule has seen, so
	// a seeded failure sequence is the same on every run.
	FaultCalls map[string]int `json:"fault_calls,omitempty"`

	tx *txn // the transaction this state belongs to
}

// Zone is one zone, the global zone included.
type Zone struct {
	Name  string `json:"name"`
	State string `json:"state"`
	ID    int    `json:"id"` // -1 when the zone is not in the kernel
	// UID is the uid and gid the zone's root runs as when the simulator
	// runs as root, given at its first boot and kept until the zone is
	// uninstalled; 0: none yet.
	UID uint32 `json:"uid,omitempty"`
	// UIDs is how many ids from UID the zone owns (zoneuids.go); 0: one.
	UIDs uint32 `json:"uids,omitempty"`
	// Index is the zone's place in the zone index: zones are listed in
	// creation order.
	Index  int         `json:"index"`
	UUID   string      `json:"uuid"`
	Config *ZoneConfig `json:"config"`
	// OwnDataset is the dataset zoneadm install created for the zonepath;
	// uninstall destroys it.
	OwnDataset string `json:"own_dataset,omitempty"`
	// RootDataset is the <zonepath dataset>/root an lx install from a
	// snapshot or a send stream made; uninstall destroys it.
	RootDataset string `json:"root_dataset,omitempty"`
	BootID      string `json:"boot_id,omitempty"`
	// BootOwner is the zoneadm process carrying out BootID; a boot whose
	// owner died can be taken over.
	BootOwner     int `json:"boot_owner,omitempty"`
	SupervisorPID int `json:"supervisor_pid,omitempty"`
	// InitPID is, in isolation mode, PID 1 of the zone's PID namespace:
	// zlogin's way into it.
	InitPID int `json:"init_pid,omitempty"`
	// Cgroups are the directories of the zone's cgroup, which holds it
	// to its memory and CPU caps (zone_cgroup.go).
	Cgroups []string `json:"cgroups,omitempty"`
	// Booted is when the zone last reached running.
	Booted time.Time `json:"booted,omitempty"`
	// Nodename is the zone's node name, read from its root at boot;
	// empty means the zone's name.
	Nodename string `json:"nodename,omitempty"`

	Interfaces       []*IPInterface `json:"interfaces"`
	Addresses        []*IPAddress   `json:"addresses"`
	Routes           []*Route       `json:"routes"`
	PersistentRoutes []*Route       `json:"persistent_routes,omitempty"`
	Services         []*Service     `json:"services"`
}

// Link is a datalink: a physical NIC, a VNIC or an etherstub.
type Link struct {
	Name      string `json:"name"`
	Class     string `json:"class"` // phys, vnic, etherstub
	Over      string `json:"over,omitempty"`
	MAC       string `json:"mac,omitempty"`
	MACType   string `json:"mac_type,omitempty"`
	VID       int    `json:"vid,omitempty"`
	MTU       int    `json:"mtu"`
	Speed     int    `json:"speed"`
	Temporary bool   `json:"temporary,omitempty"`
	// Props holds link properties set with -p or set-linkprop (mtu is
	// kept in MTU).
	Props map[string]string `json:"props,omitempty"`
}

// Dataset is a ZFS filesystem, volume or snapshot. Props holds only locally
// set properties; everything else is computed.
type Dataset struct {
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Props    map[string]string `json:"props"`
	Creation int64             `json:"creation"`
	Refer    uint64            `json:"refer"`
	VolSize  uint64            `json:"volsize,omitempty"`
	Origin   string            `json:"origin,omitempty"`
	GUID     uint64            `json:"guid"`
	// Unmounted records "zfs unmount"; filesystems are mounted otherwise.
	Unmounted bool `json:"unmounted,omitempty"`
}

// IPInterface is an IP interface plumbed with ipadm create-if.
type IPInterface struct {
	Name      string `json:"name"`
	Temporary bool   `json:"temporary,omitempty"`
	// Props and PersistentProps are set-ifprop's protocol properties
	// ("ipv4/forwarding": "on"), current and persistent.
	Props           map[string]string `json:"props,omitempty"`
	PersistentProps map[string]string `json:"persistent_props,omitempty"`
}

// IPAddress is an address object.
type IPAddress struct {
	Obj       string `json:"obj"`
	Type      string `json:"type"` // static, dhcp, addrconf, from-gz
	Addr      string `json:"addr"` // ADDR/PREFIX, "?" for unassigned dhcp
	Temporary bool   `json:"temporary,omitempty"`
}

// Route is one routing-table entry.
type Route struct {
	Dest    string `json:"dest"` // "default" or ADDR/PREFIX or a host address
	Host    bool   `json:"host,omitempty"`
	Gateway string `json:"gateway"`
	Iface   string `json:"iface,omitempty"`
}

// Service is one SMF service instance inside a zone. The SMF commands write
// the desired fields (Enabled and the request counters); only the zone's
// supervisor writes State, PID, Reason and Aux.
type Service struct {
	FMRI       string    `json:"fmri"`
	Enabled    bool      `json:"enabled"`
	State      string    `json:"state"`
	PID        int       `json:"pid,omitempty"`
	STime      time.Time `json:"stime"`
	Reason     string    `json:"reason,omitempty"`
	Aux        string    `json:"aux,omitempty"` // restarter/auxiliary_state, e.g. method_failed
	Restarts   int       `json:"restarts,omitempty"`
	RestartReq int       `json:"restart_req,omitempty"`
	ClearReq   int       `json:"clear_req,omitempty"`
	Manifest   *SvcDef   `json:"manifest"`
}

// newState is the state of a host that was never used: the physical links
// and the pools from the host facts, and the global zone.
func newState(f *Facts) (*State, *Zone) {
	now := time.Now().UTC().Truncate(time.Second)
	st := &State{
		Version:       stateVersion,
		BootTime:      now,
		NextZoneID:    1,
		NextZoneIndex: 1,
	}
	global := &Zone{
		Name: "global", State: stateRunning, ID: 0, Booted: now,
		Config: &ZoneConfig{Zonepath: "/", Brand: f.GlobalBrand, IPType: "shared"},
	}
	for _, l := range f.Links {
		st.Links = append(st.Links, &Link{
			Name: l.Name, Class: "phys", MAC: l.MAC, MACType: "fixed",
			MTU: l.MTU, Speed: l.Speed,
		})
	}
	for _, p := range f.Pools {
		st.Datasets = append(st.Datasets, &Dataset{
			Name: p.Name, Type: "filesystem", Props: map[string]string{},
			Creation: now.Unix(), Refer: baseRefer, GUID: newGUID(),
		})
	}
	return st, global
}

// zone returns the named zone or nil; in an update, the zone is locked and
// saved with the state.
func (st *State) zone(name string) *Zone { return st.tx.zone(name) }

// zones returns every zone in index order. In an update, only zones also
// looked up with zone may be changed.
func (st *State) zones() []*Zone { return st.tx.list() }

// addZone adds a new zone (zonecfg commit) at the end of the index.
func (st *State) addZone(z *Zone) {
	if st.tx.zone(z.Name) != nil || st.tx.err != nil {
		st.tx.fail(fmt.Errorf("add zone %s: it exists", z.Name))
		return
	}
	z.Index = st.NextZoneIndex
	st.NextZoneIndex++
	s := st.tx.zones[z.Name]
	s.z, s.removed = z, false
}

// removeZone drops a zone (zonecfg delete).
func (st *State) removeZone(name string) {
	if st.tx.zone(name) != nil {
		st.tx.zones[name].removed = true
	}
}

// link returns the named datalink or nil.
func (st *State) link(name string) *Link {
	for _, l := range st.Links {
		if l.Name == name {
			return l
		}
	}
	return nil
}

// dataset returns the named dataset or nil.
func (st *State) dataset(name string) *Dataset {
	for _, d := range st.Datasets {
		if d.Name == name {
			return d
		}
	}
	return nil
}
