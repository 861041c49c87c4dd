package sim

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// baseRefer is what an empty filesystem references (zfs shows 24K).
const baseRefer = 24576

// zfsProp describes one native property.
type zfsProp struct {
	name     string
	def      string // default value ("" = computed or none)
	inherit  bool
	readonly bool
	numeric  bool   // value is a byte count (or number)
	values   string // allowed values for index properties, "on | off"
	types    string // "fsv" letters: filesystem, snapshot, volume
	column   string // header in zfs list/get
}

var zfsProps = []zfsProp{
	{name: "type", readonly: true, types: "fsv", column: "TYPE"},
	{name: "creation", readonly: true, types: "fsv", column: "CREATION"},
	{name: "used", readonly: true, numeric: true, types: "fsv", column: "USED"},
	{name: "available", readonly: true, numeric: true, types: "fv", column: "AVAIL"},
	{name: "referenced", readonly: true, numeric: true, types: "fsv", column: "REFER"},
	{name: "compressratio", readonly: true, types: "fsv", column: "RATIO"},
	{name: "mounted", readonly: true, types: "f", column: "MOUNTED"},
	{name: "origin", readonly: true, types: "fv", column: "ORIGIN"},
	{name: "quota", numeric: true, types: "f", column: "QUOTA"},
	{name: "reservation", numeric: true, types: "fv", column: "RESERV"},
	{name: "refquota", numeric: true, types: "f", column: "REFQUOTA"},
	{name: "refreservation", numeric: true, types: "fv", column: "REFRESERV"},
	{name: "volsize", numeric: true, types: "v", column: "VOLSIZE"},
	{name: "volblocksize", def: "8192", numeric: true, types: "v", column: "VOLBLOCK"},
	{name: "recordsize", def: "131072", inherit: true, numeric: true, types: "f", column: "RECSIZE"},
	{name: "mountpoint", inherit: true, types: "f", column: "MOUNTPOINT"},
	{name: "sharenfs", def: "off", inherit: true, types: "f", column: "SHARENFS"},
	{name: "checksum", def: "on", inherit: true, values: "on | off | fletcher2 | fletcher4 | sha256 | sha512 | skein | edonr", types: "fv", column: "CHECKSUM"},
	{name: "compression", def: "off", inherit: true, values: "on | off | lzjb | gzip | gzip-[1-9] | zle | lz4", types: "fv", column: "COMPRESS"},
	{name: "atime", def: "on", inherit: true, values: "on | off", types: "f", column: "ATIME"},
	{name: "devices", def: "on", inherit: true, values: "on | off", types: "f", column: "DEVICES"},
	{name: "exec", def: "on", inherit: true, values: "on | off", types: "f", column: "EXEC"},
	{name: "setuid", def: "on", inherit: true, values: "on | off", types: "f", column: "SETUID"},
	{name: "readonly", def: "off", inherit: true, values: "on | off", types: "fv", column: "RDONLY"},
	{name: "zoned", def: "off", inherit: true, values: "on | off", types: "f", column: "ZONED"},
	{name: "snapdir", def: "hidden", inherit: true, values: "hidden | visible", types: "f", column: "SNAPDIR"},
	{name: "canmount", def: "on", values: "on | off | noauto", types: "f", column: "CANMOUNT"},
	{name: "xattr", def: "on", inherit: true, values: "on | off", types: "f", column: "XATTR"},
	{name: "copies", def: "1", inherit: true, values: "1 | 2 | 3", types: "fv", column: "COPIES"},
	{name: "version", def: "5", readonly: true, types: "f", column: "VERSION"},
	{name: "sync", def: "standard", inherit: true, values: "standard | always | disabled", types: "fv", column: "SYNC"},
	{name: "logbias", def: "latency", inherit: true, values: "latency | throughput", types: "fv", column: "LOGBIAS"},
	{name: "dedup", def: "off", inherit: true, values: "on | off | verify | sha256[,verify]", types: "fv", column: "DEDUP"},
	{name: "primarycache", def: "all", inherit: true, values: "all | none | metadata", types: "fv", column: "PRIMARYCACHE"},
	{name: "usedbysnapshots", readonly: true, numeric: true, types: "fv", column: "USEDSNAP"},
	{name: "usedbydataset", readonly: true, numeric: true, types: "fv", column: "USEDDS"},
	{name: "usedbychildren", readonly: true, numeric: true, types: "fv", column: "USEDCHILD"},
	{name: "usedbyrefreservation", readonly: true, numeric: true, types: "fv", column: "USEDREFRESERV"},
	{name: "written", readonly: true, numeric: true, types: "fsv", column: "WRITTEN"},
	{name: "logicalused", readonly: true, numeric: true, types: "fsv", column: "LUSED"},
	{name: "logicalreferenced", readonly: true, numeric: true, types: "fsv", column: "LREFER"},
	{name: "encryption", def: "off", readonly: true, types: "fv", column: "ENCRYPTION"},
	{name: "guid", readonly: true, types: "fsv", column: "GUID"},
	{name: "name", readonly: true, types: "fsv", column: "NAME"},
}

