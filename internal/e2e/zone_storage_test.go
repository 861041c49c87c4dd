package e2e_test

import (
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// skipUnlessMachineRoot skips a test of what the simulator enforces
// only as the machine's root (quotas, mount options).
func skipUnlessMachineRoot(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/uid_map")
	f := strings.Fields(string(b))
	if err != nil || os.Geteuid() != 0 || len(f) != 3 || f[0] != "0" || f[1] != "0" || f[2] != "4294967295" {
		t.Skip("illumos-sim enforces quotas and mount options only as the machine's root")
	}
}

// writeMiB is a shell command writing n MiB of x into file, then
// printing "wrote" if that worked.
func writeMiB(file string, n int) string {
	return "head -c " + strconv.Itoa(n<<20) + " /dev/zero | tr '\\0' x > " + file + " && echo wrote"
}

// A pod cannot fill its node's disk: its ephemeral-storage limit (8Mi)
// is its zone dataset's quota, and a 20 MiB write into its zone fails
// there, while a pod beside it without a limit writes 20 MiB and the
// node's own files take more.
//
// Make realiseStorage (internal/sim/zfs_backing.go) return nil at once
// and rebuild bin/illumos-sim to see it fail: the bounded pod writes
// all 20 MiB.
func TestAPodCannotWritePastItsEphemeralStorage(t *testing.T) {
	skipUnlessMachineRoot(t)
	t.Parallel()
	t.Run("shared", func(t *testing.T) { t.Parallel(); writePastEphemeralStorage(t, newCluster(t, 1)) })
	// The zone sees its zonepath through its own mount namespace.
	t.Run("isolated", func(t *testing.T) { t.Parallel(); writePastEphemeralStorage(t, newIsolatedCluster(t, 1)) })
}

func writePastEphemeralStorage(t *testing.T, c *cluster) {
	c.createPod(`{"metadata":{"name":"bounded"},"spec":{"containers":[{"name":"app","image":"base","command":["sh","-c","exec sleep 1000"],
		"resources":{"limits":{"ephemeral-storage":"8Mi"}}}]}}`)
	c.createPod(`{"metadata":{"name":"free"},"spec":{"containers":[{"name":"app","image":"base","command":["sh","-c","exec sleep 1000"]}]}}`)
	c.waitPhase("bounded", model.PodRunning, false, 90*time.Second)
	p := c.waitPhase("free", model.PodRunning, false, 90*time.Second)

	out, errOut, _ := execAs(t, c, c.http, "/api/v1/namespaces/default/pods/bounded", "sh", "-c", writeMiB("big", 20))
	if strings.Contains(out, "wrote") || !strings.Contains(errOut, "No space left on device") && !strings.Contains(errOut, "quota exceeded") {
		t.Errorf("a pod limited to 8Mi writing 20 MiB: stdout %q stderr %q, want the write to fail", out, errOut)
	}
	out, errOut, _ = execAs(t, c, c.http, "/api/v1/namespaces/default/pods/free", "sh", "-c", writeMiB("big", 20))
	if !strings.Contains(out, "wrote") {
		t.Errorf("a pod without a limit writing 20 MiB: stdout %q stderr %q", out, errOut)
	}
	host := filepath.Join(c.nodes.Nodes[c.nodeIndex(p.Spec.NodeName)].Root, "host-file")
	if err := os.WriteFile(host, make([]byte, 32<<20), 0o600); err != nil {
		t.Errorf("the node's own files after the bounded pod filled its zone: %v", err)
	}
	os.Remove(host)
}

// A pod cannot hand the node's users its rights: it copies id(1) into
// its claim, makes it setuid (its own uid) and opens the claim to all,
// but a host user running it from the claim's directory in the global
// zone stays itself, since claims are mounted setuid=off.
//
// Drop unix.MS_NOSUID from mountFlags (internal/sim/zfs_backing.go) and
// rebuild bin/illumos-sim to see it fail: the host user's euid is the
// zone's.
func TestASetuidFileInAClaimGivesAHostUserNothing(t *testing.T) {
	skipUnlessMachineRoot(t)
	u, err := user.Lookup("zonewright-test")
	if err != nil {
		t.Skip("no user zonewright-test to play the host user")
	}
	t.Parallel()
	c := newCluster(t, 1)
	if code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"data"},"spec":{"resources":{"requests":{"storage":"16Mi"}}}}`); code != http.StatusCreated {
		t.Fatalf("create claim: %d %s", code, b)
	}
	c.createPod(`{"metadata":{"name":"planter"},"spec":{
		"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data"}}],
		"containers":[{"name":"app","image":"base","command":["sh","-c","cp /usr/bin/id data/id && chmod 4755 data/id && chmod 755 data && exec sleep 1000"],
			"volumeMounts":[{"name":"data","mountPath":"/data"}]}]}}`)
	p := c.waitPhase("planter", model.PodRunning, false, 90*time.Second)
	id := filepath.Join(c.nodes.Nodes[c.nodeIndex(p.Spec.NodeName)].Root, "fs/tank/zonewright/volumes", mustClaimUID(c, "data"), "id")
	var zoneUID uint32
	c.eventually(30*time.Second, "the pod's setuid id(1) in its claim", func() bool {
		fi, err := os.Stat(id)
		if err != nil || fi.Mode()&os.ModeSetuid == 0 {
			return false
		}
		zoneUID = fi.Sys().(*syscall.Stat_t).Uid
		return true
	})
	if strconv.Itoa(int(zoneUID)) == u.Uid || zoneUID == 0 {
		t.Fatalf("the planted file belongs to uid %d, not to a zone's user of its own", zoneUID)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd := exec.Command(id, "-u")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s as %s: %v\n%s", id, u.Username, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != u.Uid {
		t.Errorf("the host user ran the pod's setuid file with euid %s, want its own %s (the zone's is %d)", got, u.Uid, zoneUID)
	}
}
