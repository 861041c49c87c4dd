package illumos

import (
	"context"
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos/names"
)

const zonecfgPath = "/usr/sbin/zonecfg"

// ZoneConfig is the configuration zonewright gives a zone. RenderZoneConfig
// turns it into a zonecfg command file; ParseZonecfgInfo reads it back.
type ZoneConfig struct {
	Name     string // given to zonecfg -z; must pass names.ValidZoneName
	Brand    string // sparse, lx, bhyve, ipkg...; empty leaves the template's
	Zonepath string // absolute, not "/"
	Autoboot bool   // zonewright boots zones itself: normally false
	IPType   IPType // empty means exclusive
	// LimitPriv is the zone's privilege limit, e.g. "default,sys_dl_config";
	// empty leaves the default.
	LimitPriv string

	FS      []FS
	Nets    []Net
	Devices []string // device match patterns, e.g. /dev/zvol/rdsk/rpool/vm0
	CPUCap  float64  // capped-cpu ncpus (1.5 = one and a half CPUs); 0 = none
	Memory  *CappedMemory
	// MaxProcesses and MaxLWPs are the aliased rctls zone.max-processes
	// and zone.max-lwps (set max-processes=N: privileged, deny); 0 =
	// none. zonecfg refuses values below 100.
	MaxProcesses, MaxLWPs uint64
	Attrs                 []Attr
	Datasets              []string // datasets delegated to the zone
	Rctls                 []Rctl
	Bhyve                 *BhyveConfig // bhyve brand settings, stored as attrs
}

// Net is an exclusive-IP network resource.
type Net struct {
	Physical       string // the VNIC; must pass names.ValidLinkName
	AllowedAddress string // "10.0.0.5/24": the only address the zone may use
	Defrouter      string // "10.0.0.1": needs AllowedAddress
}

// FS is a file system mounted into the zone.
type FS struct {
	Dir     string // mount point inside the zone (absolute)
	Special string // what to mount (a global-zone path for lofs)
	Type    string // lofs, zfs, tmpfs...
	Options []string
}

// CappedMemory limits a zone's memory; sizes in bytes, 0 = no limit.
// zonecfg reads values back in rounded units, so use multiples of a unit
// (e.g. whole MiB) to read back exactly what was set.
type CappedMemory struct {
	Physical uint64
	Swap     uint64
	Locked   uint64
}

// Attr is a generic zone attribute.
type Attr struct {
	Name  string // alphanumeric first, then alphanumerics, '-', '.'
	Type  string // int, uint, boolean, string
	Value string
}

// Rctl is a zone resource control with one value.
type Rctl struct {
	Name   string // e.g. zone.max-lwps
	Priv   string // basic, privileged, system
	Limit  uint64
	Action string // none, deny
}

// BhyveConfig holds the attrs the bhyve brand reads (OmniOS bhyve.7).
type BhyveConfig struct {
	VCPUs    int    // attr vcpus; 0 leaves the brand default (1)
	RAM      uint64 // attr ram, bytes; 0 leaves the brand default (1G)
	BootDisk string // attr bootdisk: the zvol dataset, e.g. rpool/vm0
	Bootrom  string // attr bootrom, e.g. BHYVE_RELEASE; empty = default
}

// Zonecfg configures zones on a host.
type Zonecfg struct{ Runner Executor }

// Create configures a new zone from cfg (`zonecfg -z NAME -f -`, the file
// on stdin, beginning with `create -b`). ErrAlreadyExists when a zone of
// that name is configured or installed.
func (z Zonecfg) Create(ctx context.Context, cfg ZoneConfig) error {
	return z.apply(ctx, "zonecfg create", cfg, false)
}

// Replace configures cfg over an existing zone in the configured state
// (`create -F -b`), or creates it. An installed zone cannot be
// reconfigured this way (ErrAlreadyExists).
func (z Zonecfg) Replace(ctx context.Context, cfg ZoneConfig) error {
	return z.apply(ctx, "zonecfg replace", cfg, true)
}

