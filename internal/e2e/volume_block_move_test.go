package e2e_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// The guest's disk, as movingDiskGuest lays it out: "DONE" at 0 once
// 4 MiB of random data is written at 1 MiB; from 6 MiB one 32-byte
// slot per tenth of a second (its time modulo diskTickSlots) holding
// "<pod IP> <unix time in tenths of a second>".
const (
	diskBlobOff   = 1 << 20
	diskBlobLen   = 4 << 20
	diskTicksOff  = 6 << 20
	diskTickSlots = 4096
)

// movingDiskGuest is the command of a bhyve guest writing dev as laid
// out above: the blob once (a replacement finds it there), then a tick
// every 0.2 s.
func movingDiskGuest(dev string) string {
	return fmt.Sprintf(`d="%s"; [ "$(head -c 4 "$d")" = DONE ] || `+
		`{ head -c %d /dev/urandom | dd of="$d" bs=1048576 seek=1 conv=notrunc 2>/dev/null && printf DONE | dd of="$d" conv=notrunc 2>/dev/null; }; `+
		`while :; do s=$(( $(date +%%s%%N) / 100000000 )); printf '%%-31s\n' "$POD_IP $s" | dd of="$d" bs=32 seek=$((%d + s %% %d)) conv=notrunc 2>/dev/null; sleep 0.2; done`,
		dev, diskBlobLen, diskTicksOff/32, diskTickSlots)
}

// diskParts reads a guest's disk: the blob's sha256 and the ticks
// written, slot by slot.
func diskParts(t *testing.T, dev string) (blobSum string, ticks map[int]string) {
	t.Helper()
	b, err := os.ReadFile(dev)
	if err != nil || len(b) < diskTicksOff+diskTickSlots*32 {
		t.Fatalf("read the disk %s: %d bytes, %v", dev, len(b), err)
	}
	sum := sha256.Sum256(b[diskBlobOff : diskBlobOff+diskBlobLen])
	ticks = map[int]string{}
	for i := range diskTickSlots {
		slot := b[diskTicksOff+i*32 : diskTicksOff+(i+1)*32]
		if !bytes.Equal(slot, make([]byte, 32)) {
			ticks[i] = string(slot)
		}
	}
	return hex.EncodeToString(sum[:]), ticks
}

func countFrom(ticks map[int]string, ip string) int {
	n := 0
	for _, s := range ticks {
		if strings.HasPrefix(s, ip+" ") {
			n++
		}
	}
	return n
}

