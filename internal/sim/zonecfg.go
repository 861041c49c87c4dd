package sim

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// zonecfg: argv joining, ';' splitting, -f FILE and -f -, auto-commit at
// the end of input, and the first failing command stops the input with
// exit 1 (spec §4). The whole session runs under the host lock: it is pure
// computation on the state, so the hold time is tiny, and it makes the
// session atomic against concurrent zonecfg and zoneadm calls.

type zcMode int

const (
	zcOneShot   zcMode = iota // commands from argv
	zcFile                    // -f FILE
	zcStdinFile               // -f -
	zcStdin                   // no commands: read stdin (not a terminal)
)

type zcSession struct {
	inv   *invocation
	st    *State
	zone  string
	mode  zcMode
	file  string
	cfg   *ZoneConfig // working copy; nil when there is no handle yet
	dirty bool        // need_to_commit
	// renameTo is a pending "set zonename".
	renameTo string

	scope   string // "" for global scope, else the resource type
	res     *zcRes
	resOp   string    // "add" or "select"
	resOrig *Resource // the selected resource, for select
	rctlSel *Rctl     // the selected rctl, for select

	line        int
	lastErrLine int
	sawError    bool
	stop        bool // stop reading input (error or exit)
	abort       bool // exit(1) at once, skipping the auto-commit
	changed     bool // the state must be saved
}

// zcRes is a resource being edited in resource scope.
type zcRes struct {
	rt      string
	props   map[string]string
	options []string
	values  []RctlValue
}

const zcUsage = `usage:	zonecfg -z <zone> (interactive)
	zonecfg -z <zone> [-f <command-file> | <command>]
	zonecfg help
`

