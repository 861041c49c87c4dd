package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// The host's state is split so that a command pays only for what it
// touches, however many zones the host has:
//
//   - state.json holds what is host-wide (boot time, counters, datalinks,
//     datasets, NAT tables, fault counters), guarded by an flock on
//     state.lock;
//   - zones/NAME.json holds one zone (its configuration, IP configuration
//     and SMF services), guarded by an flock on zones/NAME.lock.
//
// Every file is replaced with a temp file and a rename, so a reader never
// sees a torn file; that is why reading one zone needs no lock at all.
//
// Lock order: the host lock first, then zone locks. A command that changes
// host-wide state (update) takes the host lock and then locks each zone it
// touches, in any order: only one process holds the host lock exclusively,
// and every other zone-lock holder holds no other lock and waits for none.
// A command that changes one zone alone (svcadm, svccfg, the zone's
// supervisor) takes that zone's lock and nothing else (updateZone). Zone
// fields that host-wide decisions depend on (state, id, configuration) are
// changed only under the host lock, so reading other zones without their
// locks under the host lock is consistent.
const (
	stateFileName = "state.json"
	lockFileName  = "state.lock"
	zonesDirName  = "zones"
	stateVersion  = 2
)

// host is one simulated host: its root directory and its facts.
type host struct {
	root  string
	facts *Facts
	// machineRoot caches machineRoot() (enforcesStorage).
	machineRoot *bool
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
	// The zones directory is the last thing a new (or migrated) root gets.
	if _, err := os.Stat(h.zonesDir()); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("state root %s: %w", root, err)
		}
		if err := h.initialise(); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (h *host) statePath() string           { return filepath.Join(h.root, stateFileName) }
func (h *host) zonesDir() string            { return filepath.Join(h.root, zonesDirName) }
func (h *host) zonePath(name string) string { return filepath.Join(h.zonesDir(), name+".json") }
func (h *host) zoneLockPath(name string) string {
	return filepath.Join(h.zonesDir(), name+".lock")
}

// initialise writes a new host's state at once, so every reader sees the
// same boot time and pool GUIDs. A root written by an older simulator (one
// state.json holding every zone) is split into zone files.
func (h *host) initialise() error {
	l, err := h.lockHost(true)
	if err != nil {
		return err
	}
	defer l.release()
	if _, err := os.Stat(h.zonesDir()); err == nil {
		return nil // another command got there first
	}
	st, zones, err := h.loadLegacy()
	if err != nil {
		return err
	}
	// The zones go to a directory renamed into place, so a root has either
	// all its zone files or none.
	tmp := h.zonesDir() + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("initialise state: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("initialise state: %w", err)
	}
	for _, z := range zones {
		b, err := marshalState(z)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(tmp, z.Name+".json"), b); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, h.zonesDir()); err != nil {
		return fmt.Errorf("initialise state: %w", err)
	}
	return h.saveHost(st, nil)
}

// loadLegacy reads a version 1 state file, or makes a new host's state.
func (h *host) loadLegacy() (*State, []*Zone, error) {
	b, err := os.ReadFile(h.statePath())
	if errors.Is(err, os.ErrNotExist) {
		st, global := newState(h.facts)
		return st, []*Zone{global}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read state: %w", err)
	}
	st := &State{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", h.statePath(), err)
	}
	zones := st.Zones
	st.Zones = nil
	for i, z := range zones {
		z.Index = i
		if z.Name == "global" && z.Booted.IsZero() {
			z.Booted = st.BootTime
		}
	}
	st.Version, st.NextZoneIndex = stateVersion, len(zones)
	st.NAT = nil // NAT tables have their own files (ipnat.go)
	return st, zones, nil
}

// fileLock is a held flock.
type fileLock struct {
	f    *os.File
	path string
}

// lockFile takes an flock on path, creating the file. A zone's lock file
// is removed, by the holder of its lock, when the zone goes away: a lock
// taken on a file that is no longer at path guards nothing, so it is taken
// again on the current one.
func lockFile(path string, exclusive bool) (*fileLock, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open lock: %w", err)
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
		var held, cur syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &cur) == nil &&
			held.Dev == cur.Dev && held.Ino == cur.Ino {
			return &fileLock{f: f, path: path}, nil
		}
		f.Close()
	}
}

func (l *fileLock) release() { l.f.Close() }

// releaseAndRemove drops the lock file of a zone that no longer exists.
func (l *fileLock) releaseAndRemove() {
	os.Remove(l.path)
	l.f.Close()
}

// zoneFileOK rejects names that cannot be a zone file (a zone name from a
// command line is looked up before it is validated): such a zone does not
// exist. Zone names are at most 64 characters.
func zoneFileOK(name string) bool {
	return name != "" && len(name) <= 200 && !strings.ContainsAny(name, "/\x00") && !strings.HasPrefix(name, ".")
}

