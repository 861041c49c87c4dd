package illumos_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
)

func TestZFSSendReceive(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	z := n.host.ZFS()
	must(t, "create the source", z.Create(ctx, "tank/src", map[string]string{"zonewright:sha256": "abc"}))
	if err := os.WriteFile(filepath.Join(n.sim.Root, "fs/tank/src/hello"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "snapshot", z.Snapshot(ctx, "tank/src", "v1"))
	var stream bytes.Buffer
	must(t, "send", z.Send(ctx, "tank/src@v1", &stream))
	must(t, "create the images dataset", z.Create(ctx, "tank/images", nil))

	must(t, "receive", z.Receive(ctx, "tank/images/a@base", bytes.NewReader(stream.Bytes()), illumos.ReceiveOptions{NoMount: true}))
	if ok, err := z.Exists(ctx, "tank/images/a@base"); err != nil || !ok {
		t.Errorf("received snapshot exists = %v, %v", ok, err)
	}
	if v, err := z.Get(ctx, "tank/images/a", "zonewright:sha256"); err != nil || v != "abc" {
		t.Errorf("received property = %q, %v", v, err)
	}
	if v, err := z.Get(ctx, "tank/images/a", "mounted"); err != nil || v != "no" {
		t.Errorf("received with -u: mounted = %q, %v", v, err)
	}

	wantKind(t, "receive onto an existing dataset", z.Receive(ctx, "tank/images/a", bytes.NewReader(stream.Bytes()), illumos.ReceiveOptions{}), illumos.ErrAlreadyExists)
	wantKind(t, "receive under a missing parent", z.Receive(ctx, "tank/nope/a", bytes.NewReader(stream.Bytes()), illumos.ReceiveOptions{}), illumos.ErrNotFound)
	wantKind(t, "receive garbage", z.Receive(ctx, "tank/images/b", bytes.NewReader([]byte("this is not a zfs stream")), illumos.ReceiveOptions{}), illumos.ErrInvalid)
	wantKind(t, "receive a truncated stream", z.Receive(ctx, "tank/images/b", bytes.NewReader(stream.Bytes()[:stream.Len()/2]), illumos.ReceiveOptions{}), illumos.ErrTransient)
	// A reader that fails midway (a dropped download) ends the stream early.
	broken := io.MultiReader(bytes.NewReader(stream.Bytes()[:stream.Len()/2]), &failingReader{})
	wantKind(t, "receive from a failing reader", z.Receive(ctx, "tank/images/b", broken, illumos.ReceiveOptions{}), illumos.ErrTransient)
	if ok, _ := z.Exists(ctx, "tank/images/b"); ok {
		t.Errorf("failed receives left tank/images/b")
	}
	wantKind(t, "send a filesystem", z.Send(ctx, "tank/src", io.Discard), illumos.ErrInvalid)
	wantKind(t, "send a missing snapshot", z.Send(ctx, "tank/src@nope", io.Discard), illumos.ErrNotFound)
}

type failingReader struct{}

func (*failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// A 64 MiB volume goes from zfs send through a pipe into zfs receive
// without either side holding it in memory.
func TestZFSStreamsLargeVolumeThroughAPipe(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	z := n.host.ZFS()
	const size = 64 << 20
	must(t, "create volume", z.CreateVolume(ctx, "tank/big", size, nil))
	dev := illumos.ZvolDevice(filepath.Join(n.sim.Root, "fs/dev/zvol/rdsk"), "tank/big")
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	must(t, "snapshot", z.Snapshot(ctx, "tank/big", "base"))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	counter := &countingWriter{w: pw}
	go func() { err := z.Send(ctx, "tank/big@base", counter); pw.CloseWithError(err); sent <- err }()
	must(t, "receive", z.Receive(ctx, "tank/copy", pr, illumos.ReceiveOptions{}))
	must(t, "send", <-sent)
	runtime.ReadMemStats(&after)
	if counter.n < size {
		t.Errorf("the stream was %d bytes, want at least %d", counter.n, size)
	}
	t.Logf("64 MiB volume sent and received through a pipe in %s; this process allocated %d KiB",
		time.Since(start).Round(time.Millisecond), (after.TotalAlloc-before.TotalAlloc)>>10)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("streaming 64 MiB allocated %d MiB: the stream was buffered", grew>>20)
	}
	want, _ := os.ReadFile(dev)
	got, err := os.ReadFile(illumos.ZvolDevice(filepath.Join(n.sim.Root, "fs/dev/zvol/rdsk"), "tank/copy"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("received volume differs from the sent one (err %v)", err)
	}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// A stream that stops coming is ended by the context's deadline: the
// command's process group is killed and Receive returns.
func TestZFSReceiveFromAStalledReaderEndsAtTheDeadline(t *testing.T) {
	n := newNode(t, "node1")
	z := n.host.ZFS()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go pw.Write([]byte("ILSIMZS1")) // then nothing more
	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := z.Receive(ctx, "tank/stalled", pr, illumos.ReceiveOptions{})
	var ee *illumos.ExecError
	if !errors.As(err, &ee) || !ee.TimedOut {
		t.Errorf("Receive from a stalled reader: %v, want a deadline kill", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("Receive returned %s after the deadline", took)
	}
	if ok, _ := z.Exists(ctxT(t), "tank/stalled"); ok {
		t.Errorf("a killed receive left tank/stalled")
	}
}

// A consumer that stops taking the stream ends Send at the deadline, and
// one that fails ends it at once.
func TestZFSSendToAStuckOrFailingWriter(t *testing.T) {
	n := newNode(t, "node1")
	z := n.host.ZFS()
	ctx := ctxT(t)
	must(t, "create volume", z.CreateVolume(ctx, "tank/v", 8<<20, nil))
	dev := illumos.ZvolDevice(filepath.Join(n.sim.Root, "fs/dev/zvol/rdsk"), "tank/v")
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	io.CopyN(f, rand.Reader, 8<<20) // more than a pipe holds
	f.Close()
	must(t, "snapshot", z.Snapshot(ctx, "tank/v", "s"))

	pr, pw := io.Pipe() // nobody reads pr
	t.Cleanup(func() { pr.Close() })
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	err = z.Send(dctx, "tank/v@s", pw)
	var ee *illumos.ExecError
	if !errors.As(err, &ee) || !ee.TimedOut {
		t.Errorf("Send to a stuck writer: %v, want a deadline kill", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("Send returned after %s", took)
	}

	start = time.Now()
	if err := z.Send(ctx, "tank/v@s", &failingWriter{}); err == nil {
		t.Errorf("Send to a failing writer succeeded")
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("Send to a failing writer returned after %s", took)
	}
}

type failingWriter struct{}

func (*failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestZFSSendIncremental(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	z := n.host.ZFS()
	file := func(ds, name string) string { return filepath.Join(n.sim.Root, "fs", ds, name) }
	must(t, "create the source", z.Create(ctx, "tank/src", nil))
	os.WriteFile(file("tank/src", "a"), []byte("one"), 0o644)
	must(t, "snapshot 1", z.Snapshot(ctx, "tank/src", "s1"))
	var full bytes.Buffer
	must(t, "send full", z.Send(ctx, "tank/src@s1", &full))
	must(t, "receive full", z.Receive(ctx, "tank/dst", &full, illumos.ReceiveOptions{}))
	os.WriteFile(file("tank/src", "a"), []byte("two"), 0o644)
	os.WriteFile(file("tank/src", "b"), []byte("new"), 0o644)
	must(t, "snapshot 2", z.Snapshot(ctx, "tank/src", "s2"))
	var inc bytes.Buffer
	must(t, "send incremental", z.SendIncremental(ctx, "@s1", "tank/src@s2", &inc))
	stream := inc.Bytes()
	must(t, "receive incremental", z.Receive(ctx, "tank/dst", bytes.NewReader(stream), illumos.ReceiveOptions{}))
	for name, want := range map[string]string{"a": "two", "b": "new"} {
		if b, _ := os.ReadFile(file("tank/dst", name)); string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
	}
	wantKind(t, "receive it again", z.Receive(ctx, "tank/dst", bytes.NewReader(stream), illumos.ReceiveOptions{}), illumos.ErrAlreadyExists)
	wantKind(t, "receive into a dataset without the source", z.Receive(ctx, "tank/src", bytes.NewReader(stream), illumos.ReceiveOptions{}), illumos.ErrAlreadyExists)
	must(t, "create another", z.Create(ctx, "tank/other", nil))
	wantKind(t, "receive into a dataset of other history", z.Receive(ctx, "tank/other", bytes.NewReader(stream), illumos.ReceiveOptions{}), illumos.ErrWrongState)
	wantKind(t, "send from a later snapshot", z.SendIncremental(ctx, "tank/src@s2", "tank/src@s1", io.Discard), illumos.ErrInvalid)
	wantKind(t, "send from a bad name", z.SendIncremental(ctx, "s1", "tank/src@s2", io.Discard), illumos.ErrInvalid)
}
