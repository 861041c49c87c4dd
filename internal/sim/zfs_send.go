package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"
)

// zfs send and receive: full and incremental streams (the format is in
// zfs_stream.go), with receive's checks and its commit into the state.

// zfs send [-v] [-c] [-p] [-i SNAP] SNAP; -c (blocks as stored on disk)
// changes nothing here: the simulator stores no block compressed.
func zfsSend(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "vcpi:")
	if !ok {
		return badOption(inv, "send", bad)
	}
	if len(rest) != 1 {
		return zfsOperandErr(inv, "send", "snapshot", len(rest))
	}
	var verbose, withProps bool
	var from string
	for _, o := range opts {
		switch o.c {
		case 'v':
			verbose = true
		case 'p':
			withProps = true
		case 'i':
			from = o.val
		}
	}
	name := rest[0]
	if !strings.Contains(name, "@") {
		return zfsUsageErr(inv, "send", "argument must be a snapshot")
	}
	if from != "" {
		// -i @snap names a snapshot of the same filesystem.
		if strings.HasPrefix(from, "@") {
			from = parentName(name) + from
		}
		if !strings.Contains(from, "@") {
			return zfsUsageErr(inv, "send", "incremental source must be a snapshot")
		}
		if parentName(from) != parentName(name) {
			inv.errf("cannot send '%s': incremental source must be in same filesystem", name)
			return 1
		}
	}
	if f, ok := inv.stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		inv.errf("Error: Stream can not be written to a terminal.\nYou must redirect standard output.")
		return 1
	}
	var hdr streamHeader
	found, fromFound, earlier := false, true, true
	var settled time.Time
	err := inv.h.view(func(st *State) {
		s := st.dataset(name)
		src := st.dataset(parentName(name))
		if s == nil || s.Type != "snapshot" || src == nil {
			return
		}
		found = true
		if from != "" {
			f := st.dataset(from)
			if f == nil || f.Type != "snapshot" {
				fromFound = false
				return
			}
			earlier = slices.Index(st.Datasets, f) < slices.Index(st.Datasets, s)
			settled = time.Unix(f.Creation-1, 0)
			hdr.FromName, hdr.FromGUID = from, f.GUID
		}
		hdr = streamHeader{ToName: name, Type: src.Type, Creation: s.Creation, GUID: s.GUID, Refer: s.Refer,
			FromName: hdr.FromName, FromGUID: hdr.FromGUID}
		if src.Type == "volume" {
			hdr.VolSize = src.VolSize
			hdr.VolBlockSize, _ = st.propValue(inv.h, src, "volblocksize")
		}
		if withProps {
			hdr.Props = map[string]string{}
			for k, v := range src.Props {
				if k != "refreservation" && k != "mountpoint" {
					hdr.Props[k] = v
				}
			}
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if !found {
		inv.errf("cannot open '%s': dataset does not exist", name)
		return 1
	}
	if !fromFound {
		inv.errf("cannot open '%s': dataset does not exist", from)
		return 1
	}
	if !earlier {
		inv.errf("cannot send '%s': incremental source (%s) is not earlier than it", name, from)
		return 1
	}
	if verbose && from != "" {
		inv.errf("incremental send of %s estimated size is %s", name, nicenum(hdr.Refer))
		inv.errf("total estimated size is %s", nicenum(hdr.Refer))
	} else if verbose {
		inv.errf("full send of %s estimated size is %s", name, nicenum(hdr.Refer))
		inv.errf("total estimated size is %s", nicenum(hdr.Refer))
	}
	if hdr.Type == "volume" {
		// The stream carries the snapshot's size: the volume may have
		// been resized since it was taken.
		if fi, err := os.Stat(inv.h.snapshotVolData(name)); err == nil {
			hdr.VolSize = uint64(fi.Size())
		}
	}
	inv.faults.sleep()
	w := newStreamWriter(inv.faults.throttle(inv.stdout))
	err = w.header(hdr)
	if err == nil && hdr.Type == "volume" && from != "" {
		err = w.writeVolumeDelta(inv.h.snapshotVolData(from), inv.h.snapshotVolData(name), volBlockBytes(hdr.VolBlockSize))
	} else if err == nil && hdr.Type == "volume" {
		var f *os.File
		if f, err = os.Open(inv.h.snapshotVolData(name)); err == nil {
			err = forEachDataChunk(f, w.volume)
			f.Close()
		} else if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	} else if err == nil && from != "" {
		err = w.writeDelta(inv.h.snapshotDir(from), inv.h.snapshotDir(name), settled)
	} else if err == nil {
		err = w.writeTree(inv.h.snapshotDir(name))
	}
	if err == nil {
		err = w.end()
	}
	if err != nil {
		inv.errf("warning: cannot send '%s': %s", name, strerror(err))
		return 1
	}
	return 0
}

// zfs receive|recv [-Fnuv] [-o property=value]... FS[@SNAP]
func zfsReceive(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "Fnuvo:")
	if !ok {
		return badOption(inv, "receive", bad)
	}
	if len(rest) != 1 {
		return zfsOperandErr(inv, "receive", "snapshot", len(rest))
	}
	props, code, ok := parseCreateProps(inv, "receive", opts)
	if !ok {
		return code
	}
	var force, dry, noMount, verbose bool
	for _, o := range opts {
		switch o.c {
		case 'F':
			force = true
		case 'n':
			dry = true
		case 'u':
			noMount = true
		case 'v':
			verbose = true
		}
	}
	if f, ok := inv.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		inv.errf("Error: Backup stream can not be read from a terminal.\nYou must redirect standard input.")
		return 1
	}
	target := rest[0]
	fsName, snapName, hasAt := strings.Cut(target, "@")
	if why := datasetNameProblem(target); why != "" || (hasAt && snapName == "") {
		if why == "" {
			why = "empty component in name"
		}
		inv.errf("cannot receive: invalid name '%s': %s", target, why)
		return 1
	}
	start := time.Now()
	sr := newStreamReader(inv.faults.throttleReader(inv.stdin))
	hdr, err := sr.header()
	if err != nil {
		inv.errf("cannot receive: %s", streamErrText(err))
		return 1
	}
	if !hasAt {
		_, snapName, _ = strings.Cut(hdr.ToName, "@")
	}
	snap := fsName + "@" + snapName
	if hdr.FromGUID != 0 {
		return receiveIncremental(inv, sr, hdr, snap, props, incrementalFlags{force: force, dry: dry, verbose: verbose, start: start})
	}
	const errbuf = "cannot receive new filesystem stream"

	// Check the destination as zfs does before it reads the data.
	var why string
	err = inv.h.view(func(st *State) { why = receiveProblem(st, fsName, force) })
	if err != nil {
		return inv.stateErr(err)
	}
	if why != "" {
		inv.errf("%s: %s", errbuf, why)
		return 1
	}
	if verbose {
		verb := "receiving"
		if dry {
			verb = "would receive"
		}
		inv.outf("%s full stream of %s into %s", verb, hdr.ToName, snap)
	}

	// Read the data into a staging area outside the state lock (real zfs
	// receives into a hidden %recv dataset), then commit it in one update.
	stage, err := os.MkdirTemp(inv.h.root, ".recv-")
	if err != nil {
		return inv.stateErr(err)
	}
	defer os.RemoveAll(stage)
	tree, vol := filepath.Join(stage, "tree"), ""
	if hdr.Type == "volume" {
		tree, vol = "", filepath.Join(stage, "zvol")
	} else if err := os.Mkdir(tree, 0o755); err != nil {
		return inv.stateErr(err)
	}
	if dry {
		tree, vol = filepath.Join(stage, "tree"), filepath.Join(stage, "zvol")
		os.MkdirAll(tree, 0o755)
	}
	if err := sr.body(tree, vol); err != nil {
		prefix := "cannot receive"
		if errors.Is(err, errStreamChecksum) {
			prefix = errbuf
		}
		inv.errf("%s: %s", prefix, streamErrText(err))
		return 1
	}
	if dry {
		return 0
	}

	code = 0
	err = inv.h.update(func(st *State) bool {
		if why := receiveProblem(st, fsName, force); why != "" {
			inv.errf("%s: %s", errbuf, why)
			code = 1
			return false
		}
		if old := st.dataset(fsName); old != nil {
			removeDatasets(inv.h, st, []*Dataset{old})
		}
		d := newDataset(fsName, hdr.Type)
		d.Refer = max(hdr.Refer, baseRefer)
		for k, v := range hdr.Props {
			d.Props[k] = v
		}
		if hdr.Type == "volume" {
			d.VolSize = hdr.VolSize
			if hdr.VolBlockSize != "" && hdr.VolBlockSize != "8192" {
				d.Props["volblocksize"] = hdr.VolBlockSize
			}
		}
		if !applyProps(inv, "receive", fsName, d, props) {
			code = 1
			return false
		}
		if noMount && d.Type == "filesystem" {
			d.Unmounted = true
		}
		st.Datasets = append(st.Datasets, d)
		s := newDataset(snap, "snapshot")
		// A received snapshot keeps the sent one's GUID: incremental
		// streams name their source by it.
		s.Refer, s.Creation = d.Refer, hdr.Creation
		if hdr.GUID != 0 {
			s.GUID = hdr.GUID
		}
		st.Datasets = append(st.Datasets, s)
		if err := commitReceived(inv.h, st, d, snap, tree, vol); err != nil {
			inv.errf("%s: %s", errbuf, strerror(err))
			code = 1
			return false
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 && verbose {
		secs := max(int64(time.Since(start).Seconds()), 1)
		inv.outf("received %sB stream in %d seconds (%sB/sec)", nicenum(sr.n), secs, nicenum(sr.n/uint64(secs)))
	}
	return code
}

// receiveProblem is why a new full stream cannot be received into fs.
func receiveProblem(st *State, fs string, force bool) string {
	if d := st.dataset(fs); d != nil {
		if !force {
			return fmt.Sprintf("destination '%s' exists\nmust specify -F to overwrite it", fs)
		}
		if snaps := st.snapshotsOf(fs); len(snaps) > 0 {
			return fmt.Sprintf("destination has snapshots (eg. %s)\nmust destroy them to overwrite it", snaps[0].Name)
		}
		if d.Origin != "" {
			return fmt.Sprintf("destination '%s' is a clone\nmust destroy it to overwrite it", fs)
		}
		if len(st.children(fs)) > 0 {
			return "destination has children\nmust destroy them to overwrite it"
		}
		if _, busy := heldDatasets(st)[fs]; busy {
			return "dataset is busy"
		}
		return ""
	}
	if !strings.Contains(fs, "/") {
		return fmt.Sprintf("destination '%s' does not exist", fs)
	}
	parent := st.dataset(parentName(fs))
	if parent == nil {
		return "no such pool or dataset"
	}
	if parent.Type != "filesystem" {
		return "parent is not a filesystem"
	}
	return ""
}

// commitReceived moves staged data into place: the snapshot's frozen copy
// and the filesystem's files (or the volume's device).
func commitReceived(h *host, st *State, d *Dataset, snap, tree, vol string) error {
	if d.Type == "volume" {
		if err := os.MkdirAll(h.snapshotDir(snap), 0o755); err != nil {
			return err
		}
		if err := copySparse(vol, h.snapshotVolData(snap), d.VolSize); err != nil {
			return err
		}
		h.removeZvolDevice(d.Name)
		if err := os.MkdirAll(filepath.Dir(h.zvolPath(d.Name)), 0o755); err != nil {
			return err
		}
		if err := os.Rename(vol, h.zvolPath(d.Name)); err != nil {
			return err
		}
		return h.makeZvolDevice(d.Name, d.VolSize)
	}
	os.RemoveAll(h.snapshotDir(snap))
	if err := os.MkdirAll(filepath.Dir(h.snapshotDir(snap)), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tree, h.snapshotDir(snap)); err != nil {
		return err
	}
	// The simulation keeps a filesystem's files at its mountpoint whether
	// or not it is mounted (as zfs unmount does).
	if mp, _ := st.mountpoint(d); strings.HasPrefix(mp, "/") && mp != "/" {
		if err := copyTree(h.snapshotDir(snap), h.hostPath(mp)); err != nil {
			return err
		}
	}
	return h.realiseStorage(st, d)
}

func streamErrText(err error) string {
	for _, e := range []error{errStreamMagic, errStreamShort, errStreamChecksum, errStreamMalformed} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return strerror(err)
}
