package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// The host's state is one JSON file guarded by an flock on a sibling lock
// file. Every command loads it under the lock, changes it and writes it back
// with a temp file and a rename, so a reader never sees a torn file and two
// concurrent commands never lose each other's update.
const (
	stateFileName = "state.json"
	lockFileName  = "state.lock"
	stateVersion  = 1
)

// State is everything the simulator knows about one host. `illumos-sim
// state` prints it as is.
type State struct {
	Version    int                  `json:"version"`
	BootTime   time.Time            `json:"boot_time"`
	NextZoneID int                  `json:"next_zone_id"`
	Zones      []*Zone              `json:"zones"`
	Links      []*Link              `json:"links"`
	Datasets   []*Dataset           `json:"datasets"`
	NAT        map[string]*NATTable `json:"nat"`
	// FaultCalls counts the calls each probabilistic fault rule has seen, so
	// a seeded failure sequence is the same on every run.
	FaultCalls map[string]int `json:"fault_calls,omitempty"`
}

// Zone is one zone, the global zone included.
type Zone struct {
	Name   string      `json:"name"`
	State  string      `json:"state"`
	ID     int         `json:"id"` // -1 when the zone is not in the kernel
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
	// Booted is when the zone last reached running.
	Booted time.Time `json:"booted,omitempty"`

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

// NATTable is one IP stack's IPFilter NAT configuration.
type NATTable struct {
	Rules []string `json:"rules"` // normalised rule text
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

// host is one simulated host: its root directory and its facts.
type host struct {
	root  string
	facts *Facts
}

func openHost(root string) (*host, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("state root %s: %w", root, err)
	}
	f, err := loadFacts(root)
	if err != nil {
		return nil, err
	}
	h := &host{root: root, facts: f}
	if _, err := os.Stat(filepath.Join(root, stateFileName)); errors.Is(err, os.ErrNotExist) {
		// Write a new host's state at once, so every reader sees the same
		// boot time and pool GUIDs.
		if err := h.update(func(*State) bool { return true }); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// lock takes the host lock; the returned func releases it.
func (h *host) lock(exclusive bool) (func(), error) {
	f, err := os.OpenFile(filepath.Join(h.root, lockFileName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock state: %w", err)
	}
	return func() { f.Close() }, nil
}

// load reads the state; a root without a state file gets a fresh host.
func (h *host) load() (*State, error) {
	b, err := os.ReadFile(filepath.Join(h.root, stateFileName))
	if errors.Is(err, os.ErrNotExist) {
		return newState(h.facts), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	st := &State{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(h.root, stateFileName), err)
	}
	if st.NAT == nil {
		st.NAT = map[string]*NATTable{}
	}
	return st, nil
}

// save writes the state atomically: readers see the old or the new file,
// never a mix.
func (h *host) save(st *State) error {
	sort.Slice(st.Datasets, func(i, j int) bool { return st.Datasets[i].Name < st.Datasets[j].Name })
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return writeFileAtomic(filepath.Join(h.root, stateFileName), append(b, '\n'))
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// update runs fn on the current state under the exclusive lock and saves
// the state if fn returns true.
func (h *host) update(fn func(st *State) bool) error {
	unlock, err := h.lock(true)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := h.load()
	if err != nil {
		return err
	}
	if !fn(st) {
		return nil
	}
	return h.save(st)
}

// view runs fn on the current state under a shared lock.
func (h *host) view(fn func(st *State)) error {
	unlock, err := h.lock(false)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := h.load()
	if err != nil {
		return err
	}
	fn(st)
	return nil
}

// newState is the state of a host that was never used: the global zone,
// the physical links and the pools from the host facts.
func newState(f *Facts) *State {
	now := time.Now().UTC().Truncate(time.Second)
	st := &State{
		Version:    stateVersion,
		BootTime:   now,
		NextZoneID: 1,
		NAT:        map[string]*NATTable{},
	}
	st.Zones = append(st.Zones, &Zone{
		Name: "global", State: stateRunning, ID: 0,
		Config: &ZoneConfig{Zonepath: "/", Brand: f.GlobalBrand, IPType: "shared"},
	})
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
	return st
}

// zone returns the named zone or nil.
func (st *State) zone(name string) *Zone {
	for _, z := range st.Zones {
		if z.Name == name {
			return z
		}
	}
	return nil
}

// removeZone drops a zone from the index.
func (st *State) removeZone(name string) {
	out := st.Zones[:0]
	for _, z := range st.Zones {
		if z.Name != name {
			out = append(out, z)
		}
	}
	st.Zones = out
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

// natTable returns (creating) the NAT table of an IP stack.
func (st *State) natTable(stack string) *NATTable {
	if st.NAT == nil {
		st.NAT = map[string]*NATTable{}
	}
	t := st.NAT[stack]
	if t == nil {
		t = &NATTable{Rules: []string{}}
		st.NAT[stack] = t
	}
	return t
}
