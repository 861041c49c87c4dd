package sim

import (
	"fmt"
	"io"
	"os"
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
	haveFile, bogus := false, false
	operands, _, ok := eachOpt(inv.args, "z:f:R:", func(o opt) bool {
		switch o.c {
		case 'z':
			if o.val != "global" && !validZoneName(o.val) {
				inv.errf("%s: Bogus zone name", o.val)
				inv.errf("Zone names must begin with an alphanumeric character and may contain\n" +
					"alphanumeric characters plus '-', '_', and '.'; \"global\" and names\n" +
					"beginning with \"SUNW\" are reserved.")
				bogus = true
				return false
			}
			zone = o.val
		case 'f':
			file, haveFile = o.val, true
		case 'R':
			// An alternate root is accepted and ignored: the host root is the
			// simulator's state directory.
		}
		return true
	})
	if bogus {
		return 2
	}
	if !ok || zone == "" {
		fmt.Fprint(inv.stderr, zcUsage)
		return 2
	}
	s := &zcSession{inv: inv, zone: zone}
	var input string
	switch {
	case len(operands) > 0:
		s.mode = zcOneShot
		input = strings.Join(operands, " ") + "\n"
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
