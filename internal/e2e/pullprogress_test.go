package e2e_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// A node's pull of an image shows how far it has got while the bytes go:
// in the image's status on that node and in the message of the pod that
// waits for it, which runs once the pull ends; the image's node status is
// then complete. The node's zfs receive reads at 512 KiB/s (the simulator's
// stream_rate), so the pull of a 24 MiB stream takes about 50 s, the
// server's send some 30 s of them past socket buffers: room for the
// pod's looks on a loaded machine. (Serve the
// artefact through c.Writer instead of the progressWriter in
// api.imageArtefact to see it fail: no bytesDone while Pulling.)
func TestImagePullShowsProgressPerNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	node := c.nodes.Nodes[0].Name
	big := make([]byte, 24<<20)
	rand.NewChaCha8([32]byte{7}).Read(big)
	stream := c.zfsStreamWith("pulled slowly\n", map[string][]byte{"big": big})
	files := newImageFiles(t)
	url, digest := files.add("slow", &served{body: stream})
	c.sim(0, "fault", "stream-rate", "zfs receive", "512K")
	c.createImage("lx-slow", model.ImageZFSStream, url, digest, "")
	c.createPod(`{"metadata":{"name":"slow-pull"},"spec":{"runtimeClassName":"lx",
	  "containers":[{"name":"app","image":"lx-slow","command":["sleep","3600"]}]}}`)

	c.eventually(2*time.Minute, "the pull part way in the image's status on "+node, func() bool {
		img, _ := c.image("lx-slow")
		ns, _ := img.Status.Node(node)
		return ns.Phase == model.ImagePulling && ns.BytesDone > 0 && ns.BytesDone < ns.BytesTotal && ns.BytesTotal == int64(len(stream))
	})
	waiting := regexp.MustCompile(`^pulling image lx-slow to node ` + regexp.QuoteMeta(node) + `: \d+\.\d MiB of 24\.\d MiB \((\d+)%\)$`)
	var msg string
	c.eventually(2*time.Minute, "the waiting pod's message to show the pull part way", func() bool {
		p, _ := c.pod("slow-pull")
		msg = p.Status.Message
		m := waiting.FindStringSubmatch(msg)
		return p.Status.Reason == podcontract.ReasonImagePulling && m != nil && m[1] != "100"
	})
	t.Logf("the waiting pod's message: %s", msg)

	c.waitPhase("slow-pull", model.PodRunning, true, 3*time.Minute)
	img := c.waitImage("lx-slow", model.ImageReady, c.allNodes(model.ImageReady), time.Minute)
	if ns, _ := img.Status.Node(node); ns.BytesDone != int64(len(stream)) || ns.BytesTotal != int64(len(stream)) {
		t.Errorf("the image Ready on %s: %+v, want %d of %d bytes", node, ns, len(stream), len(stream))
	}
	if p, _ := c.pod("slow-pull"); strings.Contains(p.Status.Message, "MiB of") {
		t.Errorf("the running pod still shows a pull: %q", p.Status.Message)
	}
}
