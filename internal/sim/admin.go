package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

var errNoRoot = errors.New("no state root: set " + EnvRoot +
	" or call the command through a directory made by 'illumos-sim install DIR --root ROOT'")

// resolveRoot finds the host's state root: $ILLUMOS_SIM_ROOT first, else
// the .illumos-sim-root file beside argv[0]. argv[0] is deliberately not
// symlink-resolved: the links of each simulated node live in their own
// directory and all point at the same binary.
func resolveRoot(argv0 string, env map[string]string) (string, error) {
	if r := env[EnvRoot]; r != "" {
		return filepath.Abs(r)
	}
	p := argv0
	if !strings.Contains(p, "/") {
		// Found through PATH: the shell passes the bare name.
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", errNoRoot
		}
		p = lp
	}
	dir := filepath.Dir(p)
	b, err := os.ReadFile(filepath.Join(dir, rootMarker))
	if err != nil {
		return "", errNoRoot
	}
	r := strings.TrimSpace(string(b))
	if r == "" {
		return "", errNoRoot
	}
	if !filepath.IsAbs(r) {
		r = filepath.Join(dir, r)
	}
	return filepath.Clean(r), nil
}

func adminUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: illumos-sim COMMAND [ARGS...]     act as an illumos command (%s)
       illumos-sim install DIR [--root ROOT]   link every command into DIR
       illumos-sim state [--root ROOT]         print the host's state as JSON
       illumos-sim stop-all [--root ROOT] [--at-once N]
                                               halt every zone (N at a time, default 16), kill what is left and the NAT daemon
       illumos-sim fault [--root ROOT] show|clear|latency|fail-next|probability|hang|unhang ...
`, strings.Join(CommandNames(), ", "))
}

// runAdmin runs the simulator's own subcommands.
func runAdmin(sub, argv0 string, args []string, stdin io.Reader, stdout, stderr io.Writer, env map[string]string) int {
	switch sub {
	case "install":
		return adminInstall(args, stdout, stderr)
	case "state":
		return withAdminHost("state", argv0, args, stderr, env, func(h *host, _ []string) int {
			return adminState(h, stdout, stderr)
		})
	case "stop-all":
		return withAdminHost("stop-all", argv0, args, stderr, env, func(h *host, rest []string) int {
			atOnce := stopAllAtOnce
			if len(rest) == 2 && rest[0] == "--at-once" {
				n, err := strconv.Atoi(rest[1])
				if err != nil || n < 1 {
					fmt.Fprintf(stderr, "illumos-sim stop-all: --at-once %q: want a number of zones, at least 1\n", rest[1])
					return 2
				}
				atOnce, rest = n, nil
			}
			if len(rest) > 0 {
				adminUsage(stderr)
				return 2
			}
			if err := stopAll(h, atOnce); err != nil {
				fmt.Fprintf(stderr, "illumos-sim stop-all: %v\n", err)
				return 1
			}
			return 0
		})
	case "fault":
		return withAdminHost("fault", argv0, args, stderr, env, func(h *host, rest []string) int {
			return adminFault(h, rest, stdout, stderr)
		})
	case "zoneadmd":
		return runSupervisor(args, stderr)
	case "natd":
		return runNatd(args, stderr)
	case "zoneinit":
		return runZoneInit()
	case "help", "-h", "--help":
		adminUsage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "illumos-sim: unknown command %q\n", sub)
	adminUsage(stderr)
	return 2
}

// withAdminHost resolves the root (an explicit --root first) and runs fn.
func withAdminHost(name, argv0 string, args []string, stderr io.Writer, env map[string]string,
	fn func(h *host, rest []string) int) int {
	root := ""
	var rest []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--root" && i+1 < len(args) {
			root = args[i+1]
			i++
			continue
		}
		if strings.HasPrefix(args[i], "--root=") {
			root = strings.TrimPrefix(args[i], "--root=")
			continue
		}
		rest = append(rest, args[i])
	}
	var err error
	if root == "" {
		root, err = resolveRoot(argv0, env)
	} else {
		root, err = filepath.Abs(root)
	}
	if err != nil {
		fmt.Fprintf(stderr, "illumos-sim %s: %v\n", name, err)
		return 1
	}
	h, err := openHost(root)
	if err != nil {
		fmt.Fprintf(stderr, "illumos-sim %s: %v\n", name, err)
		return 1
	}
	return fn(h, rest)
}

// adminInstall writes DIR/<command> symlinks to this binary and, with
// --root, the marker that makes those links find ROOT without any
// environment variable.
func adminInstall(args []string, stdout, stderr io.Writer) int {
	var dir, root string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--root" && i+1 < len(args):
			root = args[i+1]
			i++
		case strings.HasPrefix(args[i], "--root="):
			root = strings.TrimPrefix(args[i], "--root=")
		case dir == "" && !strings.HasPrefix(args[i], "-"):
			dir = args[i]
		default:
			fmt.Fprintf(stderr, "illumos-sim install: unexpected argument %q\n", args[i])
			return 2
		}
	}
	if dir == "" {
		fmt.Fprintln(stderr, "usage: illumos-sim install DIR [--root ROOT]")
		return 2
	}
	exe, err := selfExe()
	if err != nil {
		fmt.Fprintf(stderr, "illumos-sim install: %v\n", err)
		return 1
	}
	if err := linkCommands(dir, exe, CommandNames()); err != nil {
		fmt.Fprintf(stderr, "illumos-sim install: %v\n", err)
		return 1
	}
	if root != "" {
		abs, err := filepath.Abs(root)
		if err != nil {
			fmt.Fprintf(stderr, "illumos-sim install: %v\n", err)
			return 1
		}
		if err := writeFileAtomic(filepath.Join(dir, rootMarker), []byte(abs+"\n")); err != nil {
			fmt.Fprintf(stderr, "illumos-sim install: %v\n", err)
			return 1
		}
		// Opening the host materialises a new one, so its facts are
		// visible at once.
		if _, err := openHost(abs); err != nil {
			fmt.Fprintf(stderr, "illumos-sim install: %v\n", err)
			return 1
		}
	}
	return 0
}

// linkCommands (re)creates DIR/name -> exe for each name.
func linkCommands(dir, exe string, names []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if cur, err := os.Readlink(p); err == nil && cur == exe {
			continue
		}
		// A private temp name: concurrent callers may refresh the same links.
		tmp := fmt.Sprintf("%s.tmp-%d-%x", p, os.Getpid(), randomBytes(4))
		if err := os.Symlink(exe, tmp); err != nil {
			return fmt.Errorf("link %s: %w", p, err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("link %s: %w", p, err)
		}
	}
	return nil
}

// selfExe is the simulator binary itself (symlinks resolved), for links and
// for re-executing as a zone supervisor.
func selfExe() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return exe, nil
}

func adminState(h *host, stdout, stderr io.Writer) int {
	var out []byte
	var encErr error
	err := h.view(func(st *State) {
		st.Zones = st.zones()
		st.NAT = h.natStacks()
		out, encErr = json.MarshalIndent(st, "", "  ")
	})
	if err == nil {
		err = encErr
	}
	if err != nil {
		fmt.Fprintf(stderr, "illumos-sim state: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}