// zfsPropAliases are the short names zfs accepts.
var zfsPropAliases = map[string]string{
	"avail": "available", "refer": "referenced", "ratio": "compressratio",
	"reserv": "reservation", "refreserv": "refreservation", "compress": "compression",
	"recsize": "recordsize", "rdonly": "readonly", "volblock": "volblocksize",
	"usedsnap": "usedbysnapshots", "usedds": "usedbydataset", "usedchild": "usedbychildren",
	"usedrefreserv": "usedbyrefreservation", "lused": "logicalused", "lrefer": "logicalreferenced",
}

// lookupZfsProp resolves a property name; user properties (with ':') get a
// synthetic descriptor.
func lookupZfsProp(name string) (zfsProp, bool) {
	if full, ok := zfsPropAliases[name]; ok {
		name = full
	}
	for _, p := range zfsProps {
		if p.name == name {
			return p, true
		}
	}
	if isUserProp(name) {
		return zfsProp{name: name, inherit: true, types: "fsv", column: strings.ToUpper(name)}, true
	}
	return zfsProp{}, false
}

func isUserProp(name string) bool {
	i := strings.IndexByte(name, ':')
	return i > 0 && i < len(name)-1 && !strings.ContainsAny(name, " \t=")
}

func typeLetter(t string) string {
	switch t {
	case "snapshot":
		return "s"
	case "volume":
		return "v"
	}
	return "f"
}

func newDataset(name, typ string) *Dataset {
	return &Dataset{
		Name: name, Type: typ, Props: map[string]string{},
		Creation: time.Now().Unix(), Refer: baseRefer, GUID: newGUID(),
	}
}

