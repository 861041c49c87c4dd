package illumos

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos/names"
)

// Classify says what kind of failure an *ExecError is, from how the command
// ended, its exit status and the wording of its messages (see
// shared/illumos-cli-spec.md for every message matched here). A command run
// through zlogin is classified as the command it runs inside the zone.
func Classify(e *ExecError) Kind {
	if e == nil {
		return KindUnknown
	}
	if e.TimedOut || e.Signaled {
		return KindTransient
	}
	if e.Err != nil && e.ExitCode < 0 {
		// Could not start. A missing binary is a broken installation, not
		// something a retry fixes; anything else (EAGAIN from fork) may be.
		if errors.Is(e.Err, os.ErrNotExist) || errors.Is(e.Err, os.ErrPermission) {
			return KindInvalid
		}
		return KindTransient
	}

	cmd := effectiveCommand(e.Argv)
	if cmd == "route" {
		// route reports kernel refusals through its exit status (the errno)
		// and prints them on stdout.
		switch e.ExitCode {
		case 17: // EEXIST
			return KindAlreadyExists
		case 3: // ESRCH
			return KindNotFound
		case 11: // EAGAIN
			return KindTransient
		}
	}
	if k := classifyMessage(e.Stderr); k != KindUnknown {
		return k
	}
	if k := classifyMessage(e.Stdout); k != KindUnknown {
		return k
	}
	if e.ExitCode == 2 {
		switch cmd {
		case "zoneadm", "zonecfg", "zfs", "zpool":
			return KindInvalid // usage
		case "zlogin":
			return KindInvalid // zlogin's own usage error (exit 2 of an inner command is not an error of zlogin)
		}
	}
	return KindUnknown
}

// rule maps a message fragment to a Kind. Rules are tried in order, so
// specific fragments come before general ones.
type rule struct {
	kind Kind
	frag string         // substring, or
	re   *regexp.Regexp // pattern
}

var (
	// dladm uses one message both for a malformed name and for a name that
	// names nothing; linkNameRe lets the classifier tell them apart.
	dladmInvalidLinkRe = regexp.MustCompile(`invalid link name '([^']*)'`)
	zloginUnknownRe    = regexp.MustCompile(`zone '[^']*' unknown`)
)