// Draining a node moves a bhyve pod's disk claim (a zvol) as it moves a
// filesystem: the volume's snapshot is sent while the guest runs, the
// blocks it wrote since follow once it stopped, and its replacement on
// the other node finds every byte; the old node's copy goes. An
// operator's move brings it back the same way.
func TestDrainMovesABhyvePodsDisk(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	files := newImageFiles(t)
	url, digest := files.add("vm", &served{body: randomBytes(1<<20, 9)})
	c.createImage("vm-disk", model.ImageBhyveDisk, url, digest, "")
	if code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"disk"},"spec":{"resources":{"requests":{"storage":"16Mi"}}}}`); code != http.StatusCreated {
		t.Fatalf("create claim: %d %s", code, b)
	}
	vol := "tank/zonewright/volumes/" + mustClaimUID(c, "disk")
	guestDev := "$ILLUMOS_SIM_ROOT/fs/dev/zvol/rdsk/" + vol
	dev := func(node int) string { return filepath.Join(c.nodes.Nodes[node].Root, "fs/dev/zvol/rdsk", vol) }
	t.Cleanup(func() {
		if t.Failed() {
			pvc, _ := c.claim("disk")
			b, _ := json.Marshal(pvc.Status)
			t.Logf("claim status: %s\nclaim events: %+v\npod events:\n%s", b, c.eventsOf(model.KindPersistentVolumeClaim, "disk"), c.events("vm"))
		}
	})

	c.waitImage("vm-disk", model.ImageReady, c.allNodes(model.ImageReady), 2*time.Minute)
	var pod map[string]any
	json.Unmarshal([]byte(bhyvePodBody(t, "vm", "disk", movingDiskGuest(guestDev), `[ "$(head -c 4 "`+guestDev+`")" = DONE ]`)), &pod)
	pod["spec"].(map[string]any)["terminationGracePeriodSeconds"] = 1
	body, _ := json.Marshal(pod)
	c.createPod(string(body))
	p := c.waitPhase("vm", model.PodRunning, true, 2*time.Minute)
	from, fromIP := p.Spec.NodeName, p.Status.PodIP
	fromIdx := c.nodeIndex(from)
	sum, ticksAtDrain := diskParts(t, dev(fromIdx))
	if len(ticksAtDrain) == 0 || countFrom(ticksAtDrain, fromIP) != len(ticksAtDrain) {
		t.Fatalf("the guest's ticks on %s: %v, want some from %s", from, ticksAtDrain, fromIP)
	}

	// The pre-copy's send waits 2 s, so the guest writes ticks after its
	// snapshot however fast the machine moves: the final increment must
	// carry them.
	c.sim(fromIdx, "fault", "latency", "zfs send", "2s")
	if code, b := c.do("POST", "/api/v1/nodes/"+from+"/drain", nil); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, b)
	}
	var to string
	c.eventually(3*time.Minute, "the disk claim on another node, its move ended", func() bool {
		pvc, _ := c.claim("disk")
		to = pvc.Status.NodeName
		return to != from && pvc.Status.Move == nil && pvc.Status.Phase == model.ClaimBound
	})
	c.sim(fromIdx, "fault", "clear")
	p = c.waitPhase("vm", model.PodRunning, true, 2*time.Minute)
	if p.Spec.NodeName != to {
		t.Fatalf("the pod runs on %s, its disk is on %s", p.Spec.NodeName, to)
	}
	toIdx := c.nodeIndex(to)
	gotSum, ticks := diskParts(t, dev(toIdx))
	if gotSum != sum {
		t.Fatalf("the 4 MiB the guest wrote have sha256 %s on %s, %s on %s", gotSum, to, sum, from)
	}
	for slot, s := range ticksAtDrain {
		if ticks[slot] != s {
			t.Fatalf("tick slot %d on %s holds %q, before the drain %q", slot, to, ticks[slot], s)
		}
	}
	// What the guest wrote while the move ran came too (what it wrote
	// after the pre-copy's snapshot, with the final increment).
	if n, before := countFrom(ticks, fromIP), len(ticksAtDrain); n <= before {
		t.Fatalf("the disk on %s holds %d ticks from %s, no more than at the drain (%d)", to, n, from, before)
	}
	if out, err := simZFS(c, toIdx, "get", "-Hp", "-o", "value", "type,volsize,zonewright:claim", vol); err != nil ||
		strings.Join(strings.Fields(out), " ") != "volume 16777216 default/disk" {
		t.Errorf("the moved volume: %q %v, want a 16 MiB volume named for its claim", out, err)
	}
	s, _ := c.state(toIdx)
	var zone string
	for _, z := range s.Zones {
		if z.Name != "global" {
			zone = z.Name
		}
	}
	if out, err := exec.Command(filepath.Join(c.nodes.Nodes[toIdx].BinDir, "zonecfg"), "-z", zone, "info", "device").Output(); err != nil ||
		!strings.Contains(string(out), "match: /dev/zvol/rdsk/"+vol) {
		t.Errorf("the new zone's devices: %q %v, want the moved zvol", out, err)
	}
	c.eventually(time.Minute, "one copy of the disk, on "+to, func() bool {
		_, err := os.Stat(dev(fromIdx))
		return !c.hasDataset(fromIdx, vol) && os.IsNotExist(err) && c.hasDataset(toIdx, vol)
	})
	for _, d := range s.Datasets {
		if strings.HasPrefix(d.Name, vol+"@move-") {
			c.eventually(30*time.Second, "the move's snapshots gone from "+to, func() bool { return !c.hasDataset(toIdx, d.Name) })
		}
	}
	if !c.hasEvent(model.KindPersistentVolumeClaim, "disk", "ClaimMoved", "from node "+from+" to node "+to) {
		t.Errorf("no ClaimMoved event: %+v", c.eventsOf(model.KindPersistentVolumeClaim, "disk"))
	}

	// An operator moves it back, without a drain. The node it leaves is
	// slow to destroy (as on a loaded machine): the guest runs again on
	// the destination before the move's snapshots there go, and they go
	// all the same.
	if code, b := c.do("POST", "/api/v1/nodes/"+from+"/uncordon", nil); code != http.StatusOK {
		t.Fatalf("uncordon: %d %s", code, b)
	}
	c.sim(toIdx, "fault", "latency", "zfs destroy", "10s")
	if code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims/disk/move", `{"nodeName":"`+from+`"}`); code != http.StatusAccepted {
		t.Fatalf("move the disk back: %d %s", code, b)
	}
	c.eventually(3*time.Minute, "the disk claim back on "+from+", its move ended", func() bool {
		pvc, _ := c.claim("disk")
		return pvc.Status.NodeName == from && pvc.Status.Move == nil
	})
	c.sim(toIdx, "fault", "clear")
	if p = c.waitPhase("vm", model.PodRunning, true, 2*time.Minute); p.Spec.NodeName != from {
		t.Fatalf("the pod runs on %s, its disk moved back to %s", p.Spec.NodeName, from)
	}
	if gotSum, _ := diskParts(t, dev(fromIdx)); gotSum != sum {
		t.Fatalf("moved back, the guest's 4 MiB have sha256 %s, first %s", gotSum, sum)
	}
	c.eventually(time.Minute, "one copy of the disk, on "+from, func() bool {
		return c.hasDataset(fromIdx, vol) && !c.hasDataset(toIdx, vol)
	})
}
