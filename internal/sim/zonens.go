package sim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// In isolation mode a zone's supervisor starts in mount and UTS
// namespaces of its own besides its network namespace (zoneCloneflags):
// there it binds the zone root's resolver files over the host's
// (zoneResolverFiles) and takes the zone's nodename as its hostname, and
// the zone's services, its children, see them. zlogin enters all three
// through nsenter(1): a multithreaded process such as this one cannot
// join a mount namespace itself.

// zoneCloneflags are the namespaces a zone's supervisor is born in.
const zoneCloneflags = syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS

// zoneResolverFiles are the files of the zone root bound over the host's
// in the zone's mount namespace, when both exist.
var zoneResolverFiles = []string{"etc/resolv.conf", "etc/hosts", "etc/nsswitch.conf"}

// setupZoneView runs in the supervisor at boot, in its own mount and UTS
// namespaces: the host's mounts stop propagating into the zone's (and
// the zone's out), the zone root's resolver files cover the host's, and
// the hostname is the zone's nodename.
func setupZoneView(root, nodename string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the zone's mounts private: %w", err)
	}
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the zone root: %w", err)
	}
	defer unix.Close(dir)
	for _, name := range zoneResolverFiles {
		if err := bindZoneFile(dir, name); err != nil {
			return err
		}
	}
	// Linux keeps 64 bytes of a hostname; illumos a nodename of 256.
	if len(nodename) > 64 {
		nodename = nodename[:64]
	}
	if err := unix.Sethostname([]byte(nodename)); err != nil {
		return fmt.Errorf("set the zone's hostname %q: %w", nodename, err)
	}
	// zlogin's commands start here (nsenter --wd): a directory opened
	// outside the namespace would be unreachable from inside it.
	if err := os.Chdir(root); err != nil {
		return fmt.Errorf("enter the zone root: %w", err)
	}
	return nil
}

// bindZoneFile binds the zone root's file name over /name. The file is
// opened without following any link, beneath the root, so a link the
// zone planted cannot put a host file in its place.
func bindZoneFile(dir int, name string) error {
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open the zone's %s: %w", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil // not a plain file: the zone keeps the host's
	}
	target := "/" + name
	if _, err := os.Stat(target); err != nil {
		return nil // nothing to cover
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the zone's %s over %s: %w", name, target, err)
	}
	return nil
}

// nsenterArgv is the simulator's own in-zone command argv run in zone
// z's network and UTS namespaces, in its working directory (the zone
// root). Those commands stand for illumos's, which see the host's pids
// (a zone's processes have host pids there) and signal the zone's
// supervisor, so they stay in the host's PID namespace; the zone's own
// commands are born of its init (zoneinit_spawn.go).
func nsenterArgv(z *Zone, argv []string) ([]string, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("isolation mode needs nsenter: %w", err)
	}
	return append([]string{nsenter, "--target", strconv.Itoa(z.SupervisorPID), "--uts", "--net", "--wd", "--"}, argv...), nil
}

// setupView gives the booting zone its resolver files and hostname
// (setupZoneView): its nodename, else its name.
func (sv *supervisor) setupView() error {
	z, err := sv.h.viewZone(sv.zone)
	if err != nil || z == nil {
		return fmt.Errorf("the zone's view: %w", err)
	}
	nodename := z.Nodename
	if nodename == "" {
		nodename = z.Name
	}
	return setupZoneView(sv.root, nodename)
}
