package illumos

import (
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos/names"
)

const zfsPath = "/usr/sbin/zfs"

// ZFS administers datasets on a host.
type ZFS struct{ Runner Executor }

// Dataset is one row of `zfs list -H -p -o` with datasetColumns. Numbers
// that do not apply (a snapshot's avail, an unset quota) are 0.
type Dataset struct {
	Name        string
	Type        string // filesystem, volume, snapshot, bookmark
	Used        uint64
	Avail       uint64
	Refer       uint64
	Mountpoint  string // "" when it does not apply (volumes, snapshots)
	Quota       uint64
	Reservation uint64
}

// datasetColumns are the -o columns ParseZFSList reads, in order.
const datasetColumns = "name,type,used,avail,refer,mountpoint,quota,reservation"

// ListOptions select the datasets List returns.
type ListOptions struct {
	Names     []string // datasets to list (all when empty)
	Recursive bool     // -r: include descendants
	Depth     int      // -d N when > 0: descendants down to N levels
	Types     []string // -t: filesystem, volume, snapshot, bookmark, all
}

// Create creates a filesystem and any missing parents (-p), with the given
// properties (-o k=v). With -p, zfs treats an existing dataset as success
// and leaves its properties alone: follow with Set to make them so.
func (z ZFS) Create(ctx context.Context, name string, props map[string]string) error {
	const op = "zfs create"
	if !names.ValidDatasetName(name) {
		return invalidf(op, name, "invalid dataset name %q", name)
	}
	args, err := propArgs(op, name, "-o", props)
	if err != nil {
		return err
	}
	args = append(append([]string{"create", "-p"}, args...), name)
	_, err = run(ctx, z.Runner, op, name, Cmd{Path: zfsPath, Args: args})
	return err
}

// CreateVolume creates a volume of size bytes (a bhyve disk), with any
// missing parents.
func (z ZFS) CreateVolume(ctx context.Context, name string, size uint64, props map[string]string) error {
	const op = "zfs create"
	if !names.ValidDatasetName(name) {
		return invalidf(op, name, "invalid dataset name %q", name)
	}
	if size == 0 {
		return invalidf(op, name, "volume size must be positive")
	}
	args, err := propArgs(op, name, "-o", props)
	if err != nil {
		return err
	}
	args = append(append([]string{"create", "-p", "-V", strconv.FormatUint(size, 10)}, args...), name)
	_, err = run(ctx, z.Runner, op, name, Cmd{Path: zfsPath, Args: args})
	return err
}

// Destroy destroys a dataset and its descendants (-r). ErrNotFound when it
// does not exist; ErrBusy while a running zone holds it; ErrWrongState when
// snapshots have clones elsewhere.
func (z ZFS) Destroy(ctx context.Context, name string) error {
	const op = "zfs destroy"
	if !names.ValidDatasetName(name) && !names.ValidSnapshotName(name) {
		return invalidf(op, name, "invalid dataset name %q", name)
	}
	_, err := run(ctx, z.Runner, op, name, Cmd{Path: zfsPath, Args: []string{"destroy", "-r", name}})
	return err
}

// Snapshot creates dataset@snap.
func (z ZFS) Snapshot(ctx context.Context, dataset, snap string) error {
	const op = "zfs snapshot"
	full := dataset + "@" + snap
	if !names.ValidSnapshotName(full) {
		return invalidf(op, full, "invalid snapshot name %q", full)
	}
	_, err := run(ctx, z.Runner, op, full, Cmd{Path: zfsPath, Args: []string{"snapshot", full}})
	return err
}

// Clone creates target as a clone of snapshot (DATASET@SNAP), with any
// missing parents and the given properties.
func (z ZFS) Clone(ctx context.Context, snapshot, target string, props map[string]string) error {
	const op = "zfs clone"
	if !names.ValidSnapshotName(snapshot) {
		return invalidf(op, target, "invalid snapshot name %q", snapshot)
	}
	if !names.ValidDatasetName(target) {
		return invalidf(op, target, "invalid dataset name %q", target)
	}
	args, err := propArgs(op, target, "-o", props)
	if err != nil {
		return err
	}
	args = append(append([]string{"clone", "-p"}, args...), snapshot, target)
	_, err = run(ctx, z.Runner, op, target, Cmd{Path: zfsPath, Args: args})
	return err
}