func parentName(name string) string {
	if i := strings.IndexByte(name, '@'); i >= 0 {
		return name[:i]
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return ""
}

func poolOf(name string) string {
	n := name
	if i := strings.IndexAny(n, "/@"); i >= 0 {
		n = n[:i]
	}
	return n
}

// isDescendant reports whether d is below anc (children and snapshots,
// recursively).
func isDescendant(d, anc string) bool {
	return strings.HasPrefix(d, anc+"/") || strings.HasPrefix(d, anc+"@")
}

// children returns the direct filesystem/volume children of a dataset.
func (st *State) children(name string) []*Dataset {
	var out []*Dataset
	for _, d := range st.Datasets {
		if d.Type != "snapshot" && parentName(d.Name) == name {
			out = append(out, d)
		}
	}
	return out
}

// snapshotsOf returns the snapshots of a dataset.
func (st *State) snapshotsOf(name string) []*Dataset {
	var out []*Dataset
	for _, d := range st.Datasets {
		if d.Type == "snapshot" && strings.HasPrefix(d.Name, name+"@") {
			out = append(out, d)
		}
	}
	return out
}

// localOrInherited returns a property's value and source.
func (st *State) inherited(d *Dataset, prop string) (string, string) {
	if v, ok := d.Props[prop]; ok {
		return v, "local"
	}
	for p := parentName(d.Name); p != ""; p = parentName(p) {
		pd := st.dataset(p)
		if pd == nil {
			break
		}
		if v, ok := pd.Props[prop]; ok {
			return v, "inherited from " + p
		}
	}
	return "", "default"
}

// mountpoint returns a filesystem's mountpoint and its source.
func (st *State) mountpoint(d *Dataset) (string, string) {
	if d.Type == "snapshot" {
		return "", "-"
	}
	if v, ok := d.Props["mountpoint"]; ok {
		return v, "local"
	}
	suffix := ""
	for n := d.Name; ; {
		p := parentName(n)
		suffix = n[len(p):] + suffix
		if p == "" {
			return "/" + strings.TrimPrefix(suffix, "/"), "default"
		}
		pd := st.dataset(p)
		if pd == nil {
			return "/" + d.Name, "default"
		}
		if v, ok := pd.Props["mountpoint"]; ok {
			if v == "none" || v == "legacy" {
				return v, "inherited from " + p
			}
			return strings.TrimSuffix(v, "/") + suffix, "inherited from " + p
		}
		n = p
	}
}

// isMounted reports whether a filesystem is mounted in the simulation.
func (st *State) isMounted(d *Dataset) bool {
	if d.Type != "filesystem" || d.Unmounted || d.Props["canmount"] == "off" {
		return false
	}
	mp, _ := st.mountpoint(d)
	return strings.HasPrefix(mp, "/")
}

// datasetMountedAt returns the mounted filesystem whose mountpoint is p.
func datasetMountedAt(st *State, p string) *Dataset {
	p = filepath.Clean(p)
	for _, d := range st.Datasets {
		if d.Type != "filesystem" || !st.isMounted(d) {
			continue
		}
		if mp, _ := st.mountpoint(d); mp == p {
			return d
		}
	}
	return nil
}

func propBytes(d *Dataset, prop string) uint64 {
	v, ok := d.Props[prop]
	if !ok || v == "none" {
		return 0
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// usedSelf is the space the dataset itself charges: its data or its
// refreservation, whichever is larger.
func usedSelf(d *Dataset) uint64 {
	return max(d.Refer, propBytes(d, "refreservation"))
}

// used is usedbydataset + usedbychildren (+ refreservation). It indexes
// the datasets by parent once a call: looking each one's children up by
// a scan made a listing's cost grow with the square of the datasets (a
// zfs list of 100 zones' datasets took 50-90 ms of CPU).
func (st *State) used(d *Dataset) uint64 {
	kids := map[string][]*Dataset{}
	for _, c := range st.Datasets {
		if c.Type != "snapshot" {
			p := parentName(c.Name)
			kids[p] = append(kids[p], c)
		}
	}
	var used func(d *Dataset) uint64
	used = func(d *Dataset) uint64 {
		if d.Type == "snapshot" {
			return 0
		}
		u := usedSelf(d)
		for _, c := range kids[d.Name] {
			// What a child costs its parent: its used space or its
			// reservation, whichever is larger.
			u += max(used(c), propBytes(c, "reservation"))
		}
		return u
	}
	return used(d)
}

// available applies the pool's free space (less the 1/32 slop ZFS keeps),
// the dataset's own unused reservation, and every quota above it.
func (st *State) available(h *host, d *Dataset) uint64 {
	if d.Type == "snapshot" {
		return 0
	}
	root := st.dataset(poolOf(d.Name))
	size := h.facts.poolSize(poolOf(d.Name))
	slop := size / 32
	var free uint64
	if root != nil && size > slop+st.used(root) {
		free = size - slop - st.used(root)
	}
	if r := propBytes(d, "reservation"); r > st.used(d) {
		free += r - st.used(d)
	}
	for n := d.Name; n != ""; n = parentName(n) {
		a := st.dataset(n)
		if a == nil {
			continue
		}
		if q := propBytes(a, "quota"); q > 0 {
			u := st.used(a)
			if u >= q {
				return 0
			}
			free = min(free, q-u)
		}
	}
	if d.Type == "filesystem" {
		if q := propBytes(d, "refquota"); q > 0 {
			if d.Refer >= q {
				return 0
			}
			free = min(free, q-d.Refer)
		}
	}
	return free
}

// propValue returns a property's raw value ("-" when it does not apply)
// and its source.
func (st *State) propValue(h *host, d *Dataset, name string) (string, string) {
	p, ok := lookupZfsProp(name)
	if !ok {
		return "-", "-"
	}
	if !strings.Contains(p.types, typeLetter(d.Type)) {
		return "-", "-"
	}
	num := func(n uint64) string { return strconv.FormatUint(n, 10) }
	switch p.name {
	case "name":
		return d.Name, "-"
	case "type":
		return d.Type, "-"
	case "creation":
		return strconv.FormatInt(d.Creation, 10), "-"
	case "used":
		if real, ok := h.storageUsed(st, d); ok {
			return num(st.used(d) - d.Refer + max(d.Refer, real)), "-"
		}
		return num(st.used(d)), "-"
	case "available":
		avail := st.available(h, d)
		if real, ok := h.storageUsed(st, d); ok && real > d.Refer {
			avail -= min(avail, real-d.Refer)
		}
		return num(avail), "-"
	case "referenced", "logicalreferenced", "written":
		if real, ok := h.storageUsed(st, d); ok {
			return num(max(d.Refer, real)), "-"
		}
		return num(d.Refer), "-"
	case "logicalused":
		return num(st.used(d)), "-"
	case "usedbydataset":
		return num(d.Refer), "-"
	case "usedbychildren":
		return num(st.used(d) - usedSelf(d)), "-"
	case "usedbysnapshots":
		return "0", "-"
	case "usedbyrefreservation":
		return num(usedSelf(d) - d.Refer), "-"
	case "compressratio":
		return "1.00x", "-"
	case "mounted":
		if st.isMounted(d) {
			return "yes", "-"
		}
		return "no", "-"
	case "origin":
		if d.Origin == "" {
			return "-", "-"
		}
		return d.Origin, "-"
	case "guid":
		return strconv.FormatUint(d.GUID, 10), "-"
	case "volsize":
		return num(d.VolSize), "local"
	case "mountpoint":
		return st.mountpoint(d)
	case "quota", "reservation", "refquota", "refreservation":
		if v, ok := d.Props[p.name]; ok {
			return v, "local"
		}
		return "0", "default"
	case "version":
		return p.def, "-"
	}
	if p.inherit {
		v, src := st.inherited(d, p.name)
		if v == "" {
			if isUserProp(p.name) {
				return "-", "-"
			}
			return p.def, "default"
		}
		return v, src
	}
	if v, ok := d.Props[p.name]; ok {
		return v, "local"
	}
	return p.def, "default"
}

// displayValue renders a raw value for human output (-p not given).
func displayValue(prop string, raw string) string {
	p, ok := lookupZfsProp(prop)
	if !ok || raw == "-" {
		return raw
	}
	switch p.name {
	case "creation":
		n, _ := strconv.ParseInt(raw, 10, 64)
		return time.Unix(n, 0).Format("Mon Jan _2 15:04 2006")
	case "quota", "reservation", "refquota", "refreservation":
		if raw == "0" {
			return "none"
		}
	}
	if p.numeric {
		n, err := strconv.ParseUint(raw, 10, 64)
		if err == nil {
			return nicenum(n)
		}
	}
	return raw
}

// nicenum is zfs's human size: at most 5 characters, 1024-based.
func nicenum(n uint64) string {
	const units = "BKMGTPE"
	idx := 0
	for v := n; v >= 1024 && idx < len(units)-1; v /= 1024 {
		idx++
	}
	if idx == 0 {
		return strconv.FormatUint(n, 10)
	}
	div := math.Pow(1024, float64(idx))
	u := units[idx]
	if n%uint64(div) == 0 {
		return fmt.Sprintf("%d%c", n/uint64(div), u)
	}
	f := float64(n) / div
	for prec := 2; prec >= 0; prec-- {
		s := fmt.Sprintf("%.*f%c", prec, f, u)
		if len(s) <= 5 {
			return s
		}
	}
	return fmt.Sprintf("%.0f%c", f, u)
}

// parseZfsSize parses "1G", "1.5T", "512", "10M" (1024-based).
func parseZfsSize(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	str := strings.ToUpper(s)
	str = strings.TrimSuffix(str, "B")
	if str == "" {
		return 0, false
	}
	mult := 1.0
	switch str[len(str)-1] {
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	case 'T':
		mult = 1 << 40
	case 'P':
		mult = 1 << 50
	case 'E':
		mult = 1 << 60
	}
	if mult != 1 {
		str = str[:len(str)-1]
	}
	if str == "" || strings.ContainsAny(str, "EXN+-") {
		return 0, false
	}
	f, err := strconv.ParseFloat(str, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return uint64(f * mult), true
}

// validatePropValue checks a value for zfs set/create and normalises
// numeric values to bytes. It returns the zfs reason text on failure.
func validatePropValue(p zfsProp, v string) (string, string) {
	if isUserProp(p.name) {
		return v, ""
	}
	if p.readonly {
		return "", fmt.Sprintf("'%s' is readonly", p.name)
	}
	switch p.name {
	case "mountpoint":
		if v != "none" && v != "legacy" && !strings.HasPrefix(v, "/") {
			return "", fmt.Sprintf("'%s' must be an absolute path, 'none', or 'legacy'", p.name)
		}
		return filepath.Clean(v), ""
	case "sharenfs":
		return v, ""
	}
	if p.numeric {
		if v == "none" && (p.name == "quota" || p.name == "reservation" || p.name == "refquota" || p.name == "refreservation") {
			return "none", ""
		}
		n, ok := parseZfsSize(v)
		if !ok {
			return "", fmt.Sprintf("bad numeric value '%s'", v)
		}
		return strconv.FormatUint(n, 10), ""
	}
	if p.values != "" {
		for _, alt := range strings.Split(p.values, " | ") {
			if alt == v || (strings.Contains(alt, "[") && strings.HasPrefix(v, strings.SplitN(alt, "[", 2)[0])) {
				return v, ""
			}
		}
		return "", fmt.Sprintf("'%s' must be one of '%s'", p.name, p.values)
	}
	return v, ""
}

// sortDatasets orders datasets as zfs list does without -s: by name of the
// filesystem part, a dataset before its snapshots, snapshots by creation.
func sortDatasets(ds []*Dataset) {
	sort.SliceStable(ds, func(i, j int) bool {
		ai, as, _ := strings.Cut(ds[i].Name, "@")
		bi, bs, _ := strings.Cut(ds[j].Name, "@")
		if ai != bi {
			return ai < bi
		}
		if (as == "") != (bs == "") {
			return as == ""
		}
		if ds[i].Creation != ds[j].Creation {
			return ds[i].Creation < ds[j].Creation
		}
		return as < bs
	})
}

// heldDatasets returns the datasets in use by zones in the kernel: the
// zonepath dataset, delegated datasets and zvol devices, with their
// descendant filesystems and volumes. Not their snapshots: ZFS destroys
// or renames a snapshot of a mounted filesystem or an open volume (only
// a zfs hold, which the simulation has not, makes one busy).
func heldDatasets(st *State) map[string]string {
	held := map[string]string{}
	for _, z := range st.zones() {
		if z.Name == "global" || !inKernel(z.State) {
			continue
		}
		var roots []string
		if d := datasetMountedAt(st, z.Config.Zonepath); d != nil {
			roots = append(roots, d.Name)
		}
		for _, r := range z.Config.resources("dataset") {
			roots = append(roots, r.Props["name"])
		}
		for _, r := range z.Config.resources("device") {
			m := r.Props["match"]
			for _, pfx := range []string{"/dev/zvol/rdsk/", "/dev/zvol/dsk/"} {
				if strings.HasPrefix(m, pfx) {
					roots = append(roots, strings.TrimPrefix(m, pfx))
				}
			}
		}
		for _, r := range roots {
			for _, d := range st.Datasets {
				if d.Type != "snapshot" && (d.Name == r || isDescendant(d.Name, r)) {
					held[d.Name] = z.Name
				}
			}
		}
	}
	return held
}