// readZone reads one zone's file; a zone that does not exist is nil.
func (h *host) readZone(name string) (*Zone, []byte, error) {
	if !zoneFileOK(name) {
		return nil, nil, nil
	}
	b, err := os.ReadFile(h.zonePath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read zone %s: %w", name, err)
	}
	z := &Zone{}
	if err := json.Unmarshal(b, z); err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", h.zonePath(name), err)
	}
	return z, b, nil
}

// zoneNames lists the zones that have a file.
func (h *host) zoneNames() ([]string, error) {
	entries, err := os.ReadDir(h.zonesDir())
	if err != nil {
		return nil, fmt.Errorf("list zones: %w", err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			names = append(names, strings.TrimSuffix(n, ".json"))
		}
	}
	return names, nil
}

// sortZones puts zones in index order.
func sortZones(zones []*Zone) {
	sort.Slice(zones, func(i, j int) bool {
		if zones[i].Index != zones[j].Index {
			return zones[i].Index < zones[j].Index
		}
		return zones[i].Name < zones[j].Name
	})
}

// marshalState encodes a state file. Compactly: listings decode every
// zone's file, and whitespace makes that markedly slower (`illumos-sim
// state` is the readable form).
func marshalState(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return append(b, '\n'), nil
}

// loadHost reads the host-wide state file.
func (h *host) loadHost() (*State, []byte, error) {
	b, err := os.ReadFile(h.statePath())
	if errors.Is(err, os.ErrNotExist) {
		st, _ := newState(h.facts)
		return st, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read state: %w", err)
	}
	st := &State{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", h.statePath(), err)
	}
	st.Zones = nil
	st.NAT = nil // NAT tables have their own files (ipnat.go)
	return st, b, nil
}

