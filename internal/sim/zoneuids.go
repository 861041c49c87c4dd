package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A zone's ids. On illumos every zone has the whole uid space of its
// own: uid 1000 of one zone is not uid 1000 of another. The simulator's
// zones share one Linux kernel, so as the machine's root it gives each
// zone a block of the machine's ids: the zone's uid n is the machine's
// base+n, its root the block's base. A block is the zone's from its
// first boot until it is uninstalled, then given to the next zone; a
// machine has room for about 32,000 blocks at once. In a user namespace
// of its own (a stack without root) there are too few ids for blocks:
// a zone gets one id, its root's, and runs nothing as another user.

// zoneUIDBlock is how many ids a zone owns as the machine's root.
const zoneUIDBlock = 65536

// zoneUIDBlocks is the machine's register of the blocks given out: one
// symbolic link per block, named by its base, to the state root of the
// host whose zone holds it. A link whose host is gone (a test's host
// removed with its zones) frees its block once no process runs as one
// of its ids.
const zoneUIDBlocks = "/var/lib/illumos-sim/zone-uid-blocks"

// firstZoneUIDBlock is the base of the first block at or above base.
func firstZoneUIDBlock(base uint32) uint64 {
	return (uint64(base) + zoneUIDBlock - 1) / zoneUIDBlock * zoneUIDBlock
}

// zoneIDs maps a zone's own ids to the machine's.
type zoneIDs struct {
	base uint32 // the machine's id of the zone's root
	n    uint32 // how many ids the zone owns: zoneUIDBlock, or 1
}

// ids are z's ids; n is 0 for a zone that has none yet.
func (z *Zone) ids() zoneIDs {
	n := uint32(1)
	if z.UIDs > 0 {
		n = z.UIDs
	}
	if z.UID == 0 {
		n = 0
	}
	return zoneIDs{base: z.UID, n: n}
}

// machine is the machine's id of the zone's id inZone, if the zone owns
// it.
func (ids zoneIDs) machine(inZone uint32) (uint32, bool) {
	if inZone >= ids.n {
		return 0, false
	}
	return ids.base + inZone, true
}

// access is the group every process of a zone that owns a block holds
// besides its own, the last id of the block: the tops of the zone's
// trees (its root, its claims) let it in and no other zone's users; 0
// for a zone of one id, whose trees are its root's alone.
func (ids zoneIDs) access() uint32 {
	if ids.n <= 1 {
		return 0
	}
	return ids.base + ids.n - 1
}

// claim is the machine's id a file owned by the machine's id h becomes
// when the zone takes the file over: a file of another zone (a claim that
// served it, here or on another host) keeps its owner's place in the
// zone's ids, an image's file (owned by the ids its archive names) gets
// that id of the zone, and anything else the zone's root.
func (ids zoneIDs) claim(h uint32) uint32 {
	switch {
	case ids.n <= 1:
		return ids.base
	case h < ids.n:
		return ids.base + h
	case uint64(h) >= firstZoneUIDBlock(defaultZoneUIDBase):
		return ids.base + h%zoneUIDBlock
	}
	return ids.base
}

// takeZoneUIDBlock gives owner's zone the lowest free block at or above
// base from the register dir, freeing first the blocks of hosts that are
// gone when no process holds their ids. The entry is on disk before the
// block is used.
func takeZoneUIDBlock(dir, owner string, base uint32) (uint32, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("zone uid blocks: %w", err)
	}
	l, err := lockFile(filepath.Join(dir, ".lock"), true)
	if err != nil {
		return 0, fmt.Errorf("zone uid blocks: %w", err)
	}
	defer l.release()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("zone uid blocks: %w", err)
	}
	held := map[uint64]bool{}
	var orphans []uint64
	for _, e := range entries {
		b, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		held[b] = true
		if _, err := os.Stat(filepath.Join(dir, e.Name())); errors.Is(err, fs.ErrNotExist) {
			orphans = append(orphans, b)
		}
	}
	if len(orphans) > 0 {
		busy, err := uidsInUse()
		if err != nil {
			return 0, fmt.Errorf("zone uid blocks: %w", err)
		}
		for _, b := range orphans {
			if !busy(b, b+zoneUIDBlock) && os.Remove(filepath.Join(dir, strconv.FormatUint(b, 10))) == nil {
				delete(held, b)
			}
		}
	}
	for b := firstZoneUIDBlock(base); b+zoneUIDBlock-1 <= maxZoneUID; b += zoneUIDBlock {
		if held[b] {
			continue
		}
		if err := os.Symlink(owner, filepath.Join(dir, strconv.FormatUint(b, 10))); err != nil {
			return 0, fmt.Errorf("zone uid blocks: %w", err)
		}
		if err := syncDir(dir); err != nil {
			return 0, fmt.Errorf("zone uid blocks: %w", err)
		}
		return uint32(b), nil
	}
	return 0, fmt.Errorf("zone uid blocks: none left from %d (%s holds %d)", base, dir, len(held))
}

// releaseZoneUIDBlock gives back the block at base if owner holds it.
func releaseZoneUIDBlock(dir, owner string, base uint32) error {
	l, err := lockFile(filepath.Join(dir, ".lock"), true)
	if err != nil {
		return fmt.Errorf("zone uid blocks: %w", err)
	}
	defer l.release()
	link := filepath.Join(dir, strconv.FormatUint(uint64(base), 10))
	if to, err := os.Readlink(link); err != nil || to != owner {
		return nil
	}
	if err := os.Remove(link); err != nil {
		return fmt.Errorf("zone uid blocks: %w", err)
	}
	return nil
}

// uidsInUse reads the real, effective, saved and file-system uids of
// every process, and answers whether any lies in [lo, hi).
func uidsInUse() (func(lo, hi uint64) bool, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var uids []uint64
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", p.Name(), "status"))
		if err != nil {
			continue // gone meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
				for _, w := range strings.Fields(rest) {
					if u, err := strconv.ParseUint(w, 10, 32); err == nil {
						uids = append(uids, u)
					}
				}
				break
			}
		}
		f.Close()
	}
	return func(lo, hi uint64) bool {
		for _, u := range uids {
			if u >= lo && u < hi {
				return true
			}
		}
		return false
	}, nil
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