func (z Zonecfg) apply(ctx context.Context, op string, cfg ZoneConfig, overwrite bool) error {
	file, err := renderZoneConfig(cfg, overwrite)
	if err != nil {
		return &Error{Op: op, Subject: cfg.Name, Kind: KindInvalid, Err: err}
	}
	_, err = run(ctx, z.Runner, op, cfg.Name, Cmd{
		Path:  zonecfgPath,
		Args:  []string{"-z", cfg.Name, "-f", "-"},
		Stdin: []byte(file),
	})
	return err
}

// Delete removes a zone's configuration (`delete -F`). The zone must be
// configured or installed (not ready or running: ErrWrongState);
// ErrNotFound when there is no such zone.
func (z Zonecfg) Delete(ctx context.Context, name string) error {
	const op = "zonecfg delete"
	if err := checkZoneName(op, name); err != nil {
		return err
	}
	_, err := run(ctx, z.Runner, op, name, Cmd{Path: zonecfgPath, Args: []string{"-z", name, "delete", "-F"}})
	return err
}

// Info reads a zone's configuration back (`zonecfg -z NAME info`).
func (z Zonecfg) Info(ctx context.Context, name string) (ZoneInfo, error) {
	const op = "zonecfg info"
	if err := checkZoneName(op, name); err != nil {
		return ZoneInfo{}, err
	}
	res, err := run(ctx, z.Runner, op, name, Cmd{Path: zonecfgPath, Args: []string{"-z", name, "info"}})
	if err != nil {
		return ZoneInfo{}, err
	}
	info, err := ParseZonecfgInfo(string(res.Stdout))
	if err != nil {
		return ZoneInfo{}, parseError(op, name, err)
	}
	if info.Config.Name == "" {
		info.Config.Name = name
	}
	return info, nil
}

// Export returns the zone's configuration as a zonecfg command file.
func (z Zonecfg) Export(ctx context.Context, name string) (string, error) {
	const op = "zonecfg export"
	if err := checkZoneName(op, name); err != nil {
		return "", err
	}
	res, err := run(ctx, z.Runner, op, name, Cmd{Path: zonecfgPath, Args: []string{"-z", name, "export"}})
	if err != nil {
		return "", err
	}
	return string(res.Stdout), nil
}

// RenderZoneConfig renders cfg as the zonecfg command file Create applies.
// Every value is checked and quoted for zonecfg's lexer (spec 4.2), so no
// value can end a command or start another; values zonecfg cannot carry at
// all (a double quote, a newline, other control characters) are refused.
func RenderZoneConfig(cfg ZoneConfig) (string, error) {
	return renderZoneConfig(cfg, false)
}

// zcKeywords are the words zonecfg's lexer returns as keywords, not as
// values, in the token state (illumos zonecfg_lex.l); a value spelled like
// one must be quoted.
var zcKeywords = wordSet(`net fs inherit-pkg-dir device rctl attr admin
	security-flags zonename dataset dedicated-cpu capped-cpu capped-memory
	zonepath brand autoboot ip-type pool limitpriv bootargs type value
	options allowed-address address physical defrouter mac-addr vlan-id
	global-nic property dir special raw name match priv limit action ncpus
	locked swap importance cpu-shares max-lwps max-processes max-shm-memory
	max-shm-ids max-msg-ids max-sem-ids scheduling-class hostid user auths
	fs-allowed default lower upper zfs-io-priority uuid`)

func wordSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// zcQuote renders v as one zonecfg value token. inList is for items of a
// [a,b] list, where ',' separates items.
func zcQuote(v string, inList bool) (string, error) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '"' {
			return "", fmt.Errorf("value %q contains a double quote, which zonecfg cannot quote", v)
		}
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return "", fmt.Errorf("value %q contains a control character", v)
		}
	}
	if v != "" && !zcKeywords[v] && v[0] != '-' {
		plain := true
		for i := 0; i < len(v) && plain; i++ {
			c := v[i]
			plain = isAlnum(c) || strings.IndexByte("_./:@%+-", c) >= 0 || (c == ',' && !inList)
		}
		if plain {
			return v, nil
		}
	}
	return `"` + v + `"`, nil
}

// zcWriter accumulates the command file, keeping the first error.
type zcWriter struct {
	b   strings.Builder
	err error
}

