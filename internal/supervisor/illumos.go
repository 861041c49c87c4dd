package supervisor

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos"
)

// exitRecordDir is where a container's wrapper leaves its command's exit
// status, relative to the root of the zone (the method's working
// directory, "/").
const exitRecordDir = "var/zonewright/exit"

// ExitStatusWrapper is the start method that runs a container's argv and
// records how it ended (removing the record of the incarnation before): the command runs as a child of the shell, which
// passes SIGTERM on and waits for it (so a grace period lasts as long as
// the command does), writes its exit status to the zone, and then exits
// with SMF_EXIT_ERR_CONFIG (96) so SMF does not restart it: whether and
// when it restarts is the pod's lifecycle's decision. The service's
// working directory must be "/"; the command's own, workDir, is entered
// from there (empty: "/").
//
// The trap is set only once the command runs: a trap set before the fork
// would be inherited by the child until it reaches the command, and a
// SIGTERM landing there (SMF stopping a service that has only just
// started) would be caught and lost, leaving the command running. Before
// the trap, SIGTERM ends the shell and the command alike.
func ExitStatusWrapper(container, workDir string, argv []string) []string {
	rec := exitRecordDir + "/" + container
	// The command starts in its working directory, entered from the
	// zone's root where the wrapper starts and keeps the record, as a
	// relative path: the record must be where ExitCode reads it whatever
	// directory the command wants.
	run := `"$@" &`
	if d := strings.TrimLeft(path.Clean("/"+workDir), "/"); d != "" {
		run = `(cd ` + illumos.ShellQuote("./"+d) + ` && exec "$@") &`
	}
	// The record of an earlier incarnation goes first: one that ends
	// without writing its own (SIGKILLed, say) must not be reported with
	// the code of the one before.
	script := `rm -f ` + rec + `; ` + run + ` c=$!; trap 'kill -TERM $c 2>/dev/null' TERM; ` +
		`while :; do wait $c; s=$?; kill -0 $c 2>/dev/null || break; done; ` +
		`mkdir -p ` + exitRecordDir + ` && echo "$s" > ` + rec + `.new && mv -f ` + rec + `.new ` + rec + `; exit 96`
	// exec: the wrapper replaces the method's shell, so it is the
	// service's process and SIGTERM reaches it.
	return append([]string{"exec", "/bin/sh", "-c", script, "sh"}, argv...)
}

// IllumosHost observes a node through the illumos commands.
type IllumosHost struct{ Host illumos.Host }

// Zones lists every zone's state with one zoneadm list -cp.
func (h IllumosHost) Zones(ctx context.Context) (map[string]string, error) {
	zones, err := h.Host.Zoneadm().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(zones))
	for _, z := range zones {
		out[z.Name] = string(z.State)
	}
	return out, nil
}

// Services lists every running zone's services with one svcs -Z.
func (h IllumosHost) Services(ctx context.Context) (map[string]map[string]ServiceState, error) {
	rows, err := h.Host.AllZoneServices(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]ServiceState{}
	for _, r := range rows {
		if out[r.Zone] == nil {
			out[r.Zone] = map[string]ServiceState{}
		}
		out[r.Zone][r.FMRI] = ServiceState{State: r.State, Transitioning: r.Transitioning}
	}
	return out, nil
}

// OpenExitRecords is the command (run as the zone's root) that lets
// wrappers running as other users of the zone keep their records: the
// directory becomes writable by all and sticky, as /tmp. The paths are
// ExitCode's.
func OpenExitRecords() []string {
	open := func(dir string) string { return "mkdir -p " + dir + " && chmod 1777 " + dir }
	return []string{"sh", "-c", open("/"+exitRecordDir) + " 2>/dev/null || { " + open(exitRecordDir) + "; }"}
}

// ExitCode reads the status the container's wrapper recorded. The record
// is read by its path in the zone, then relative to the directory zlogin
// starts in, which is the zone's root where the zone's root is not "/".
func (h IllumosHost) ExitCode(ctx context.Context, zone, container string) (int32, bool, error) {
	rec := exitRecordDir + "/" + container
	res, err := h.Host.Zone(zone).Exec(ctx, []string{"sh", "-c", "cat /" + rec + " 2>/dev/null || cat " + rec}, nil)
	if err != nil {
		return 0, false, err
	}
	if res.ExitCode != 0 {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 32)
	if err != nil {
		return 0, false, nil
	}
	return int32(n), true, nil
}

// ForgetExit removes the status the container's last incarnation
// recorded, before it is started again: until SMF acts on the restart,
// its service still shows that incarnation's maintenance, and the record
// must not be read as the new one's. The paths are ExitCode's.
func (h IllumosHost) ForgetExit(ctx context.Context, zone, container string) error {
	rec := exitRecordDir + "/" + container
	res, err := h.Host.Zone(zone).Exec(ctx, []string{"rm", "-f", "/" + rec, rec}, nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("remove the exit record of container %s: %s", container, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// Exec runs argv in the zone through zlogin.
func (h IllumosHost) Exec(ctx context.Context, zone, user string, argv []string) (int, string, error) {
	z := h.Host.Zone(zone)
	z.User = user
	res, err := z.Exec(ctx, argv, nil)
	if err != nil {
		return 0, "", err
	}
	out := string(res.Stderr)
	if strings.TrimSpace(out) == "" {
		out = string(res.Stdout)
	}
	return res.ExitCode, out, nil
}