var rules = []rule{
	// Transient conditions first: they can wrap any other wording.
	{kind: KindTransient, frag: "Resource temporarily unavailable"},
	{kind: KindTransient, frag: "resource temporarily unavailable"},
	{kind: KindTransient, frag: "Interrupted system call"},
	{kind: KindTransient, frag: "repository server unavailable"},
	{kind: KindTransient, frag: "timed out waiting for"},
	// zfs receive of a stream that ended early (the sender or the
	// download stopped): sending it again can work.
	{kind: KindTransient, frag: "failed to read from stream"},
	{kind: KindTransient, frag: "checksum mismatch or incomplete stream"},

	// Invalid requests whose wording overlaps with the state messages below.
	{kind: KindInvalid, frag: "operation is invalid for the global zone"},
	{kind: KindInvalid, frag: "operation is invalid for zones starting with SUNW"},
	{kind: KindInvalid, frag: "not applicable to the global zone"},
	{kind: KindInvalid, frag: "Input not from terminal"},
	{kind: KindInvalid, frag: "invalid stream"},
	{kind: KindAlreadyExists, frag: "must specify -F to overwrite it"},
	// An incremental stream whose destination is not where it starts.
	{kind: KindWrongState, frag: "since most recent snapshot"},
	{kind: KindWrongState, frag: "match incremental source"},
	{kind: KindInvalid, frag: "incremental source must be in same filesystem"},
	{kind: KindInvalid, frag: "is not earlier than it"},

	// Not found.
	{kind: KindNotFound, frag: "No such zone configured"},
	{kind: KindNotFound, re: zloginUnknownRe},
	{kind: KindNotFound, frag: "dataset does not exist"},
	// zfs destroy of a snapshot its dataset does not have.
	{kind: KindNotFound, frag: "could not find any snapshots to destroy"},
	{kind: KindNotFound, frag: "no such pool"},
	{kind: KindNotFound, frag: "object not found"},
	{kind: KindNotFound, frag: "Object not found"},
	{kind: KindNotFound, frag: "Address object not found"},
	{kind: KindNotFound, frag: "Interface does not exist"},
	{kind: KindNotFound, frag: "Datalink does not exist"},
	{kind: KindNotFound, frag: "not in table"},
	{kind: KindNotFound, frag: "not in file"}, // route -p delete: not in the persistent store
	{kind: KindNotFound, frag: "no such interface"},
	{kind: KindNotFound, frag: "doesn't match any instances"},
	{kind: KindNotFound, frag: "doesn't match any entities"}, // svcprop
	{kind: KindNotFound, frag: "does not exist"},

	// A MAC address another link holds: the VNIC does not exist, and the
	// request can succeed once the other link goes.
	{kind: KindBusy, frag: "MAC address is already in use"},

	// Already exists.
	{kind: KindAlreadyExists, frag: "already exists"},
	{kind: KindAlreadyExists, frag: "entry exists"},
	{kind: KindAlreadyExists, frag: "File exists"},
	{kind: KindAlreadyExists, frag: "is already installed"},
	{kind: KindAlreadyExists, frag: "Zone exists"},
	{kind: KindAlreadyExists, frag: "already installed; create not allowed"},
	{kind: KindAlreadyExists, frag: "Zone name already in use"},
	{kind: KindAlreadyExists, frag: "cannot receive incremental stream: destination '"}, // its snapshot exists

	// Wrong state.
	{kind: KindWrongState, frag: "must be installed before"},
	{kind: KindWrongState, frag: "must be mounted before"},
	{kind: KindWrongState, frag: "operation is invalid for"},
	{kind: KindWrongState, frag: "Zone state is invalid for the requested operation"},
	{kind: KindWrongState, frag: "login allowed only to running zones"},
	{kind: KindWrongState, frag: "cannot login to a zone which is"},
	{kind: KindWrongState, frag: "cannot manage a zone which is in state"},
	{kind: KindWrongState, frag: "is already in state"},
	{kind: KindWrongState, frag: "zone is incomplete; uninstall required"},
	{kind: KindWrongState, frag: "not in configured state"},
	{kind: KindWrongState, frag: "already installed; set"},
	{kind: KindWrongState, frag: "has children"},
	{kind: KindWrongState, frag: "has dependent clones"},
	{kind: KindWrongState, frag: "not running"},
	{kind: KindWrongState, frag: "maintenance state"},

	// Busy.
	{kind: KindBusy, frag: "link busy"},
	{kind: KindBusy, frag: "dataset is busy"},
	{kind: KindBusy, frag: "Device busy"},
	{kind: KindBusy, frag: "device busy"},
	{kind: KindBusy, frag: "Resource busy"},
	{kind: KindBusy, frag: "entry in use"},
	{kind: KindBusy, frag: "is busy"},

	// Invalid.
	{kind: KindInvalid, frag: "Bogus zone name"},
	{kind: KindInvalid, frag: "link name too long"},
	{kind: KindInvalid, frag: "invalid VLAN identifier"},
	{kind: KindInvalid, frag: "invalid MAC address"},
	{kind: KindInvalid, frag: "syntax error"},
	{kind: KindInvalid, frag: "invalid character"},
	{kind: KindInvalid, frag: "invalid address object name"},
	{kind: KindInvalid, frag: "Invalid argument"},
	{kind: KindInvalid, frag: "invalid argument"},
	{kind: KindInvalid, frag: "leading slash in name"},
	{kind: KindInvalid, frag: "trailing slash in name"},
	{kind: KindInvalid, frag: "empty component in name"},
	{kind: KindInvalid, frag: "name is too long"},
	{kind: KindInvalid, frag: "requires -o"},
	{kind: KindInvalid, frag: "mutually exclusive"},
	{kind: KindInvalid, frag: "is invalid with -p"},
	{kind: KindInvalid, frag: "unknown output field"},
	{kind: KindInvalid, frag: "invalid physical interface name"},
	{kind: KindInvalid, frag: "No such property type"},
	{kind: KindInvalid, frag: "No such resource type"},
	{kind: KindInvalid, frag: "Required property missing"},
	{kind: KindInvalid, frag: "Insufficient specification"},
	{kind: KindInvalid, frag: "failed to verify"},
	{kind: KindInvalid, frag: "cannot be specified"},
	{kind: KindInvalid, frag: "not specified"},
	{kind: KindInvalid, frag: "value must be"},
	{kind: KindInvalid, frag: "is not a vnic"},
	{kind: KindInvalid, frag: "is not an etherstub"},
	{kind: KindInvalid, frag: "gateway required"},
	{kind: KindInvalid, frag: "lack sufficient privilege"},
	{kind: KindInvalid, frag: "ermission denied"},
	{kind: KindInvalid, frag: "unknown brand"},
	{kind: KindInvalid, frag: "operation not supported"},
	{kind: KindInvalid, frag: "Operation not supported"},
	{kind: KindInvalid, frag: "illegal option"},
	{kind: KindInvalid, frag: "unrecognized command"},
	{kind: KindInvalid, frag: "Unrecognized column"},
	{kind: KindInvalid, frag: "unknown subcommand"},
	{kind: KindInvalid, frag: "unknown keyword"},
	{kind: KindInvalid, frag: "bad address"},
	{kind: KindInvalid, frag: "Import of"}, // svccfg: a manifest it cannot read
	{kind: KindInvalid, frag: "usage:"},
	{kind: KindInvalid, frag: "Usage:"},
	// Last: the many "invalid <thing>" messages (property, type, depth,
	// ipnat's parse errors: `MSG error at "TOK", line N` (spec 10.5).
	{kind: KindInvalid, re: regexp.MustCompile(`error at ".*", line [0-9]+`)},
	// option, argument...) not matched above.
	{kind: KindInvalid, frag: "invalid "},
}

// classifyMessage classifies the text a command printed.
func classifyMessage(msg string) Kind {
	if strings.TrimSpace(msg) == "" {
		return KindUnknown
	}
	// "invalid link name 'X'" means "no such link" when X is a well-formed
	// link name (delete-vnic of a missing VNIC, create-vnic over a missing
	// link) and "bad name" otherwise.
	if m := dladmInvalidLinkRe.FindStringSubmatch(msg); m != nil {
		if names.ValidLinkName(m[1]) {
			return KindNotFound
		}
		return KindInvalid
	}
	for _, r := range rules {
		if r.re != nil {
			if r.re.MatchString(msg) {
				return r.kind
			}
		} else if strings.Contains(msg, r.frag) {
			return r.kind
		}
	}
	return KindUnknown
}

// effectiveCommand is the base name of the command argv runs; for zlogin,
// the command run inside the zone.
func effectiveCommand(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	name := filepath.Base(argv[0])
	if name != "zlogin" {
		return name
	}
	rest := argv[1:]
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		opt := rest[0]
		rest = rest[1:]
		if (opt == "-l" || opt == "-e") && len(rest) > 0 {
			rest = rest[1:]
		}
	}
	if len(rest) < 2 { // zone, then the command
		return name
	}
	inner := rest[1]
	if u, ok := shellUnquote(inner); ok {
		inner = u
	}
	return filepath.Base(inner)
}