func runZonecfg(inv *invocation) int {
	if len(inv.args) == 0 {
		fmt.Fprint(inv.stderr, zcUsage)
		return 2
	}
	if inv.args[0] == "help" {
		fmt.Fprint(inv.stdout, zcHelp)
		return 0
	}
	var zone, file string
	haveFile := false
	i := 0
	for ; i < len(inv.args); i++ {
		a := inv.args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		opt := a[1]
		val := a[2:]
		switch opt {
		case 'z', 'f', 'R':
			if val == "" {
				if i+1 >= len(inv.args) {
					fmt.Fprint(inv.stderr, zcUsage)
					return 2
				}
				i++
				val = inv.args[i]
			}
		default:
			fmt.Fprint(inv.stderr, zcUsage)
			return 2
		}
		switch opt {
		case 'z':
			if val != "global" && !validZoneName(val) {
				inv.errf("%s: Bogus zone name", val)
				inv.errf("Zone names must begin with an alphanumeric character and may contain\n" +
					"alphanumeric characters plus '-', '_', and '.'; \"global\" and names\n" +
					"beginning with \"SUNW\" are reserved.")
				return 2
			}
			zone = val
		case 'f':
			file, haveFile = val, true
		case 'R':
			// An alternate root is accepted and ignored: the host root is the
			// simulator's state directory.
		}
	}
	if zone == "" {
		fmt.Fprint(inv.stderr, zcUsage)
		return 2
	}
	s := &zcSession{inv: inv, zone: zone}
	var input string
	switch {
	case i < len(inv.args):
		s.mode = zcOneShot
		input = strings.Join(inv.args[i:], " ") + "\n"
	case haveFile && file == "-":
		s.mode = zcStdinFile
		b, err := io.ReadAll(inv.stdin)
		if err != nil {
			inv.errf("could not read standard input: %v", err)
			return 1
		}
		input = string(b)
	case haveFile:
		s.mode, s.file = zcFile, file
		b, err := readRegularFile(file)
		if err != nil {
			inv.errf("%v", err)
			return 1
		}
		input = string(b)
	default:
		s.mode = zcStdin
		b, err := io.ReadAll(inv.stdin)
		if err != nil {
			inv.errf("could not read standard input: %v", err)
			return 1
		}
		input = string(b)
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		s.st = st
		code = s.run(input)
		return s.changed
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

func readRegularFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("could not open file %s: %s", path, strerror(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file.", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("could not open file %s: %s", path, strerror(err))
	}
	return b, nil
}

// run executes the input and returns the exit status.
func (s *zcSession) run(input string) int {
	if s.mode == zcStdin && s.st.zone(s.zone) == nil && s.zone != "global" {
		// Interactive-style start on a new zone prints a hint, as zonecfg's
		// initialize() does before reading the first command.
		s.inv.errf("%s: No such zone configured", s.zone)
		s.inv.errf("Use 'create' to begin configuring a new zone.")
	}
	for _, l := range lexZonecfg(input) {
		s.exec(l)
		if s.abort {
			return 1
		}
		if s.stop {
			break
		}
	}
	return s.cleanup()
}

// cleanup mirrors zonecfg's: a resource left open is an error; pending
// changes are committed (even after an error, as zonecfg's cleanup path
// does); the status is 1 if anything failed or stayed unsaved.
func (s *zcSession) cleanup() int {
	if s.scope != "" {
		if !s.sawError {
			s.zerr("Resource incomplete.")
			return 1
		}
		s.scope, s.res = "", nil
	}
	if s.dirty && s.cfg != nil {
		s.commit()
		if s.dirty {
			s.zerr("Configuration not saved.")
			return 1
		}
	}
	if s.sawError {
		return 1
	}
	return 0
}

// zerr prints an error, preceded once per input line by "On line N:" in
// command-file mode.
func (s *zcSession) zerr(format string, a ...any) {
	if (s.mode == zcFile || s.mode == zcStdinFile) && s.line > s.lastErrLine {
		if s.mode == zcStdinFile {
			s.inv.errf("On line %d:", s.line)
		} else {
			s.inv.errf("On line %d of %s:", s.line, s.file)
		}
		s.lastErrLine = s.line
	}
	s.inv.errf(format, a...)
	s.fail()
}

// fail marks the command failed; non-interactive input stops here.
func (s *zcSession) fail() {
	s.sawError = true
	s.stop = true
}

func (s *zcSession) syntaxError(tok string) {
	if tok == "" {
		s.inv.errf("syntax error, token expected")
	} else {
		if tok == "\n" {
			tok = `\n`
		}
		s.inv.errf("syntax error on line %d at '%s'", s.line, tok)
	}
	s.fail()
}

func (s *zcSession) shortUsage(cmd string) {
	s.zerr("usage:\n%s", zcShortUsage[cmd])
}

var zcShortUsage = map[string]string{
	"add":    "add <resource-type>\n\t(global scope)\nadd <property-name> <property-value>\n\t(resource scope)",
	"cancel": "cancel", "clear": "clear <property-name>", "commit": "commit",
	"create": "create [-F] [ -a <path> | -b | -t <template> ]",
	"delete": "delete [-F]", "end": "end", "exit": "exit [-F]",
	"export": "export [-f output-file]",
	"info":   "info [<resource-type> [property-name=property-value]*]",
	"remove": "remove [-F] <resource-type> [ <property-name>=<property-value> ]*\n\t(global scope)\nremove <property-name> <property-value>\n\t(resource scope)",
	"revert": "revert [-F]",
	"select": "select <resource-type> { <property-name>=<property-value> }",
	"set":    "set <property-name>=<property-value>", "verify": "verify",
	"help": "help [commands] [syntax] [usage] [<command-name>]",
}

const zcHelp = `The following commands are supported:
add	cancel	clear	commit	create	delete	end	exit	export	help
info	remove	revert	select	set	verify
`

// Commands allowed in each scope (zonecfg's check_scope).
var zcResourceScopeCmds = map[string]bool{
	"add": true, "cancel": true, "clear": true, "end": true, "exit": true,
	"help": true, "info": true, "remove": true, "set": true,
}

var zcGlobalScopeCmds = map[string]bool{
	"add": true, "clear": true, "commit": true, "create": true, "delete": true,
	"exit": true, "export": true, "help": true, "info": true, "remove": true,
	"revert": true, "select": true, "set": true, "verify": true,
}

// exec runs one command line.
func (s *zcSession) exec(l zcLine) {
	s.line = l.line
	if l.badQuote != nil {
		s.syntaxError(l.badQuote.text)
		return
	}
	first := l.tokens[0]
	args := l.tokens[1:]
	if first.kind != tkWord || first.quoted {
		s.syntaxError(first.text)
		return
	}
	cmd := first.text
	if _, known := zcShortUsage[cmd]; !known {
		s.syntaxError(cmd)
		return
	}
	if s.scope == "" && !zcGlobalScopeCmds[cmd] {
		s.zerr("The %s command only makes sense in the resource scope.", cmd)
		return
	}
	if s.scope != "" && !zcResourceScopeCmds[cmd] {
		s.zerr("The %s command only makes sense in the global scope.", cmd)
		return
	}
	switch cmd {
	case "create":
		s.cmdCreate(args)
	case "set":
		s.cmdSet(args, l.term)
	case "clear":
		s.cmdClear(args, l.term)
	case "add":
		s.cmdAdd(args, l.term)
	case "select":
		s.cmdSelect(args, l.term)
	case "remove":
		s.cmdRemove(args, l.term)
	case "end":
		if s.noArgs("end", args) {
			s.cmdEnd()
		}
	case "cancel":
		if s.noArgs("cancel", args) {
			s.scope, s.res = "", nil
		}
	case "info":
		s.cmdInfo(args, l.term)
	case "export":
		s.cmdExport(args)
	case "verify":
		if s.noArgs("verify", args) && s.initialize() {
			for _, e := range verifyZoneConfig(s.cfg) {
				s.zerr("%s", e)
			}
		}
	case "commit":
		if s.noArgs("commit", args) && s.initialize() {
			s.commit()
		}
	case "revert":
		s.cmdRevert(args)
	case "delete":
		s.cmdDelete(args)
	case "exit":
		if _, ok := s.flags("exit", args, "F"); ok {
			s.stop = true
		}
	case "help":
		fmt.Fprint(s.inv.stdout, zcHelp)
	}
}

// words returns the arguments as plain words, or reports a syntax error.
func (s *zcSession) words(args []zcToken) ([]string, bool) {
	var out []string
	for _, t := range args {
		if t.kind != tkWord {
			s.syntaxError(t.text)
			return nil, false
		}
		out = append(out, t.text)
	}
	return out, true
}

func (s *zcSession) noArgs(cmd string, args []zcToken) bool {
	if len(args) > 0 {
		s.shortUsage(cmd)
		return false
	}
	return true
}

// flags parses single-letter options (getopt style, no operands allowed
// after them unless allowed lists an option taking a value, marked "x:").
func (s *zcSession) flags(cmd string, args []zcToken, spec string) (map[byte]string, bool) {
	ws, ok := s.words(args)
	if !ok {
		return nil, false
	}
	out := map[byte]string{}
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if len(w) < 2 || w[0] != '-' {
			s.shortUsage(cmd)
			return nil, false
		}
		for j := 1; j < len(w); j++ {
			c := w[j]
			k := strings.IndexByte(spec, c)
			if k < 0 {
				s.shortUsage(cmd)
				return nil, false
			}
			if k+1 < len(spec) && spec[k+1] == ':' {
				val := w[j+1:]
				if val == "" {
					if i+1 >= len(ws) {
						s.shortUsage(cmd)
						return nil, false
					}
					i++
					val = ws[i]
				}
				out[c] = val
				break
			}
			out[c] = ""
		}
	}
	return out, true
}

// zoneState is the committed state of the session's zone ("" if none).
func (s *zcSession) zoneState() string {
	if z := s.st.zone(s.zone); z != nil {
		return z.State
	}
	return ""
}

// initialize gets a handle on the zone's configuration.
func (s *zcSession) initialize() bool {
	if s.cfg != nil {
		return true
	}
	if s.zone == "global" {
		s.cfg = s.st.zone("global").Config.clone()
		return true
	}
	z := s.st.zone(s.zone)
	if z == nil {
		s.zerr("%s: No such zone configured", s.zone)
		return false
	}
	s.cfg = z.Config.clone()
	return true
}

func (s *zcSession) globalReadOnly() bool {
	if s.zone == "global" {
		s.zerr("global: the simulator keeps the global zone's configuration read-only")
		return true
	}
	return false
}

func (s *zcSession) cmdCreate(args []zcToken) {
	opts, ok := s.flags("create", args, "a:bFt:")
	if !ok || s.globalReadOnly() {
		return
	}
	_, force := opts['F']
	if _, ok := opts['a']; ok {
		s.zerr("create -a (from a detached zonepath) is not supported by illumos-sim")
		return
	}
	tmpl := "SUNWdefault"
	if _, ok := opts['b']; ok {
		tmpl = "SUNWblank"
	}
	if t, ok := opts['t']; ok {
		tmpl = t
	}
	if stateRank(s.zoneState()) >= stateRank(stateInstalled) {
		s.zerr("Zone %s already installed; create not allowed.", s.zone)
		return
	}
	if s.zoneState() != "" || s.cfg != nil {
		if !force {
			s.zerr("Zone exists, input not from terminal and -F not specified:\ncreate command ignored, exiting.")
			s.abort = true
			return
		}
		s.inv.outf("Zone %s already exists; overwriting.", s.zone)
	}
	cfg, ok := templateConfig(tmpl, s.inv.h.facts)
	if !ok {
		s.zerr("%s: No such zone configured", tmpl)
		return
	}
	s.cfg = cfg
	s.dirty = true
}

// templateConfig is the configuration a create template starts from. On
// OmniOS the default template is exclusive-IP; -b is blank (shared-IP, the
// libzonecfg default); -t BRAND starts an exclusive-IP zone of that brand.
func templateConfig(tmpl string, f *Facts) (*ZoneConfig, bool) {
	switch {
	case tmpl == "SUNWblank":
		return &ZoneConfig{Brand: f.GlobalBrand, IPType: "shared"}, true
	case tmpl == "SUNWdefault":
		return &ZoneConfig{Brand: f.GlobalBrand, IPType: "exclusive"}, true
	case knownBrands[tmpl]:
		return &ZoneConfig{Brand: tmpl, IPType: "exclusive"}, true
	}
	return nil, false
}

// zcValue is a parsed property value: simple, list or complex.
type zcValue struct {
	kind    string // "simple", "list", "complex"
	simple  string
	list    []zcValue
	complex [][2]string
}

func (v zcValue) String() string {
	switch v.kind {
	case "list":
		parts := make([]string, len(v.list))
		for i, x := range v.list {
			parts[i] = x.String()
		}
		return "[" + strings.Join(parts, ",") + "]"
	case "complex":
		parts := make([]string, len(v.complex))
		for i, kv := range v.complex {
			parts[i] = kv[0] + "=" + kv[1]
		}
		return "(" + strings.Join(parts, ",") + ")"
	}
	return v.simple
}

// parseValue parses one value starting at toks[0]; it returns the value and
// the number of tokens used, or the offending token.
func parseValue(toks []zcToken) (zcValue, int, string, bool) {
	if len(toks) == 0 {
		return zcValue{}, 0, "", false
	}
	switch toks[0].kind {
	case tkWord:
		return zcValue{kind: "simple", simple: toks[0].text}, 1, "", true
	case tkLParen:
		return parseComplex(toks)
	case tkLBrack:
		v := zcValue{kind: "list"}
		i := 1
		if i < len(toks) && toks[i].kind == tkRBrack {
			return v, i + 1, "", true
		}
		for {
			if i >= len(toks) {
				return zcValue{}, 0, "", false
			}
			var item zcValue
			switch toks[i].kind {
			case tkWord:
				item = zcValue{kind: "simple", simple: toks[i].text}
				i++
			case tkLParen:
				c, n, bad, ok := parseComplex(toks[i:])
				if !ok {
					return zcValue{}, 0, bad, false
				}
				item = c
				i += n
			default:
				return zcValue{}, 0, toks[i].text, false
			}
			v.list = append(v.list, item)
			if i >= len(toks) {
				return zcValue{}, 0, "", false
			}
			switch toks[i].kind {
			case tkComma:
				i++
			case tkRBrack:
				return v, i + 1, "", true
			default:
				return zcValue{}, 0, toks[i].text, false
			}
		}
	}
	return zcValue{}, 0, toks[0].text, false
}

func parseComplex(toks []zcToken) (zcValue, int, string, bool) {
	v := zcValue{kind: "complex"}
	i := 1
	for {
		if i+2 >= len(toks) {
			if i < len(toks) {
				return zcValue{}, 0, toks[i].text, false
			}
			return zcValue{}, 0, "", false
		}
		if toks[i].kind != tkWord || toks[i+1].kind != tkEqual || toks[i+2].kind != tkWord {
			bad := toks[i]
			if bad.kind == tkWord {
				bad = toks[i+1]
				if bad.kind == tkEqual {
					bad = toks[i+2]
				}
			}
			return zcValue{}, 0, bad.text, false
		}
		v.complex = append(v.complex, [2]string{toks[i].text, toks[i+2].text})
		i += 3
		if i >= len(toks) {
			return zcValue{}, 0, "", false
		}
		switch toks[i].kind {
		case tkComma:
			i++
		case tkRParen:
			return v, i + 1, "", true
		default:
			return zcValue{}, 0, toks[i].text, false
		}
	}
}

// propAssign parses "PROP = VALUE" and reports syntax errors.
func (s *zcSession) propAssign(args []zcToken, term string) (string, zcValue, bool) {
	if len(args) == 0 {
		s.syntaxError(term)
		return "", zcValue{}, false
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return "", zcValue{}, false
	}
	if len(args) < 2 {
		s.syntaxError(term)
		return "", zcValue{}, false
	}
	if args[1].kind != tkEqual {
		s.syntaxError(args[1].text)
		return "", zcValue{}, false
	}
	v, n, bad, ok := parseValue(args[2:])
	if !ok {
		if bad == "" {
			bad = term
		}
		s.syntaxError(bad)
		return "", zcValue{}, false
	}
	if 2+n < len(args) {
		s.syntaxError(args[2+n].text)
		return "", zcValue{}, false
	}
	return args[0].text, v, true
}

func (s *zcSession) cmdSet(args []zcToken, term string) {
	prop, v, ok := s.propAssign(args, term)
	if !ok || !s.initialize() || s.globalReadOnly() {
		return
	}
	if s.scope != "" {
		s.setResourceProp(prop, v)
		return
	}
	s.setGlobalProp(prop, v)
}

func (s *zcSession) simpleValue(prop string, v zcValue) (string, bool) {
	if v.kind != "simple" {
		s.zerr("A simple value was expected here.")
		return "", false
	}
	return v.simple, true
}

func (s *zcSession) installedOrHigher() bool {
	return stateRank(s.zoneState()) >= stateRank(stateInstalled)
}

func (s *zcSession) setGlobalProp(prop string, v zcValue) {
	val, ok := s.simpleValue(prop, v)
	if !ok {
		return
	}
	c := s.cfg
	switch prop {
	case "zonename":
		if s.zoneState() != "" && s.zoneState() != stateConfigured {
			s.zerr("Zone %s already installed; set zonename not allowed.", s.zone)
			return
		}
		if !validZoneName(val) {
			s.zerr("%s: Bogus zone name", val)
			return
		}
		if val != s.zone && s.st.zone(val) != nil {
			s.zerr("%s: Zone name already in use", val)
			return
		}
		s.renameTo = val
	case "zonepath":
		if s.installedOrHigher() {
			s.zerr("Zone %s already installed; set zonepath not allowed.", s.zone)
			return
		}
		if !strings.HasPrefix(val, "/") || strings.Trim(val, "/") == "" {
			s.zerr("%s: zonepath must be an absolute path other than /", val)
			return
		}
		c.Zonepath = cleanZonePath(val)
	case "brand":
		if s.installedOrHigher() {
			s.zerr("Zone %s already installed; set brand not allowed.", s.zone)
			return
		}
		if !knownBrands[val] {
			s.zerr("%s: unknown brand.", val)
			return
		}
		c.Brand = val
	case "autoboot":
		if val != "true" && val != "false" {
			s.zerr("autoboot value must be 'true' or 'false'.")
			return
		}
		c.Autoboot = val == "true"
	case "ip-type":
		if val != "shared" && val != "exclusive" {
			s.zerr("ip-type value must be 'shared' or 'exclusive'.")
			return
		}
		c.IPType = val
	case "bootargs":
		c.Bootargs = val
	case "pool":
		c.Pool = val
	case "limitpriv":
		if bad := badPrivilege(val); bad != "" {
			s.zerr("%s: unknown privilege \"%s\"", "limitpriv", bad)
			return
		}
		c.Limitpriv = val
	case "scheduling-class":
		c.SchedulingClass = val
	case "hostid":
		c.Hostid = val
	case "fs-allowed":
		c.FSAllowed = val
	default:
		rctl, units, isAlias := aliasFor(prop)
		if !isAlias {
			s.zerr("%s: No such property type", prop)
			return
		}
		n, ok := parseScaledBytes(val, true)
		if !ok || (!units && strings.ContainsAny(val, "kKmMgGtT.")) {
			s.zerr("%s: Invalid argument", prop)
			return
		}
		if n < aliasLowLimit(rctl) {
			s.zerr("%s property is out of range.", prop)
			return
		}
		c.setAliasRctl(rctl, strconv.FormatUint(n, 10))
	}
	s.dirty = true
}

func cleanZonePath(p string) string {
	for len(p) > 1 && strings.HasSuffix(p, "/") {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

func (s *zcSession) cmdClear(args []zcToken, term string) {
	ws, ok := s.words(args)
	if !ok {
		return
	}
	if len(ws) != 1 {
		if len(ws) == 0 {
			s.syntaxError(term)
		} else {
			s.syntaxError(ws[1])
		}
		return
	}
	prop := ws[0]
	if !zonecfgKeywords[prop] {
		s.syntaxError(prop)
		return
	}
	if !s.initialize() || s.globalReadOnly() {
		return
	}
	if s.scope != "" {
		if !containsStr(resourceProps[s.scope], prop) {
			s.zerr("%s: No such property type", prop)
			return
		}
		delete(s.res.props, prop)
		if prop == "options" {
			s.res.options = nil
		}
		return
	}
	c := s.cfg
	switch prop {
	case "autoboot":
		c.Autoboot = false
	case "pool":
		c.Pool = ""
	case "limitpriv":
		c.Limitpriv = ""
	case "bootargs":
		c.Bootargs = ""
	case "scheduling-class":
		c.SchedulingClass = ""
	case "ip-type":
		c.IPType = "shared"
	case "hostid":
		c.Hostid = ""
	case "fs-allowed":
		c.FSAllowed = ""
	default:
		rctl, _, isAlias := aliasFor(prop)
		if !isAlias {
			s.zerr("%s: Invalid argument", prop)
			return
		}
		c.clearRctl(rctl)
	}
	s.dirty = true
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// resourceExists reports whether a singleton resource is present.
func (c *ZoneConfig) singletonExists(rt string) bool {
	switch rt {
	case "capped-cpu":
		return c.rctl("zone.cpu-cap") != nil
	case "capped-memory":
		return c.CappedMemory > 0 || c.rctl("zone.max-swap") != nil || c.rctl("zone.max-locked-memory") != nil
	}
	return len(c.resources(rt)) > 0
}

func (s *zcSession) cmdAdd(args []zcToken, term string) {
	if s.scope != "" {
		s.addResourceProp(args, term)
		return
	}
	ws, ok := s.words(args)
	if !ok {
		return
	}
	if len(ws) == 0 {
		s.syntaxError(term)
		return
	}
	if len(ws) > 1 {
		s.syntaxError(ws[1])
		return
	}
	rt := ws[0]
	if !zonecfgKeywords[rt] {
		s.syntaxError(rt)
		return
	}
	if !s.initialize() || s.globalReadOnly() {
		return
	}
	if _, ok := resourceProps[rt]; !ok {
		s.zerr("%s: No such resource type", rt)
		return
	}
	if singletonResources[rt] && s.cfg.singletonExists(rt) {
		s.zerr("The %s resource already exists.", rt)
		return
	}
	s.scope, s.resOp = rt, "add"
	s.res = &zcRes{rt: rt, props: map[string]string{}}
	s.resOrig, s.rctlSel = nil, nil
}

// addResourceProp is "add options X" / "add value (...)" in resource scope.
func (s *zcSession) addResourceProp(args []zcToken, term string) {
	if len(args) == 0 {
		s.syntaxError(term)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	prop := args[0].text
	v, n, bad, ok := parseValue(args[1:])
	if !ok {
		if bad == "" {
			bad = term
		}
		s.syntaxError(bad)
		return
	}
	if 1+n < len(args) {
		s.syntaxError(args[1+n].text)
		return
	}
	switch {
	case s.scope == "fs" && prop == "options":
		opts, ok := s.optionList(v)
		if !ok {
			return
		}
		s.res.options = append(s.res.options, opts...)
	case s.scope == "rctl" && prop == "value":
		vals, ok := s.rctlValues(v)
		if !ok {
			return
		}
		s.res.values = append(s.res.values, vals...)
	default:
		s.zerr("%s: No such property type", prop)
	}
}

func (s *zcSession) optionList(v zcValue) ([]string, bool) {
	switch v.kind {
	case "simple":
		return []string{v.simple}, true
	case "list":
		var out []string
		for _, x := range v.list {
			if x.kind != "simple" {
				s.zerr("A simple value was expected here.")
				return nil, false
			}
			out = append(out, x.simple)
		}
		return out, true
	}
	s.zerr("A simple or list value was expected here.")
	return nil, false
}

func (s *zcSession) rctlValues(v zcValue) ([]RctlValue, bool) {
	var items []zcValue
	switch v.kind {
	case "complex":
		items = []zcValue{v}
	case "list":
		items = v.list
	default:
		s.zerr("A complex value was expected here.")
		return nil, false
	}
	var out []RctlValue
	for _, it := range items {
		if it.kind != "complex" {
			s.zerr("A complex value was expected here.")
			return nil, false
		}
		var rv RctlValue
		for _, kv := range it.complex {
			switch kv[0] {
			case "priv":
				rv.Priv = kv[1]
			case "limit":
				rv.Limit = kv[1]
			case "action":
				rv.Action = kv[1]
			default:
				s.zerr("%s: No such property type", kv[0])
				return nil, false
			}
		}
		if rv.Priv == "" || rv.Limit == "" || rv.Action == "" {
			s.zerr("rctl: priv, limit and action must all be specified in %s", it)
			return nil, false
		}
		if rv.Priv != "privileged" && rv.Priv != "basic" && rv.Priv != "system" {
			s.zerr("%s: invalid priv; must be privileged, basic or system", rv.Priv)
			return nil, false
		}
		if _, err := strconv.ParseUint(rv.Limit, 10, 64); err != nil {
			s.zerr("%s: invalid limit", rv.Limit)
			return nil, false
		}
		if rv.Action != "none" && rv.Action != "deny" && !strings.HasPrefix(rv.Action, "signal=") {
			s.zerr("%s: invalid action", rv.Action)
			return nil, false
		}
		out = append(out, rv)
	}
	return out, true
}

func (s *zcSession) setResourceProp(prop string, v zcValue) {
	if !containsStr(resourceProps[s.scope], prop) {
		s.zerr("%s: No such property type", prop)
		return
	}
	if s.scope == "fs" && prop == "options" {
		opts, ok := s.optionList(v)
		if ok {
			s.res.options = opts
		}
		return
	}
	if s.scope == "rctl" && prop == "value" {
		vals, ok := s.rctlValues(v)
		if ok {
			s.res.values = vals
		}
		return
	}
	val, ok := s.simpleValue(prop, v)
	if !ok {
		return
	}
	switch {
	case s.scope == "capped-memory":
		n, ok := parseScaledBytes(val, false)
		if !ok {
			s.zerr("A non-negative number with a required scale suffix (K, M, G or T) was expected\nhere.")
			return
		}
		if prop == "physical" && n < 1<<20 {
			s.zerr("The physical cap must be at least 1M.")
			return
		}
		if prop == "swap" && n < 50<<20 {
			s.zerr("The swap cap must be at least 50M.")
			return
		}
		val = strconv.FormatUint(n, 10)
	case s.scope == "capped-cpu" && prop == "ncpus":
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || f <= 0 || strings.ContainsAny(val, "eExXnN") {
			s.zerr("%s: Invalid argument", prop)
			return
		}
	case s.scope == "dedicated-cpu" && prop == "ncpus":
		if !validNCPURange(val) {
			s.zerr("%s: Invalid argument", prop)
			return
		}
	case s.scope == "dedicated-cpu" && prop == "importance":
		if _, err := strconv.Atoi(val); err != nil {
			s.zerr("%s: Invalid argument", prop)
			return
		}
	}
	s.res.props[prop] = val
}

func validNCPURange(v string) bool {
	lo, hi, isRange := strings.Cut(v, "-")
	a, err := strconv.Atoi(lo)
	if err != nil || a <= 0 {
		return false
	}
	if !isRange {
		return true
	}
	b, err := strconv.Atoi(hi)
	return err == nil && b >= a
}

// matchPairs parses "prop=value" selectors after a resource type.
func (s *zcSession) matchPairs(args []zcToken, term string) (map[string]string, bool) {
	m := map[string]string{}
	for i := 0; i < len(args); {
		prop, v, ok := s.propAssign(args[i:min(i+3, len(args))], term)
		if !ok {
			return nil, false
		}
		m[prop] = v.String()
		i += 3
	}
	return m, true
}

// findResources returns the resources of rt whose properties match m.
func (c *ZoneConfig) findResources(rt string, m map[string]string) []*Resource {
	var out []*Resource
	for _, r := range c.resources(rt) {
		ok := true
		for k, v := range m {
			got := r.Props[k]
			if k == "options" {
				got = "[" + strings.Join(r.Options, ",") + "]"
			}
			if got != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

func (c *ZoneConfig) findRctls(m map[string]string) []*Rctl {
	var out []*Rctl
	for _, r := range c.Rctls {
		if n, ok := m["name"]; ok && n != r.Name {
			continue
		}
		out = append(out, r)
	}
	return out
}

func (s *zcSession) cmdSelect(args []zcToken, term string) {
	if len(args) == 0 {
		s.syntaxError(term)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	rt := args[0].text
	m, ok := s.matchPairs(args[1:], term)
	if !ok || !s.initialize() || s.globalReadOnly() {
		return
	}
	if _, ok := resourceProps[rt]; !ok {
		s.zerr("%s: No such resource type", rt)
		return
	}
	res := &zcRes{rt: rt, props: map[string]string{}}
	c := s.cfg
	s.resOrig, s.rctlSel = nil, nil
	switch rt {
	case "capped-cpu":
		lim, ok := c.rctlLimit("zone.cpu-cap")
		if !ok {
			s.zerr("%s: No such resource with that id", rt)
			return
		}
		n, _ := strconv.ParseFloat(lim, 64)
		res.props["ncpus"] = strconv.FormatFloat(n/100, 'f', -1, 64)
	case "capped-memory":
		if !c.singletonExists(rt) {
			s.zerr("%s: No such resource with that id", rt)
			return
		}
		if c.CappedMemory > 0 {
			res.props["physical"] = strconv.FormatUint(c.CappedMemory, 10)
		}
		if v, ok := c.rctlLimit("zone.max-swap"); ok {
			res.props["swap"] = v
		}
		if v, ok := c.rctlLimit("zone.max-locked-memory"); ok {
			res.props["locked"] = v
		}
	case "rctl":
		found := c.findRctls(m)
		if !s.exactlyOne(rt, len(found)) {
			return
		}
		s.rctlSel = found[0]
		res.props["name"] = found[0].Name
		res.values = append([]RctlValue(nil), found[0].Values...)
	default:
		found := c.findResources(rt, m)
		if !s.exactlyOne(rt, len(found)) {
			return
		}
		s.resOrig = found[0]
		for k, v := range found[0].Props {
			res.props[k] = v
		}
		res.options = append([]string(nil), found[0].Options...)
	}
	s.scope, s.res, s.resOp = rt, res, "select"
}

func (s *zcSession) exactlyOne(rt string, n int) bool {
	switch {
	case n == 0:
		s.zerr("%s: No such resource with that id", rt)
		return false
	case n > 1:
		s.zerr("%s: Insufficient specification", rt)
		return false
	}
	return true
}

func (s *zcSession) cmdRemove(args []zcToken, term string) {
	if s.scope != "" {
		s.removeResourceProp(args, term)
		return
	}
	force := false
	if len(args) > 0 && args[0].kind == tkWord && args[0].text == "-F" {
		force = true
		args = args[1:]
	}
	if len(args) == 0 {
		s.syntaxError(term)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	rt := args[0].text
	m, ok := s.matchPairs(args[1:], term)
	if !ok || !s.initialize() || s.globalReadOnly() {
		return
	}
	c := s.cfg
	switch rt {
	case "capped-cpu":
		if !c.clearRctl("zone.cpu-cap") {
			s.zerr("%s: No such resource with that id", rt)
			return
		}
	case "capped-memory":
		if !c.singletonExists(rt) {
			s.zerr("%s: No such resource with that id", rt)
			return
		}
		c.CappedMemory = 0
		c.clearRctl("zone.max-swap")
		c.clearRctl("zone.max-locked-memory")
	case "rctl":
		found := c.findRctls(m)
		if !s.removable(rt, len(found), len(m) > 0, force) {
			return
		}
		for _, r := range found {
			c.clearRctl(r.Name)
		}
	default:
		if _, ok := resourceProps[rt]; !ok {
			s.zerr("%s: No such resource type", rt)
			return
		}
		found := c.findResources(rt, m)
		if !s.removable(rt, len(found), len(m) > 0, force) {
			return
		}
		for _, r := range found {
			c.removeResource(r)
		}
	}
	s.dirty = true
}

// removable applies zonecfg's rules for removing matching resources: none is
// an error; several need a selector or -F (there is no terminal to ask).
func (s *zcSession) removable(rt string, n int, selective, force bool) bool {
	switch {
	case n == 0:
		s.zerr("%s: No such resource with that id", rt)
		return false
	case n > 1 && selective:
		s.zerr("%s: Insufficient specification", rt)
		return false
	case n > 1 && !force:
		s.zerr("Input not from terminal and -F not specified:\nremove command ignored, exiting.")
		return false
	}
	return true
}

// removeResourceProp is "remove options X" / "remove value (...)".
func (s *zcSession) removeResourceProp(args []zcToken, term string) {
	if len(args) == 0 {
		s.syntaxError(term)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	prop := args[0].text
	v, n, bad, ok := parseValue(args[1:])
	if !ok {
		if bad == "" {
			bad = term
		}
		s.syntaxError(bad)
		return
	}
	if 1+n < len(args) {
		s.syntaxError(args[1+n].text)
		return
	}
	switch {
	case s.scope == "fs" && prop == "options":
		opts, ok := s.optionList(v)
		if !ok {
			return
		}
		for _, o := range opts {
			idx := indexOf(s.res.options, o)
			if idx < 0 {
				s.zerr("%s: No such property value", o)
				return
			}
			s.res.options = append(s.res.options[:idx], s.res.options[idx+1:]...)
		}
	case s.scope == "rctl" && prop == "value":
		vals, ok := s.rctlValues(v)
		if !ok {
			return
		}
		for _, rv := range vals {
			found := false
			for i, x := range s.res.values {
				if x == rv {
					s.res.values = append(s.res.values[:i], s.res.values[i+1:]...)
					found = true
					break
				}
			}
			if !found {
				s.zerr("%s: No such property value", rv)
				return
			}
		}
	default:
		s.zerr("%s: No such property type", prop)
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func (s *zcSession) cmdRevert(args []zcToken) {
	opts, ok := s.flags("revert", args, "F")
	if !ok {
		return
	}
	if _, force := opts['F']; !force {
		s.zerr("Input not from terminal and -F not specified:\nrevert command ignored, exiting.")
		s.abort = true
		return
	}
	z := s.st.zone(s.zone)
	s.dirty, s.renameTo = false, ""
	if z == nil {
		s.cfg = nil
		s.zerr("%s: no such saved zone to revert to.", s.zone)
		return
	}
	s.cfg = z.Config.clone()
}

func (s *zcSession) cmdDelete(args []zcToken) {
	opts, ok := s.flags("delete", args, "F")
	if !ok || s.globalReadOnly() {
		return
	}
	_, force := opts['F']
	z := s.st.zone(s.zone)
	if z == nil {
		if s.cfg != nil {
			// Only an uncommitted configuration exists: drop it.
			s.cfg, s.dirty = nil, false
			return
		}
		s.zerr("%s: No such zone configured", s.zone)
		return
	}
	if !force {
		if stateRank(z.State) >= stateRank(stateIncomplete) {
			s.zerr("Zone %s not in %s state; %s not allowed.  Use -F to force %s.",
				s.zone, stateConfigured, "delete", "delete")
			return
		}
		s.zerr("Input not from terminal and -F not specified:\ndelete command ignored, exiting.")
		s.abort = true
		return
	}
	if stateRank(z.State) >= stateRank(stateReady) {
		s.zerr("%s: Zone state is invalid for the requested operation", s.zone)
		return
	}
	s.st.removeZone(s.zone)
	s.changed = true
	s.cfg, s.dirty, s.renameTo = nil, false, ""
}

func (s *zcSession) cmdInfo(args []zcToken, term string) {
	if !s.initialize() {
		return
	}
	w := s.inv.stdout
	if s.scope != "" {
		writeResource(w, s.res)
		return
	}
	name := s.zone
	if s.renameTo != "" {
		name = s.renameTo
	}
	if len(args) == 0 {
		writeInfo(w, name, s.cfg)
		return
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return
	}
	what := args[0].text
	m, ok := s.matchPairs(args[1:], term)
	if !ok {
		return
	}
	if _, isRes := resourceProps[what]; isRes {
		writeResourcesOf(w, s.cfg, what, m)
		return
	}
	if !writeGlobalProp(w, name, s.cfg, what) {
		s.zerr("%s: No such property type", what)
	}
}

func (s *zcSession) cmdExport(args []zcToken) {
	opts, ok := s.flags("export", args, "f:")
	if !ok || !s.initialize() {
		return
	}
	var b strings.Builder
	writeExport(&b, s.cfg, s.inv.h.facts.GlobalBrand)
	if f, ok := opts['f']; ok {
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			s.zerr("opening file %s: %s", f, strerror(err))
		}
		return
	}
	fmt.Fprint(s.inv.stdout, b.String())
}

// cmdEnd validates the resource being edited and stores it.
func (s *zcSession) cmdEnd() {
	r := s.res
	c := s.cfg
	var problems []string
	need := func(props ...string) {
		for _, p := range props {
			if r.props[p] == "" {
				problems = append(problems, fmt.Sprintf("%s: %s not specified", r.rt, p))
			}
		}
	}
	switch r.rt {
	case "fs":
		need("dir", "special", "type")
		if d := r.props["dir"]; d != "" && !strings.HasPrefix(d, "/") {
			problems = append(problems, fmt.Sprintf("%s: dir must be an absolute path", d))
		}
	case "net":
		need("physical")
		for _, p := range []string{"address", "allowed-address"} {
			if v := r.props[p]; v != "" {
				if _, ok := parseIPPrefix(v); !ok {
					problems = append(problems, fmt.Sprintf("%s: invalid IP address", v))
				}
			}
		}
		if v := r.props["defrouter"]; v != "" {
			if _, ok := parseIPPrefix(v); !ok {
				problems = append(problems, fmt.Sprintf("%s: invalid IP address", v))
			}
		}
		if p := r.props["physical"]; p != "" && c.exclusive() && !validLinkName(p) {
			problems = append(problems, fmt.Sprintf("%s: invalid physical interface name", p))
		}
	case "device":
		need("match")
	case "rctl":
		need("name")
		if n := r.props["name"]; n != "" && !strings.HasPrefix(n, "zone.") {
			problems = append(problems, fmt.Sprintf("%s: invalid rctl name; zone rctls start with 'zone.'", n))
		}
		if len(r.values) == 0 && len(problems) == 0 {
			problems = append(problems, "rctl: value not specified")
		}
	case "attr":
		need("name", "type", "value")
		problems = append(problems, attrProblems(r.props)...)
	case "dataset":
		need("name")
	case "dedicated-cpu", "capped-cpu":
		need("ncpus")
	case "capped-memory":
		if r.props["physical"] == "" && r.props["swap"] == "" && r.props["locked"] == "" {
			problems = append(problems, "No property was specified.  One of physical, swap or locked is required.")
		}
		if r.props["physical"] != "" && r.props["locked"] != "" {
			p, _ := strconv.ParseUint(r.props["physical"], 10, 64)
			l, _ := strconv.ParseUint(r.props["locked"], 10, 64)
			if p < l {
				problems = append(problems, "The locked cap must be less than or equal to the physical cap.")
			}
		}
	case "admin":
		need("user", "auths")
	}
	if len(problems) == 0 && s.resOp == "add" {
		if dup := s.duplicateOf(r); dup != "" {
			problems = append(problems, dup)
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			s.zerr("%s", p)
		}
		return
	}
	s.storeResource(r)
	s.scope, s.res = "", nil
	s.dirty = true
}

// duplicateOf reports an "already exists" conflict for a new resource.
func (s *zcSession) duplicateOf(r *zcRes) string {
	key := map[string]string{"fs": "dir", "net": "physical", "device": "match", "attr": "name", "dataset": "name", "admin": "user"}[r.rt]
	if r.rt == "rctl" {
		if s.cfg.rctl(r.props["name"]) != nil {
			return fmt.Sprintf("An rctl resource with the name '%s' already exists.", r.props["name"])
		}
		return ""
	}
	if key == "" {
		return ""
	}
	for _, x := range s.cfg.resources(r.rt) {
		if x.Props[key] == r.props[key] {
			article := "A"
			if strings.ContainsRune("aeiou", rune(r.rt[0])) {
				article = "An"
			}
			return fmt.Sprintf("%s %s resource with the %s '%s' already exists.", article, r.rt, key, r.props[key])
		}
	}
	return ""
}

func attrProblems(p map[string]string) []string {
	var out []string
	if n := p["name"]; n != "" {
		ok := isAlnum(n[0])
		for i := 0; i < len(n); i++ {
			if !isAlnum(n[i]) && n[i] != '-' && n[i] != '.' {
				ok = false
			}
		}
		if !ok {
			out = append(out, fmt.Sprintf("invalid attr name: %s", n))
		}
	}
	t, v := p["type"], p["value"]
	if t == "" || v == "" {
		return out
	}
	switch t {
	case "string":
	case "int":
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			out = append(out, fmt.Sprintf("invalid int value: %s", v))
		}
	case "uint":
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			out = append(out, fmt.Sprintf("invalid uint value: %s", v))
		}
	case "boolean":
		if v != "true" && v != "false" {
			out = append(out, fmt.Sprintf("invalid boolean value: %s", v))
		}
	default:
		out = append(out, fmt.Sprintf("invalid type specified: %s", t))
	}
	return out
}

// storeResource writes an edited resource into the configuration.
func (s *zcSession) storeResource(r *zcRes) {
	c := s.cfg
	switch r.rt {
	case "capped-cpu":
		f, _ := strconv.ParseFloat(r.props["ncpus"], 64)
		c.setAliasRctl("zone.cpu-cap", strconv.FormatInt(int64(f*100+0.5), 10))
		return
	case "capped-memory":
		c.CappedMemory, _ = strconv.ParseUint(r.props["physical"], 10, 64)
		for prop, rctl := range map[string]string{"swap": "zone.max-swap", "locked": "zone.max-locked-memory"} {
			if v := r.props[prop]; v != "" {
				c.setAliasRctl(rctl, v)
			} else {
				c.clearRctl(rctl)
			}
		}
		return
	case "rctl":
		nr := &Rctl{Name: r.props["name"], Values: append([]RctlValue(nil), r.values...)}
		if s.rctlSel != nil {
			*s.rctlSel = *nr
		} else {
			c.Rctls = append(c.Rctls, nr)
		}
		return
	}
	props := map[string]string{}
	for k, v := range r.props {
		if v != "" {
			props[k] = v
		}
	}
	nr := &Resource{Type: r.rt, Props: props, Options: append([]string(nil), r.options...)}
	if s.resOrig != nil {
		*s.resOrig = *nr
		return
	}
	c.Resources = append(c.Resources, nr)
}

// commit verifies the working configuration and saves it into the state.
func (s *zcSession) commit() {
	if problems := verifyZoneConfig(s.cfg); len(problems) > 0 {
		for _, p := range problems {
			s.zerr("%s", p)
		}
		s.zerr("Zone %s failed to verify", s.zone)
		return
	}
	z := s.st.zone(s.zone)
	if z == nil {
		z = &Zone{Name: s.zone, State: stateConfigured, ID: -1}
		s.st.addZone(z)
	}
	z.Config = s.cfg.clone()
	if s.renameTo != "" && s.renameTo != s.zone {
		z.Name = s.renameTo
		s.zone = s.renameTo
	}
	s.renameTo = ""
	s.dirty = false
	s.changed = true
}

// verifyZoneConfig returns zonecfg's verify complaints.
func verifyZoneConfig(c *ZoneConfig) []string {
	var out []string
	if c.Zonepath == "" {
		out = append(out, "zonepath not specified")
	}
	if exclusiveOnlyBrands[c.Brand] && !c.exclusive() {
		out = append(out, fmt.Sprintf("ip-type: brand %s requires an exclusive IP type", c.Brand))
	}
	for _, n := range c.resources("net") {
		if c.exclusive() {
			if n.Props["address"] != "" {
				out = append(out, "net: address cannot be specified for an exclusive IP type")
			}
			if n.Props["defrouter"] != "" && n.Props["allowed-address"] == "" {
				out = append(out, "net: defrouter cannot be specified without allowed-address for an exclusive IP type")
			}
		} else {
			if n.Props["allowed-address"] != "" {
				out = append(out, "net: allowed-address cannot be specified for a shared IP type")
			}
			if n.Props["address"] == "" {
				out = append(out, "net: address not specified")
			}
		}
	}
	for _, d := range c.resources("dataset") {
		if datasetNameProblem(d.Props["name"]) != "" || strings.Contains(d.Props["name"], "@") {
			out = append(out, "dataset: name invalid")
		}
	}
	return out
}

// badPrivilege returns the first unknown privilege of a limitpriv list.
func badPrivilege(list string) string {
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimLeft(p, "!-")
		if p == "" || illumosPrivileges[p] {
			continue
		}
		return p
	}
	return ""
}

var illumosPrivileges = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Fields(`default all none zone basic
		contract_event contract_identity contract_observer cpc_cpu dtrace_kernel
		dtrace_proc dtrace_user file_chown file_chown_self file_dac_execute
		file_dac_read file_dac_search file_dac_write file_downgrade_sl
		file_flag_set file_link_any file_owner file_read file_setid
		file_upgrade_sl file_write graphics_access graphics_map ipc_dac_read
		ipc_dac_write ipc_owner net_access net_bindmlp net_icmpaccess
		net_mac_aware net_mac_implicit net_observability net_privaddr
		net_rawaccess proc_audit proc_chroot proc_clock_highres proc_exec
		proc_fork proc_info proc_lock_memory proc_owner proc_prioup
		proc_priocntl proc_secflags proc_session proc_setid proc_taskid
		proc_zone sys_acct sys_admin sys_audit sys_config sys_devices
		sys_dl_config sys_fs_import sys_ip_config sys_iptun_config
		sys_ipc_config sys_linkdir sys_mount sys_net_config sys_nfs
		sys_ppp_config sys_res_bind sys_res_config sys_resource sys_share
		sys_smb sys_suser_compat sys_time sys_trans_label virt_manage
		win_colormap win_config win_dac_read win_dac_write win_devices
		win_dga win_downgrade_sl win_fontpath win_mac_read win_mac_write
		win_selection win_upgrade_sl`) {
		m[p] = true
	}
	return m
}()
