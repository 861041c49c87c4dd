package illumos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestClassifySpecMessages(t *testing.T) {
	zlogin := func(inner ...string) []string {
		return append([]string{"/usr/sbin/zlogin", "web01"}, inner...)
	}
	tests := []struct {
		name   string
		argv   []string
		exit   int
		stderr string
		stdout string
		want   Kind
	}{
		// zoneadm
		{"zoneadm on an unknown zone is not found", []string{"zoneadm", "-z", "nosuch", "halt"}, 1, "zoneadm: nosuch: No such zone configured\n", "", KindNotFound},
		{"boot of a configured zone is the wrong state", []string{"zoneadm", "-z", "web01", "boot"}, 1, "zoneadm: zone 'web01': must be installed before boot.\n", "", KindWrongState},
		{"install of an installed zone already exists", []string{"zoneadm", "-z", "web01", "install"}, 1, "zoneadm: zone 'web01': is already installed.\n", "", KindAlreadyExists},
		{"install of an incomplete zone is the wrong state", []string{"zoneadm", "-z", "web01", "install"}, 1, "zoneadm: zone 'web01': zone is incomplete; uninstall required.\n", "", KindWrongState},
		{"uninstall of a running zone is the wrong state", []string{"zoneadm", "-z", "web01", "uninstall", "-F"}, 1, "zoneadm: zone 'web01': uninstall operation is invalid for running zones.\n", "", KindWrongState},
		{"uninstall of a configured zone is the wrong state", []string{"zoneadm", "-z", "web01", "uninstall", "-F"}, 1, "zoneadm: zone 'web01': is already in state 'configured'.\n", "", KindWrongState},
		{"reboot of a halted zone is the wrong state", []string{"zoneadm", "-z", "web01", "reboot"}, 1, "zoneadm: zone 'web01': not running\n", "", KindWrongState},
		{"ready of an incomplete zone is the wrong state", []string{"zoneadm", "-z", "web01", "ready"}, 1, "zoneadm: zone 'web01': ready operation is invalid for zones in state 'incomplete'\n", "", KindWrongState},
		{"halt of a configured zone is the wrong state", []string{"zoneadm", "-z", "web01", "halt"}, 1, "zoneadm: zone 'web01': cannot manage a zone which is in state 'configured'\n", "", KindWrongState},
		{"operations on the global zone are invalid", []string{"zoneadm", "-z", "global", "halt"}, 1, "zoneadm: zone 'global': halt operation is invalid for the global zone.\n", "", KindInvalid},
		{"uninstall without -F off a tty is invalid", []string{"zoneadm", "-z", "web01", "uninstall"}, 1, "zoneadm: zone 'web01': Input not from terminal and -F not specified: uninstall not done.\n", "", KindInvalid},
		{"zoneadm usage errors are invalid", []string{"zoneadm", "-z", "web01", "bogus"}, 2, "usage:\tzoneadm [-z <zone>] [-u <uuid-match>] list\n", "", KindInvalid},
		{"zoneadm exit 2 without text is invalid", []string{"/usr/sbin/zoneadm", "list", "-Q"}, 2, "", "", KindInvalid},
		{"list -p with -v is invalid", []string{"zoneadm", "list", "-pv"}, 1, "zoneadm: list -p and -v are mutually exclusive.\n", "", KindInvalid},

		// zfs receive
		{"receive onto an existing dataset already exists", []string{"zfs", "receive", "tank/a"}, 1, "cannot receive new filesystem stream: destination 'tank/a' exists\nmust specify -F to overwrite it\n", "", KindAlreadyExists},
		{"receive under a missing parent is not found", []string{"zfs", "receive", "tank/a/b"}, 1, "cannot receive new filesystem stream: no such pool or dataset\n", "", KindNotFound},
		{"receive of a truncated stream is transient", []string{"zfs", "receive", "tank/a"}, 1, "cannot receive: failed to read from stream\n", "", KindTransient},
		{"receive of a corrupted stream is transient", []string{"zfs", "receive", "tank/a"}, 1, "cannot receive new filesystem stream: checksum mismatch or incomplete stream\n", "", KindTransient},
		{"receive of something else is invalid", []string{"zfs", "receive", "tank/a"}, 1, "cannot receive: invalid stream (bad magic number)\n", "", KindInvalid},

		// zonecfg
		{"zonecfg info on an unknown zone is not found", []string{"zonecfg", "-z", "nosuch", "info"}, 1, "nosuch: No such zone configured\n", "", KindNotFound},
		{"zonecfg create over an existing zone already exists", []string{"zonecfg", "-z", "web01", "-f", "-"}, 1, "On line 1:\nZone exists, input not from terminal and -F not specified:\ncreate command ignored, exiting.\n", "", KindAlreadyExists},
		{"zonecfg create over an installed zone already exists", []string{"zonecfg", "-z", "web01", "-f", "-"}, 1, "Zone web01 already installed; create not allowed.\n", "", KindAlreadyExists},
		{"zonecfg set zonepath on an installed zone is the wrong state", []string{"zonecfg", "-z", "web01", "set", "zonepath=/x"}, 1, "Zone web01 already installed; set zonepath not allowed.\n", "", KindWrongState},
		{"zonecfg delete of a running zone is the wrong state", []string{"zonecfg", "-z", "web01", "delete", "-F"}, 1, "web01: Zone state is invalid for the requested operation\n", "", KindWrongState},
		{"zonecfg delete without -F is invalid", []string{"zonecfg", "-z", "web01", "delete"}, 1, "Input not from terminal and -F not specified:\ndelete command ignored, exiting.\n", "", KindInvalid},
		{"a bogus zone name is invalid", []string{"zonecfg", "-z", "-bad", "info"}, 2, "-bad: Bogus zone name\n", "", KindInvalid},
		{"a zonecfg syntax error is invalid", []string{"zonecfg", "-z", "web01", "-f", "-"}, 1, "On line 3:\nsyntax error on line 3 at 'x'\n", "", KindInvalid},
		{"a missing zonepath fails verify as invalid", []string{"zonecfg", "-z", "web01", "-f", "-"}, 1, "zonepath not specified\nweb01: Required property missing\nZone web01 failed to verify\n", "", KindInvalid},
		{"a duplicate fs resource already exists", []string{"zonecfg", "-z", "web01", "-f", "-"}, 1, "On line 9:\nA fs resource with the dir '/x' already exists.\n", "", KindAlreadyExists},
		{"a bad physical link is invalid", []string{"zonecfg", "-z", "web01", "-f", "-"}, 1, "On line 6:\nweb: invalid physical interface name\n", "", KindInvalid},

		// zlogin
		{"zlogin to an unknown zone is not found", []string{"/usr/sbin/zlogin", "nosuch", "true"}, 1, "zlogin: zone 'nosuch' unknown\n", "", KindNotFound},
		{"zlogin to an installed zone is the wrong state", []string{"/usr/sbin/zlogin", "web01", "true"}, 1, "zlogin: login allowed only to running zones (web01 is 'installed').\n", "", KindWrongState},
		{"zlogin to a configured zone is the wrong state", []string{"/usr/sbin/zlogin", "web01", "true"}, 1, "zlogin: cannot login to a zone which is 'configured'\n", "", KindWrongState},
		{"zlogin to the global zone is invalid", []string{"/usr/sbin/zlogin", "global", "true"}, 1, "zlogin: 'zlogin' not applicable to the global zone\n", "", KindInvalid},

		// dladm
		{"a malformed vnic name is invalid", []string{"dladm", "create-vnic", "-t", "-l", "net0", "web"}, 1, "dladm: invalid link name 'web'\n", "", KindInvalid},
		{"deleting a vnic that does not exist is not found", []string{"dladm", "delete-vnic", "web0"}, 1, "dladm: invalid link name 'web0'\n", "", KindNotFound},
		{"a vnic over a missing link is not found", []string{"dladm", "create-vnic", "-l", "nosuch0", "web0"}, 1, "dladm: invalid link name 'nosuch0'\n", "", KindNotFound},
		{"a too long link name is invalid", []string{"dladm", "create-vnic", "-l", "net0", "abcdefghijabcdefghijabcdefghijab0"}, 1, "dladm: link name too long 'abcdefghijabcdefghijabcdefghijab0'\n", "", KindInvalid},
		{"a duplicate vnic already exists", []string{"dladm", "create-vnic", "-l", "net0", "web0"}, 1, "dladm: vnic creation over net0 failed: object already exists\n", "", KindAlreadyExists},
		{"a duplicate etherstub already exists", []string{"dladm", "create-etherstub", "stub0"}, 1, "dladm: etherstub creation failed: object already exists\n", "", KindAlreadyExists},
		{"deleting a vnic a zone uses is busy", []string{"dladm", "delete-vnic", "web0"}, 1, "dladm: vnic deletion failed: link busy\n", "", KindBusy},
		{"deleting an etherstub with vnics is busy", []string{"dladm", "delete-etherstub", "stub0"}, 1, "dladm: etherstub deletion failed: link busy\n", "", KindBusy},
		{"show-vnic of a missing vnic is not found", []string{"dladm", "show-vnic", "web0"}, 1, "dladm: invalid vnic name 'web0': object not found\n", "", KindNotFound},
		{"show-link of a missing link is not found", []string{"dladm", "show-link", "web0"}, 1, "dladm: link web0 is not valid: object not found\n", "", KindNotFound},
		{"a bad VLAN id is invalid", []string{"dladm", "create-vnic", "-v", "5000", "-l", "net0", "web0"}, 1, "dladm: invalid VLAN identifier '5000'\n", "", KindInvalid},
		{"a bad MAC is invalid", []string{"dladm", "create-vnic", "-m", "zz", "-l", "net0", "web0"}, 1, "dladm: invalid MAC address\n", "", KindInvalid},
		{"delete-vnic of an etherstub is invalid", []string{"dladm", "delete-vnic", "stub0"}, 1, "dladm: 'stub0' is not a vnic\n", "", KindInvalid},
		{"-p without -o is invalid", []string{"dladm", "show-vnic", "-p"}, 1, "dladm: -p requires -o\n", "", KindInvalid},

		// zfs
		{"a missing dataset is not found", []string{"zfs", "destroy", "-r", "tank/x"}, 1, "cannot open 'tank/x': dataset does not exist\n", "", KindNotFound},
		{"a missing snapshot is not found", []string{"zfs", "destroy", "-r", "tank/x@s"}, 1, "could not find any snapshots to destroy; check snapshot names.\n", "", KindNotFound},
		{"creating an existing dataset already exists", []string{"zfs", "create", "tank/x"}, 1, "cannot create 'tank/x': dataset already exists\n", "", KindAlreadyExists},
		{"creating without the parent is not found", []string{"zfs", "create", "tank/a/b"}, 1, "cannot create 'tank/a/b': parent does not exist\n", "", KindNotFound},
		{"creating in a missing pool is not found", []string{"zfs", "create", "nopool/x"}, 1, "cannot create 'nopool/x': no such pool 'nopool'\n", "", KindNotFound},
		{"destroying with children is the wrong state", []string{"zfs", "destroy", "tank/x"}, 1, "cannot destroy 'tank/x': filesystem has children\nuse '-r' to destroy the following datasets:\ntank/x/y\n", "", KindWrongState},
		{"destroying a snapshot with clones is the wrong state", []string{"zfs", "destroy", "-r", "tank/x@s"}, 1, "cannot destroy 'tank/x@s': snapshot has dependent clones\nuse '-R' to destroy the following datasets:\ntank/c\n", "", KindWrongState},
		{"destroying a dataset a zone holds is busy", []string{"zfs", "destroy", "-r", "tank/x"}, 1, "cannot destroy 'tank/x': dataset is busy\n", "", KindBusy},
		{"unmounting a busy filesystem is busy", []string{"zfs", "unmount", "tank/x"}, 1, "cannot unmount '/tank/x': Device busy\n", "", KindBusy},
		{"a bad dataset name is invalid", []string{"zfs", "create", "x y"}, 1, "cannot create 'x y': invalid character ' ' in name\n", "", KindInvalid},
		{"a leading slash is invalid", []string{"zfs", "create", "/x"}, 1, "cannot create '/x': leading slash in name\n", "", KindInvalid},
		{"zfs usage errors are invalid", []string{"zfs", "frobnicate"}, 2, "unrecognized command 'frobnicate'\n", "", KindInvalid},

		// ipadm, through zlogin
		{"an existing interface already exists", zlogin("/usr/sbin/ipadm", "create-if", "web0"), 1, "ipadm: Could not create web0 : Interface already exists\n", "\n", KindAlreadyExists},
		{"an interface over a missing link is not found", zlogin("/usr/sbin/ipadm", "create-if", "web0"), 1, "ipadm: Could not create web0 : Datalink does not exist\n", "\n", KindNotFound},
		{"an existing address object already exists", zlogin("/usr/sbin/ipadm", "create-addr", "-T", "static", "-a", "10.0.0.5/24", "web0/v4"), 1, "ipadm: Could not create address: Address object already exists\n", "\n", KindAlreadyExists},
		{"a bad address object name is invalid", zlogin("/usr/sbin/ipadm", "delete-addr", "web0"), 1, "ipadm: invalid address object name: web0\n", "\n", KindInvalid},
		{"deleting a missing address is not found", zlogin("/usr/sbin/ipadm", "delete-addr", "web0/v4"), 1, "ipadm: could not delete address: Object not found\n", "\n", KindNotFound},
		{"showing a missing address is not found (new wording)", zlogin("/usr/sbin/ipadm", "show-addr", "web0/v4"), 1, "ipadm: Could not get address: Object not found\n", "\n", KindNotFound},
		{"showing a missing address is not found (old wording)", zlogin("/usr/sbin/ipadm", "show-addr", "web0/v4"), 1, "ipadm: Address object not found\n", "\n", KindNotFound},
		{"deleting a missing interface is not found", zlogin("/usr/sbin/ipadm", "delete-if", "web0"), 1, "ipadm: Could not delete web0: Interface does not exist\n", "\n", KindNotFound},

		// route: the errno is the exit status, the message is on stdout
		{"route exit 17 already exists", zlogin("/usr/sbin/route", "add", "default", "10.0.0.1"), 17, "", "add net default: gateway 10.0.0.1: entry exists\n", KindAlreadyExists},
		{"route exit 17 without text already exists", []string{"/usr/sbin/route", "add", "default", "10.0.0.1"}, 17, "", "", KindAlreadyExists},
		{"route exit 3 is not found", []string{"/usr/sbin/route", "delete", "default", "10.0.0.1"}, 3, "", "delete net default: not in table\n", KindNotFound},
		{"route exit 3 without text is not found", zlogin("'/usr/sbin/route'", "delete", "default", "10.0.0.1"), 3, "", "", KindNotFound},
		{"a persistent route already there already exists", zlogin("/usr/sbin/route", "-p", "add", "default", "10.0.0.1"), 1, "add persistent net default: gateway 10.0.0.1: entry exists\n", "add net default: gateway 10.0.0.1: entry exists\n", KindAlreadyExists},
		{"route without gateway is invalid", []string{"route", "add", "default"}, 1, "route: gateway required for add or delete command\n", "", KindInvalid},
		{"route over a missing interface is not found", []string{"route", "add", "default", "10.0.0.1", "-ifp", "x0"}, 1, "route: x0: no such interface\n", "", KindNotFound},
		{"an exit 3 of another command is not route's not found", []string{"zfs", "list"}, 3, "", "", KindUnknown},

		// ipnat
		{"a duplicate NAT rule already exists", []string{"ipnat", "-f", "-"}, 1, "1:ioctl(add/insert rule): File exists\n", "", KindAlreadyExists},
		{"an ipnat syntax error is invalid", []string{"ipnat", "-f", "-"}, 1, "ipnat: syntax error on line 1\n", "", KindInvalid},

		// SMF
		{"svcadm of an unknown service is not found", zlogin("/usr/sbin/svcadm", "enable", "svc:/x:default"), 1, "svcadm: Pattern 'svc:/x:default' doesn't match any instances\n", "", KindNotFound},
		{"svcs of an unknown service is not found", zlogin("/usr/bin/svcs", "-H", "svc:/x"), 1, "svcs: Pattern 'svc:/x' doesn't match any instances\n", "", KindNotFound},

		{"a MAC held by another link is busy", []string{"dladm", "create-vnic", "-m", "2:8:20:1:2:3", "-l", "net0", "web0"}, 1, "dladm: vnic creation over net0 failed: MAC address is already in use\n", "", KindBusy},
		{"an unknown brand is invalid", []string{"zonecfg", "-z", "web01", "-f", "-"}, 1, "On line 3:\nnosuch: unknown brand.\n", "", KindInvalid},
		{"an unknown zfs property is invalid", []string{"zfs", "create", "-o", "bogus=1", "tank/x"}, 1, "cannot create 'tank/x': invalid property 'bogus'\n", "", KindInvalid},
		{"an unreadable manifest is invalid", zlogin("svccfg", "import", "/dev/stdin"), 1, "svccfg: /dev/stdin: parse error\nsvccfg: Import of /dev/stdin failed.\n", "", KindInvalid},
		{"a service that went to maintenance is the wrong state", zlogin("svcadm", "enable", "-s", "svc:/x:default"), 3, "svcadm: Instance \"svc:/x:default\" has entered maintenance state.\n", "", KindWrongState},

		// contention and unavailability
		{"a zone lock held elsewhere is transient", []string{"zoneadm", "-z", "web01", "boot"}, 1, "zoneadm: zone 'web01': could not lock the zone: Resource temporarily unavailable\n", "", KindTransient},
		{"a dladm EAGAIN is transient", []string{"dladm", "create-vnic", "-l", "net0", "web0"}, 1, "dladm: create-vnic failed: resource temporarily unavailable\n", "", KindTransient},
		{"route exit 11 is transient", []string{"route", "-p", "add", "default", "10.0.0.1"}, 11, "", "add: Resource temporarily unavailable\n", KindTransient},
		{"an unavailable SMF repository is transient", zlogin("svcadm", "enable", "svc:/x:default"), 1, "svcadm: Could not bind to repository server: repository server unavailable.  Exiting.\n", "", KindTransient},
		{"zlogin failing to connect is transient", []string{"/usr/sbin/zlogin", "web01", "true"}, 1, "zlogin: could not connect to zone web01: Resource temporarily unavailable\n", "", KindTransient},

		// non-zero exits that say nothing useful
		{"an unexplained failure is unknown", []string{"zoneadm", "-z", "web01", "boot"}, 1, "zoneadm: zone 'web01': something odd\n", "", KindUnknown},
		{"exit 2 of a command in a zone is not a usage error", zlogin("/usr/bin/false"), 2, "", "", KindUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &ExecError{Argv: tt.argv, ExitCode: tt.exit, Stderr: tt.stderr, Stdout: tt.stdout}
			if got := Classify(e); got != tt.want {
				t.Errorf("Classify(%q) = %v, want %v", tt.stderr+tt.stdout, got, tt.want)
			}
			// The same verdict through the error chain callers see.
			wrapped := fmt.Errorf("activity: %w", opError("op", "subject", e))
			if got := KindOf(wrapped); got != tt.want {
				t.Errorf("KindOf = %v, want %v", got, tt.want)
			}
			if s := tt.want.sentinel(); s != nil && !errors.Is(wrapped, s) {
				t.Errorf("errors.Is(err, %v) = false", s)
			}
			for _, other := range []error{ErrNotFound, ErrAlreadyExists, ErrWrongState, ErrBusy, ErrInvalid, ErrTransient} {
				if other != tt.want.sentinel() && errors.Is(wrapped, other) {
					t.Errorf("errors.Is(err, %v) = true for a %v error", other, tt.want)
				}
			}
			var ee *ExecError
			if !errors.As(wrapped, &ee) || ee.Stderr != tt.stderr {
				t.Errorf("the ExecError with stderr is not in the chain")
			}
		})
	}
}