// List lists datasets. Naming a dataset that does not exist gives
// ErrNotFound.
func (z ZFS) List(ctx context.Context, o ListOptions) ([]Dataset, error) {
	const op = "zfs list"
	subject := strings.Join(o.Names, " ")
	args := []string{"list", "-H", "-p", "-o", datasetColumns}
	if o.Recursive {
		args = append(args, "-r")
	}
	if o.Depth > 0 {
		args = append(args, "-d", strconv.Itoa(o.Depth))
	}
	if len(o.Types) > 0 {
		args = append(args, "-t", strings.Join(o.Types, ","))
	}
	for _, n := range o.Names {
		if !names.ValidDatasetName(n) && !names.ValidSnapshotName(n) {
			return nil, invalidf(op, n, "invalid dataset name %q", n)
		}
	}
	args = append(args, o.Names...)
	res, err := run(ctx, z.Runner, op, subject, Cmd{Path: zfsPath, Args: args})
	if err != nil {
		return nil, err
	}
	ds, err := ParseZFSList(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, subject, err)
	}
	return ds, nil
}

// Exists reports whether a dataset (or snapshot) exists.
func (z ZFS) Exists(ctx context.Context, name string) (bool, error) {
	const op = "zfs list"
	if !names.ValidDatasetName(name) && !names.ValidSnapshotName(name) {
		return false, invalidf(op, name, "invalid dataset name %q", name)
	}
	_, err := run(ctx, z.Runner, op, name, Cmd{Path: zfsPath, Args: []string{"list", "-H", "-o", "name", "-t", "all", name}})
	if err != nil {
		if KindOf(err) == KindNotFound {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Get returns one property's value in exact (-p) form. Unset user
// properties are "-"; unset quota and reservation are "0".
func (z ZFS) Get(ctx context.Context, name, prop string) (string, error) {
	vals, err := z.GetProps(ctx, name, prop)
	if err != nil {
		return "", err
	}
	return vals[prop], nil
}

// GetProps returns several properties of one dataset
// (`zfs get -H -p -o value p1,p2 D`, one value per line in request order).
func (z ZFS) GetProps(ctx context.Context, name string, props ...string) (map[string]string, error) {
	const op = "zfs get"
	if !names.ValidDatasetName(name) && !names.ValidSnapshotName(name) {
		return nil, invalidf(op, name, "invalid dataset name %q", name)
	}
	if len(props) == 0 {
		return map[string]string{}, nil
	}
	for _, p := range props {
		if !validPropName(p) {
			return nil, invalidf(op, name, "invalid property name %q", p)
		}
	}
	res, err := run(ctx, z.Runner, op, name, Cmd{Path: zfsPath, Args: []string{"get", "-H", "-p", "-o", "value", strings.Join(props, ","), name}})
	if err != nil {
		return nil, err
	}
	vals, err := ParseZFSGetValues(string(res.Stdout), len(props))
	if err != nil {
		return nil, parseError(op, name, err)
	}
	m := make(map[string]string, len(props))
	for i, p := range props {
		m[p] = vals[i]
	}
	return m, nil
}

// GetPropsOfEach reads the same properties of several datasets in one
// `zfs get -H -p -o name,property,value p1,p2 D1 D2...`: values by
// dataset, then property. zfs prints the datasets it can open even when
// another does not exist, so on an error the map still holds those.
func (z ZFS) GetPropsOfEach(ctx context.Context, datasets []string, props ...string) (map[string]map[string]string, error) {
	const op = "zfs get"
	subject := strings.Join(datasets, " ")
	if len(datasets) == 0 || len(props) == 0 {
		return map[string]map[string]string{}, nil
	}
	for _, ds := range datasets {
		if !names.ValidDatasetName(ds) && !names.ValidSnapshotName(ds) {
			return nil, invalidf(op, subject, "invalid dataset name %q", ds)
		}
	}
	for _, p := range props {
		if !validPropName(p) {
			return nil, invalidf(op, subject, "invalid property name %q", p)
		}
	}
	args := append([]string{"get", "-H", "-p", "-o", "name,property,value", strings.Join(props, ",")}, datasets...)
	res, runErr := run(ctx, z.Runner, op, subject, Cmd{Path: zfsPath, Args: args})
	vals, err := ParseZFSGetRows(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, subject, err)
	}
	return vals, runErr
}

// ParseZFSGetRows parses `zfs get -H -o name,property,value`: one
// property of one dataset per line, three TAB-separated fields (the
// value last, so it may hold tabs itself).
func ParseZFSGetRows(out string) (map[string]map[string]string, error) {
	vals := map[string]map[string]string{}
	for _, line := range nonEmptyLines(out) {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 || f[0] == "" || f[1] == "" {
			return nil, fmt.Errorf("want name, property and value: %q", line)
		}
		if vals[f[0]] == nil {
			vals[f[0]] = map[string]string{}
		}
		vals[f[0]][f[1]] = f[2]
	}
	return vals, nil
}

// Set sets properties of a dataset.
func (z ZFS) Set(ctx context.Context, name string, props map[string]string) error {
	const op = "zfs set"
	if !names.ValidDatasetName(name) {
		return invalidf(op, name, "invalid dataset name %q", name)
	}
	if len(props) == 0 {
		return nil
	}
	args, err := propArgs(op, name, "", props)
	if err != nil {
		return err
	}
	args = append(append([]string{"set"}, args...), name)
	_, err = run(ctx, z.Runner, op, name, Cmd{Path: zfsPath, Args: args})
	return err
}

// SetQuota limits the space a dataset and its descendants use; 0 removes
// the limit.
func (z ZFS) SetQuota(ctx context.Context, name string, bytes uint64) error {
	return z.Set(ctx, name, map[string]string{"quota": sizeOrNone(bytes)})
}

// SetReservation guarantees a dataset space; 0 removes the guarantee.
func (z ZFS) SetReservation(ctx context.Context, name string, bytes uint64) error {
	return z.Set(ctx, name, map[string]string{"reservation": sizeOrNone(bytes)})
}

func sizeOrNone(b uint64) string {
	if b == 0 {
		return "none"
	}
	return strconv.FormatUint(b, 10)
}

// validPropName accepts native (a-z, digits, '_') and user (with ':')
// property names.
func validPropName(p string) bool {
	if p == "" || len(p) > 256 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(isAlnum(c) || c == '_' || c == ':' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// propArgs renders props as k=v words in key order, each preceded by flag
// when flag is not empty. Values go in their own argv word, so no value
// can turn into another option.
func propArgs(op, subject, flag string, props map[string]string) ([]string, error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		if !validPropName(k) {
			return nil, invalidf(op, subject, "invalid property name %q", k)
		}
		v := props[k]
		if strings.ContainsAny(v, "\x00\n") {
			return nil, invalidf(op, subject, "property %s: value contains a NUL or newline", k)
		}
		if flag != "" {
			args = append(args, flag)
		}
		args = append(args, k+"="+v)
	}
	return args, nil
}

// ParseZFSList parses `zfs list -H -p -o name,type,used,avail,refer,
// mountpoint,quota,reservation`: one dataset per line, fields separated by
// a single TAB, "-" where a value does not apply.
func ParseZFSList(out string) ([]Dataset, error) {
	var ds []Dataset
	for _, line := range nonEmptyLines(out) {
		f := strings.Split(line, "\t")
		if len(f) != 8 {
			return nil, fmt.Errorf("%d fields, want 8: %q", len(f), line)
		}
		d := Dataset{Name: f[0], Type: f[1]}
		if d.Name == "" {
			return nil, fmt.Errorf("empty dataset name in %q", line)
		}
		if f[5] != "-" {
			d.Mountpoint = f[5]
		}
		for i, dst := range []*uint64{&d.Used, &d.Avail, &d.Refer, nil, &d.Quota, &d.Reservation} {
			if dst == nil {
				continue
			}
			v, err := parseZFSNumber(f[2+i])
			if err != nil {
				return nil, fmt.Errorf("dataset %s: %w", d.Name, err)
			}
			*dst = v
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// parseZFSNumber parses an exact (-p) number; "-" and "none" are 0.
func parseZFSNumber(s string) (uint64, error) {
	if s == "-" || s == "none" || s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return v, nil
}

// ParseZFSGetValues parses `zfs get -H -p -o value`: exactly want lines,
// one value each (values may contain spaces and tabs).
func ParseZFSGetValues(out string, want int) ([]string, error) {
	out = strings.TrimSuffix(out, "\n")
	var vals []string
	if out != "" || want == 1 {
		vals = strings.Split(out, "\n")
	}
	if len(vals) != want {
		return nil, fmt.Errorf("%d values, want %d", len(vals), want)
	}
	return vals, nil
}

// ReceiveOptions are the flags of `zfs receive`.
type ReceiveOptions struct {
	Force   bool              // -F: replace an existing destination
	NoMount bool              // -u: do not mount what was received
	Props   map[string]string // -o k=v: set on the received dataset
}

// Receive reads a send stream from r into target (a dataset, or
// DATASET@SNAP to name the received snapshot), streaming it to zfs
// receive as it is read. ErrAlreadyExists when target exists without
// Force; ErrNotFound when its parent does not; ErrTransient when the
// stream ends early (a failing r ends it); ErrInvalid when r is not a
// send stream.
func (z ZFS) Receive(ctx context.Context, target string, r io.Reader, o ReceiveOptions) error {
	const op = "zfs receive"
	if !names.ValidDatasetName(target) && !names.ValidSnapshotName(target) {
		return invalidf(op, target, "invalid dataset name %q", target)
	}
	args := []string{"receive"}
	if o.Force {
		args = append(args, "-F")
	}
	if o.NoMount {
		args = append(args, "-u")
	}
	props, err := propArgs(op, target, "-o", o.Props)
	if err != nil {
		return err
	}
	args = append(append(args, props...), target)
	_, err = run(ctx, z.Runner, op, target, Cmd{Path: zfsPath, Args: args, StdinReader: r})
	return err
}

// Send writes the full send stream of snapshot (DATASET@SNAP) to w as zfs
// send produces it, with the dataset's properties (-p), its blocks as
// they are stored (-c: compressed ones stay compressed, so the stream is
// bounded by the space the dataset takes, which its quota bounds).
func (z ZFS) Send(ctx context.Context, snapshot string, w io.Writer) error {
	const op = "zfs send"
	if !names.ValidSnapshotName(snapshot) {
		return invalidf(op, snapshot, "invalid snapshot name %q", snapshot)
	}
	_, err := run(ctx, z.Runner, op, snapshot, Cmd{Path: zfsPath, Args: []string{"send", "-c", "-p", snapshot}, Stdout: w})
	return err
}

// SendIncremental writes the incremental stream from snapshot from (its
// full name, or @SNAP) to snapshot to, of one dataset, to w: only what
// changed in between, its blocks as they are stored (-c, as Send).
// Receive applies it to a dataset whose most recent snapshot is from;
// ErrWrongState when that is not so, or (without Force) when the dataset
// changed since.
func (z ZFS) SendIncremental(ctx context.Context, from, to string, w io.Writer) error {
	const op = "zfs send"
	if !names.ValidSnapshotName(to) {
		return invalidf(op, to, "invalid snapshot name %q", to)
	}
	if full := strings.HasPrefix(from, "@"); (full && !names.ValidSnapshotName(strings.SplitN(to, "@", 2)[0]+from)) || (!full && !names.ValidSnapshotName(from)) {
		return invalidf(op, to, "invalid incremental source %q", from)
	}
	_, err := run(ctx, z.Runner, op, to, Cmd{Path: zfsPath, Args: []string{"send", "-c", "-i", from, to}, Stdout: w})
	return err
}

// DefaultZvolDir is where illumos puts volumes' raw devices.
const DefaultZvolDir = "/dev/zvol/rdsk"

// ZvolDevice is the device path of volume vol (pool/…/name) in a device
// directory such as DefaultZvolDir.
func ZvolDevice(dir, vol string) string {
	return path.Join(dir, vol)
}