// saveHost writes the host-wide state file unless it is unchanged (orig).
func (h *host) saveHost(st *State, orig []byte) error {
	sort.Slice(st.Datasets, func(i, j int) bool { return st.Datasets[i].Name < st.Datasets[j].Name })
	zones, nat := st.Zones, st.NAT
	st.Zones, st.NAT = nil, nil
	b, err := marshalState(st)
	st.Zones, st.NAT = zones, nat
	if err != nil {
		return err
	}
	if bytes.Equal(b, orig) {
		return nil
	}
	return writeFileAtomic(h.statePath(), b)
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

// txn is one command's access to the state: the host-wide file, read
// under the host lock, and the zones it touches, read on first use.
type txn struct {
	h        *host
	write    bool
	hostOrig []byte
	zones    map[string]*zoneSlot
	listed   bool // every zone file has been read
	err      error
}

// zoneSlot is one zone as a transaction sees it.
type zoneSlot struct {
	z       *Zone
	orig    []byte    // the file as read; nil when there was none
	lock    *fileLock // held in an update; nil for a zone only read
	removed bool
}

func (tx *txn) fail(err error) {
	if tx.err == nil {
		tx.err = err
	}
}

// zone returns the named zone or nil. In an update it locks the zone,
// which is then saved with the rest.
func (tx *txn) zone(name string) *Zone {
	if !zoneFileOK(name) {
		return nil
	}
	if s := tx.zones[name]; s != nil && (s.lock != nil || !tx.write) {
		if s.removed {
			return nil
		}
		return s.z
	}
	// Not read yet, or read without its lock for a listing: an update
	// locks the zone and reads it again.
	s := &zoneSlot{}
	if tx.write {
		l, err := lockFile(tx.h.zoneLockPath(name), true)
		if err != nil {
			tx.fail(err)
			return nil
		}
		s.lock = l
	}
	z, b, err := tx.h.readZone(name)
	if err != nil {
		if s.lock != nil {
			s.lock.release()
		}
		tx.fail(err)
		return nil
	}
	s.z, s.orig = z, b
	tx.zones[name] = s
	return z
}

// list returns every zone in index order. Zones the transaction has not
// looked up with zone are read without their locks: they are for reading
// only, even in an update.
func (tx *txn) list() []*Zone {
	if !tx.listed {
		names, err := tx.h.zoneNames()
		if err != nil {
			tx.fail(err)
			return nil
		}
		for _, n := range names {
			if tx.zones[n] != nil {
				continue
			}
			z, b, err := tx.h.readZone(n)
			if err != nil {
				tx.fail(err)
				return nil
			}
			tx.zones[n] = &zoneSlot{z: z, orig: b}
		}
		tx.listed = true
	}
	var out []*Zone
	for _, s := range tx.zones {
		if s.z != nil && !s.removed {
			out = append(out, s.z)
		}
	}
	sortZones(out)
	return out
}

// save writes every locked zone that changed, then the host file.
func (tx *txn) save(st *State) error {
	keys := make([]string, 0, len(tx.zones))
	for k, s := range tx.zones {
		if s.lock != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := tx.zones[k]
		if s.removed || s.z == nil {
			if s.orig != nil {
				if err := os.Remove(tx.h.zonePath(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("remove zone %s: %w", k, err)
				}
			}
			continue
		}
		b, err := marshalState(s.z)
		if err != nil {
			return err
		}
		if s.z.Name == k {
			if !bytes.Equal(b, s.orig) {
				if err := writeFileAtomic(tx.h.zonePath(k), b); err != nil {
					return err
				}
			}
			continue
		}
		// Renamed (zonecfg set zonename): the new name is locked, then the
		// zone moves to its file.
		if t := tx.zones[s.z.Name]; t == nil || t.lock == nil {
			if tx.zone(s.z.Name) != nil || tx.err != nil {
				return fmt.Errorf("rename zone %s: %s exists", k, s.z.Name)
			}
		}
		if err := writeFileAtomic(tx.h.zonePath(s.z.Name), b); err != nil {
			return err
		}
		if err := os.Remove(tx.h.zonePath(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rename zone %s: %w", k, err)
		}
	}
	return tx.h.saveHost(st, tx.hostOrig)
}

// release drops the zone locks; the lock file of a zone that does not
// exist (any more) goes with its lock.
func (tx *txn) release() {
	for k, s := range tx.zones {
		if s.lock == nil {
			continue
		}
		if _, err := os.Stat(tx.h.zonePath(k)); errors.Is(err, os.ErrNotExist) {
			s.lock.releaseAndRemove()
		} else {
			s.lock.release()
		}
	}
}

// lockHost takes the host lock.
func (h *host) lockHost(exclusive bool) (*fileLock, error) {
	return lockFile(filepath.Join(h.root, lockFileName), exclusive)
}

// begin loads the host file for a transaction; the host lock is held.
func (h *host) begin(write bool) (*State, *txn, error) {
	st, b, err := h.loadHost()
	if err != nil {
		return nil, nil, err
	}
	tx := &txn{h: h, write: write, hostOrig: b, zones: map[string]*zoneSlot{}}
	st.tx = tx
	return st, tx, nil
}

// update runs fn on the current state under the host lock and saves what
// changed if fn returns true: the host file and the zones fn looked up.
func (h *host) update(fn func(st *State) bool) error {
	l, err := h.lockHost(true)
	if err != nil {
		return err
	}
	defer l.release()
	st, tx, err := h.begin(true)
	if err != nil {
		return err
	}
	defer tx.release()
	h.mountStorage(st)
	ok := fn(st)
	if tx.err != nil {
		return tx.err
	}
	if !ok {
		return nil
	}
	return tx.save(st)
}

// view runs fn on the current state under a shared host lock.
func (h *host) view(fn func(st *State)) error {
	l, err := h.lockHost(false)
	if err != nil {
		return err
	}
	defer l.release()
	st, tx, err := h.begin(false)
	if err != nil {
		return err
	}
	fn(st)
	return tx.err
}

// viewZone reads one zone (nil if there is none). It takes no lock: zone
// files are replaced atomically, so it sees the zone before or after any
// change, never half of one.
func (h *host) viewZone(name string) (*Zone, error) {
	z, _, err := h.readZone(name)
	return z, err
}

// updateZone runs fn on one zone under that zone's lock alone, and saves
// the zone if fn returns true and changed it. fn gets nil for a zone that
// does not exist; it may not rename the zone or touch host-wide state.
func (h *host) updateZone(name string, fn func(z *Zone) bool) error {
	if !zoneFileOK(name) {
		fn(nil)
		return nil
	}
	if _, err := os.Stat(h.zonePath(name)); errors.Is(err, os.ErrNotExist) {
		fn(nil) // no lock file is made for a zone that does not exist
		return nil
	}
	l, err := lockFile(h.zoneLockPath(name), true)
	if err != nil {
		return err
	}
	z, orig, err := h.readZone(name)
	if err != nil {
		l.release()
		return err
	}
	if z == nil {
		l.releaseAndRemove()
		fn(nil)
		return nil
	}
	defer l.release()
	if !fn(z) {
		return nil
	}
	b, err := marshalState(z)
	if err != nil {
		return err
	}
	if bytes.Equal(b, orig) {
		return nil
	}
	return writeFileAtomic(h.zonePath(name), b)
}

// listZones reads every zone, in index order, without any lock (see
// viewZone): for listings, which never write.
func (h *host) listZones() ([]*Zone, error) {
	names, err := h.zoneNames()
	if err != nil {
		return nil, err
	}
	zones := make([]*Zone, 0, len(names))
	for _, n := range names {
		z, _, err := h.readZone(n)
		if err != nil {
			return nil, err
		}
		if z != nil {
			zones = append(zones, z)
		}
	}
	sortZones(zones)
	return zones, nil
}