func TestClassifyHowTheCommandEnded(t *testing.T) {
	tests := []struct {
		name string
		e    *ExecError
		want Kind
	}{
		{"a command killed at its deadline is transient", &ExecError{Argv: []string{"zoneadm"}, ExitCode: -1, TimedOut: true, Err: context.DeadlineExceeded, Stderr: "zoneadm: zone 'x': No such zone configured"}, KindTransient},
		{"a command killed by a signal is transient", &ExecError{Argv: []string{"zfs"}, ExitCode: -1, Signaled: true}, KindTransient},
		{"a missing binary is invalid", &ExecError{Argv: []string{"/nope/zfs"}, ExitCode: -1, Err: &os.PathError{Op: "fork/exec", Path: "/nope/zfs", Err: os.ErrNotExist}}, KindInvalid},
		{"another start failure is transient", &ExecError{Argv: []string{"zfs"}, ExitCode: -1, Err: errors.New("resource temporarily unavailable")}, KindTransient},
		{"nil is unknown", nil, KindUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.e); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	if got := KindOf(nil); got != KindUnknown {
		t.Errorf("KindOf(nil) = %v", got)
	}
	if got := KindOf(fmt.Errorf("x: %w", context.DeadlineExceeded)); got != KindTransient {
		t.Errorf("KindOf(deadline) = %v, want transient", got)
	}
	if got := KindOf(errors.New("plain")); got != KindUnknown {
		t.Errorf("KindOf(plain) = %v, want unknown", got)
	}
	if got := KindOf(fmt.Errorf("wrapped: %w", ErrBusy)); got != KindBusy {
		t.Errorf("KindOf(ErrBusy) = %v, want busy", got)
	}
	// The outermost *Error decides, even when its cause would classify
	// differently (an operation may reinterpret a failure).
	inner := &ExecError{Argv: []string{"zfs"}, ExitCode: 1, Stderr: "cannot open 'a': dataset does not exist"}
	outer := &Error{Op: "x", Kind: KindInvalid, Err: inner}
	if got := KindOf(outer); got != KindInvalid {
		t.Errorf("KindOf(outer) = %v, want invalid", got)
	}
	if !IsRetryable(&Error{Kind: KindBusy}) || IsRetryable(&Error{Kind: KindInvalid}) || IsRetryable(&Error{Kind: KindNotFound}) {
		t.Error("IsRetryable disagrees with the kinds")
	}
}

func TestErrorMessageNamesOperationSubjectAndStderr(t *testing.T) {
	e := &ExecError{Argv: []string{"/usr/sbin/zoneadm", "-z", "web01", "boot"}, ExitCode: 1, Stderr: "zoneadm: zone 'web01': must be installed before boot.\n"}
	err := opError("zoneadm boot", "web01", e)
	want := `zoneadm boot web01: wrong state: "/usr/sbin/zoneadm -z web01 boot": exit status 1: zoneadm: zone 'web01': must be installed before boot.`
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}

func TestEffectiveCommand(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/sbin/zfs", "list"}, "zfs"},
		{[]string{"/usr/sbin/zlogin", "web01", "/usr/sbin/route", "-p", "add"}, "route"},
		{[]string{"/usr/sbin/zlogin", "-Q", "-l", "root", "web01", "'/usr/sbin/route'"}, "route"},
		{[]string{"/usr/sbin/zlogin", "web01"}, "zlogin"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := effectiveCommand(tt.argv); got != tt.want {
			t.Errorf("effectiveCommand(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}