func (w *zcWriter) line(s string) { w.b.WriteString(s + "\n") }

func (w *zcWriter) set(prop, value string) {
	q, err := zcQuote(value, false)
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("%s: %w", prop, err)
	}
	w.line("set " + prop + "=" + q)
}

func (w *zcWriter) setList(prop string, values []string) {
	items := make([]string, len(values))
	for i, v := range values {
		q, err := zcQuote(v, true)
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("%s: %w", prop, err)
		}
		items[i] = q
	}
	w.line("set " + prop + "=[" + strings.Join(items, ",") + "]")
}

func renderZoneConfig(cfg ZoneConfig, overwrite bool) (string, error) {
	if err := cfg.validate(); err != nil {
		return "", err
	}
	w := &zcWriter{}
	w.globals(cfg, overwrite)
	w.filesystems(cfg.FS)
	w.nets(cfg.Nets)
	for _, d := range cfg.Devices {
		w.line("add device")
		w.set("match", d)
		w.line("end")
	}
	w.caps(cfg)
	for _, a := range cfg.allAttrs() {
		w.line("add attr")
		w.set("name", a.Name)
		w.set("type", a.Type)
		w.set("value", a.Value)
		w.line("end")
	}
	for _, d := range cfg.Datasets {
		w.line("add dataset")
		w.set("name", d)
		w.line("end")
	}
	for _, r := range cfg.Rctls {
		w.line("add rctl")
		w.set("name", r.Name)
		w.line(fmt.Sprintf("add value (priv=%s,limit=%d,action=%s)", r.Priv, r.Limit, r.Action))
		w.line("end")
	}
	if w.err != nil {
		return "", w.err
	}
	return w.b.String(), nil
}

// globals writes the create line and the zone's global properties.
func (w *zcWriter) globals(cfg ZoneConfig, overwrite bool) {
	if overwrite {
		w.line("create -F -b")
	} else {
		w.line("create -b")
	}
	w.set("zonepath", cfg.Zonepath)
	if cfg.Brand != "" {
		w.set("brand", cfg.Brand)
	}
	w.set("autoboot", strconv.FormatBool(cfg.Autoboot))
	if cfg.LimitPriv != "" {
		w.set("limitpriv", cfg.LimitPriv)
	}
	w.set("ip-type", string(cfg.ipType()))
	if cfg.MaxLWPs != 0 {
		w.set("max-lwps", strconv.FormatUint(cfg.MaxLWPs, 10))
	}
	if cfg.MaxProcesses != 0 {
		w.set("max-processes", strconv.FormatUint(cfg.MaxProcesses, 10))
	}
}

func (w *zcWriter) filesystems(fss []FS) {
	for _, fs := range fss {
		w.line("add fs")
		w.set("dir", fs.Dir)
		w.set("special", fs.Special)
		w.set("type", fs.Type)
		if len(fs.Options) > 0 {
			w.setList("options", fs.Options)
		}
		w.line("end")
	}
}

func (w *zcWriter) nets(nets []Net) {
	for _, n := range nets {
		w.line("add net")
		w.set("physical", n.Physical)
		if n.AllowedAddress != "" {
			w.set("allowed-address", n.AllowedAddress)
		}
		if n.Defrouter != "" {
			w.set("defrouter", n.Defrouter)
		}
		w.line("end")
	}
}

// caps writes the CPU and memory caps that are set.
func (w *zcWriter) caps(cfg ZoneConfig) {
	if cfg.CPUCap > 0 {
		w.line("add capped-cpu")
		w.set("ncpus", strconv.FormatFloat(cfg.CPUCap, 'f', -1, 64))
		w.line("end")
	}
	if m := cfg.Memory; m != nil && (m.Physical != 0 || m.Swap != 0 || m.Locked != 0) {
		w.line("add capped-memory")
		if m.Physical != 0 {
			w.set("physical", FormatSize(m.Physical))
		}
		if m.Swap != 0 {
			w.set("swap", FormatSize(m.Swap))
		}
		if m.Locked != 0 {
			w.set("locked", FormatSize(m.Locked))
		}
		w.line("end")
	}
}

func (cfg ZoneConfig) ipType() IPType {
	if cfg.IPType == "" {
		return IPExclusive
	}
	return cfg.IPType
}

// allAttrs is Attrs followed by the attrs of Bhyve.
func (cfg ZoneConfig) allAttrs() []Attr {
	attrs := append([]Attr(nil), cfg.Attrs...)
	if b := cfg.Bhyve; b != nil {
		if b.VCPUs > 0 {
			attrs = append(attrs, Attr{Name: "vcpus", Type: "string", Value: strconv.Itoa(b.VCPUs)})
		}
		if b.RAM > 0 {
			attrs = append(attrs, Attr{Name: "ram", Type: "string", Value: FormatSize(b.RAM)})
		}
		if b.BootDisk != "" {
			attrs = append(attrs, Attr{Name: "bootdisk", Type: "string", Value: b.BootDisk})
		}
		if b.Bootrom != "" {
			attrs = append(attrs, Attr{Name: "bootrom", Type: "string", Value: b.Bootrom})
		}
	}
	return attrs
}

// validate checks what zonecfg would refuse (or misread) before running it,
// so that a bad request fails as KindInvalid with a clear message.
func (cfg ZoneConfig) validate() error {
	if !names.ValidZoneName(cfg.Name) {
		return fmt.Errorf("invalid zone name %q", cfg.Name)
	}
	if !path.IsAbs(cfg.Zonepath) || path.Clean(cfg.Zonepath) == "/" {
		return fmt.Errorf("zonepath %q must be an absolute path other than /", cfg.Zonepath)
	}
	if cfg.Brand != "" && !isWord(cfg.Brand) {
		return fmt.Errorf("invalid brand %q", cfg.Brand)
	}
	switch cfg.ipType() {
	case IPExclusive, IPShared:
	default:
		return fmt.Errorf("ip-type %q must be exclusive or shared", cfg.IPType)
	}
	if err := cfg.validateFS(); err != nil {
		return err
	}
	if err := cfg.validateNets(); err != nil {
		return err
	}
	if cfg.CPUCap < 0 {
		return fmt.Errorf("capped-cpu ncpus %v must be positive", cfg.CPUCap)
	}
	if err := cfg.validateAttrs(); err != nil {
		return err
	}
	for _, d := range cfg.Devices {
		if d == "" {
			return fmt.Errorf("empty device match")
		}
	}
	for _, d := range cfg.Datasets {
		if !names.ValidDatasetName(d) {
			return fmt.Errorf("invalid dataset name %q", d)
		}
	}
	if err := cfg.validateSizes(); err != nil {
		return err
	}
	return cfg.validateRctls()
}

func (cfg ZoneConfig) validateFS() error {
	for _, fs := range cfg.FS {
		if !path.IsAbs(fs.Dir) {
			return fmt.Errorf("fs dir %q must be absolute", fs.Dir)
		}
		if fs.Special == "" || fs.Type == "" {
			return fmt.Errorf("fs %s: special and type are required", fs.Dir)
		}
		for _, o := range fs.Options {
			// mount splits options at commas, and zonecfg info prints the
			// list without quoting them: a comma inside one option would
			// become two.
			if o == "" || strings.Contains(o, ",") {
				return fmt.Errorf("fs %s: mount option %q is empty or contains a comma", fs.Dir, o)
			}
		}
	}
	return nil
}

func (cfg ZoneConfig) validateNets() error {
	for _, n := range cfg.Nets {
		if !names.ValidLinkName(n.Physical) {
			return fmt.Errorf("net physical %q is not a valid link name", n.Physical)
		}
		if n.AllowedAddress != "" {
			if _, err := netip.ParsePrefix(n.AllowedAddress); err != nil {
				if _, err := netip.ParseAddr(n.AllowedAddress); err != nil {
					return fmt.Errorf("net %s: allowed-address %q is not an address", n.Physical, n.AllowedAddress)
				}
			}
		}
		if n.Defrouter != "" {
			if _, err := netip.ParseAddr(n.Defrouter); err != nil {
				return fmt.Errorf("net %s: defrouter %q is not an address", n.Physical, n.Defrouter)
			}
			if n.AllowedAddress == "" && cfg.ipType() == IPExclusive {
				return fmt.Errorf("net %s: defrouter needs allowed-address", n.Physical)
			}
		}
	}
	return nil
}

func (cfg ZoneConfig) validateAttrs() error {
	seen := map[string]bool{}
	for _, a := range cfg.allAttrs() {
		if !validAttrName(a.Name) {
			return fmt.Errorf("invalid attr name %q", a.Name)
		}
		if seen[a.Name] {
			return fmt.Errorf("attr %q given twice", a.Name)
		}
		seen[a.Name] = true
		if a.Value == "" {
			return fmt.Errorf("attr %s: zonecfg needs a value", a.Name)
		}
		switch a.Type {
		case "int", "uint", "boolean", "string":
		default:
			return fmt.Errorf("attr %s: type %q must be int, uint, boolean or string", a.Name, a.Type)
		}
	}
	return nil
}

// validateSizes checks the memory caps and the bhyve guest's size, which
// zonecfg takes in whole units only.
func (cfg ZoneConfig) validateSizes() error {
	if m := cfg.Memory; m != nil {
		// Whole KiB always render with a unit suffix, which zonecfg wants.
		for _, v := range []uint64{m.Physical, m.Swap, m.Locked} {
			if v%(1<<10) != 0 {
				return fmt.Errorf("capped-memory %d is not a whole number of KiB", v)
			}
		}
	}
	if b := cfg.Bhyve; b != nil {
		if b.BootDisk != "" && !names.ValidDatasetName(b.BootDisk) {
			return fmt.Errorf("bhyve bootdisk %q is not a dataset name", b.BootDisk)
		}
		if b.RAM%(1<<20) != 0 || b.VCPUs < 0 {
			return fmt.Errorf("bhyve ram %d must be whole MiB and vcpus %d not negative", b.RAM, b.VCPUs)
		}
	}
	return nil
}

func (cfg ZoneConfig) validateRctls() error {
	for _, r := range cfg.Rctls {
		if !strings.HasPrefix(r.Name, "zone.") || !isWord(r.Name) {
			return fmt.Errorf("invalid rctl name %q", r.Name)
		}
		switch r.Priv {
		case "basic", "privileged", "system":
		default:
			return fmt.Errorf("rctl %s: priv %q must be basic, privileged or system", r.Name, r.Priv)
		}
		switch r.Action {
		case "none", "deny":
		default:
			return fmt.Errorf("rctl %s: action %q must be none or deny", r.Name, r.Action)
		}
	}
	return nil
}

// isWord: letters, digits, '-', '_', '.', starting with a letter.
func isWord(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func validAttrName(s string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// FormatSize renders bytes in the largest of T, G, M, K that divides them
// exactly ("1G", "1536M"), or as a plain number.
func FormatSize(b uint64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}} {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatUint(b>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatUint(b, 10)
}

// ParseSize parses a zonecfg or bhyve size: a number with an optional
// fraction and an optional K, M, G or T suffix (either case, with or
// without a trailing B). A plain number is bytes.
func ParseSize(s string) (uint64, error) {
	return parseSizeDefault(s, 0)
}

// parseSizeDefault parses a size whose plain numbers are in units of
// 1<<shift bytes.
func parseSizeDefault(s string, shift uint) (uint64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "b")
	if t == "" {
		return 0, fmt.Errorf("bad size %q", s)
	}
	switch t[len(t)-1] {
	case 'k', 'K':
		shift, t = 10, t[:len(t)-1]
	case 'm', 'M':
		shift, t = 20, t[:len(t)-1]
	case 'g', 'G':
		shift, t = 30, t[:len(t)-1]
	case 't', 'T':
		shift, t = 40, t[:len(t)-1]
	}
	if n, err := strconv.ParseUint(t, 10, 64); err == nil {
		if n > (^uint64(0))>>shift {
			return 0, fmt.Errorf("size %q too large", s)
		}
		return n << shift, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || strings.ContainsAny(t, "eEnNiIxXpP") {
		return 0, fmt.Errorf("bad size %q", s)
	}
	v := f * float64(uint64(1)<<shift)
	if v >= 1<<63 {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return uint64(v + 0.5), nil
}
