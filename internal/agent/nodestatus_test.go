package agent

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/fakes"
	"github.com/zonewright/zonewright/internal/simtest"
)

// A heartbeat counts the zones from the supervisor's last list when it
// is recent, and lists them itself only when it is not.
func TestSummaryTakesTheZonesTheSupervisorListed(t *testing.T) {
	host := &fakes.Executor{}
	host.On("zoneadm", func(illumos.Cmd) fakes.Reply {
		return fakes.Reply{Stdout: "0:global:running:/::ipkg:shared\n1:a:running:/zones/a:u1:sparse:excl\n"}
	})
	a := &Agent{cfg: Config{ZonesDataset: "tank/zonewright/zones", VolumesDataset: "tank/zonewright/volumes"},
		log: slog.New(slog.DiscardHandler), host: illumos.Host{Runner: host}}
	listed := func() bool {
		return slices.ContainsFunc(host.Argvs(), func(argv string) bool { return strings.Contains(argv, "zoneadm") })
	}

	observedAt := time.Now()
	a.observedZones = func() (map[string]string, time.Time) {
		return map[string]string{"global": "running", "a": "running", "b": "running", "c": "installed"}, observedAt
	}
	if s := a.summary(t.Context()); s.zones != "installed=1,running=2" || listed() {
		t.Errorf("summary with a recent observation: zones %q, commands %q", s.zones, host.Argvs())
	}

	observedAt = time.Now().Add(-time.Minute)
	if s := a.summary(t.Context()); s.zones != "running=1" || !listed() {
		t.Errorf("summary with an old observation: zones %q, commands %q", s.zones, host.Argvs())
	}
}

// recordingExecutor runs commands on a real host and keeps their argv.
type recordingExecutor struct {
	illumos.Executor
	mu    sync.Mutex
	argvs []string
}

func (r *recordingExecutor) Run(ctx context.Context, c illumos.Cmd) (illumos.Result, error) {
	r.mu.Lock()
	r.argvs = append(r.argvs, strings.Join(c.Argv(), " "))
	r.mu.Unlock()
	return r.Executor.Run(ctx, c)
}

// A heartbeat reads the space of the zones dataset, the images' pool and
// the volumes dataset with one zfs command, every 10 s: running
// `zfs get` once per dataset in summary (as it did) fails this test
// with 3 zfs commands.
func TestSummaryReadsTheSpaceWithOneZFSCommand(t *testing.T) {
	ctx := t.Context()
	node := simtest.NewNode(t, "node1")
	host := &recordingExecutor{Executor: &illumos.Runner{BinDir: node.Bin}}
	zfs := illumos.Host{Runner: host}.ZFS()
	for _, ds := range []string{"tank/zonewright", "tank/zonewright/zones", "tank/zonewright/images", "tank/zonewright/volumes"} {
		if err := zfs.Create(ctx, ds, nil); err != nil {
			t.Fatal(err)
		}
	}
	a := &Agent{cfg: Config{ZonesDataset: "tank/zonewright/zones", ImagesDataset: "tank/zonewright/images", VolumesDataset: "tank/zonewright/volumes"},
		log: slog.New(slog.DiscardHandler), host: illumos.Host{Runner: host}}
	a.observedZones = func() (map[string]string, time.Time) { return map[string]string{"global": "running"}, time.Now() }
	host.argvs = nil

	s := a.summary(ctx)
	var zfsRuns []string
	for _, argv := range host.argvs {
		if strings.Contains(argv, "/zfs ") {
			zfsRuns = append(zfsRuns, argv)
		}
	}
	if len(zfsRuns) != 1 {
		t.Errorf("a heartbeat ran %d zfs commands, want 1: %q", len(zfsRuns), zfsRuns)
	}

	// The values are each dataset's own, as zfs get of one dataset gives them.
	want := func(ds, prop string) int64 {
		v, err := zfs.Get(ctx, ds, prop)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	poolUsed, poolAvail := want("tank", "used"), want("tank", "available")
	if s.available != strconv.FormatInt(want("tank/zonewright/zones", "available"), 10) ||
		s.poolUsed != strconv.FormatInt(poolUsed, 10) || s.poolSize != strconv.FormatInt(poolUsed+poolAvail, 10) ||
		s.storage != want("tank/zonewright/volumes", "used")+want("tank/zonewright/volumes", "available") || s.storage == 0 {
		t.Errorf("summary = %+v", s)
	}

	// A dataset that is gone costs only its own figures.
	if err := zfs.Destroy(ctx, "tank/zonewright/volumes"); err != nil {
		t.Fatal(err)
	}
	if s := a.summary(ctx); s.storage != 0 || s.available == "" || s.poolSize == "" {
		t.Errorf("summary without the volumes dataset = %+v", s)
	}
}

// A heartbeat reads the host (zoneadm list, zfs get) once every
// hostReadBeats intervals and reports that reading in between, its zone
// counts taken again from the supervisor's list; a reading without the
// space is not kept. Calling summary in latestSummary every time fails
// this test with a zfs command a beat.
func TestHeartbeatsReadTheHostOnceAMinute(t *testing.T) {
	host := &fakes.Executor{}
	available := "1000"
	host.On("zfs", func(illumos.Cmd) fakes.Reply {
		if available == "" {
			return fakes.Reply{Stderr: "cannot open 'tank/zonewright/zones': dataset does not exist", ExitCode: 1}
		}
		return fakes.Reply{Stdout: "tank/zonewright/zones\tavailable\t" + available + "\ntank/zonewright/zones\tused\t5\n"}
	})
	a := &Agent{cfg: Config{ZonesDataset: "tank/zonewright/zones", ImagesDataset: "tank/zonewright/images",
		VolumesDataset: "tank/zonewright/volumes", HeartbeatInterval: time.Hour},
		log: slog.New(slog.DiscardHandler), host: illumos.Host{Runner: host}}
	observed := map[string]string{"global": "running", "a": "running"}
	a.observedZones = func() (map[string]string, time.Time) { return observed, time.Now() }
	reads := func() int {
		n := 0
		for _, argv := range host.Argvs() {
			if strings.Contains(argv, "zfs") {
				n++
			}
		}
		return n
	}

	if s := a.latestSummary(t.Context()); s.available != "1000" || s.zones != "running=1" || reads() != 1 {
		t.Fatalf("first beat: %+v after %d readings, want the space read once", s, reads())
	}
	available, observed = "2000", map[string]string{"global": "running", "a": "running", "b": "installed"}
	if s := a.latestSummary(t.Context()); s.available != "1000" || s.zones != "installed=1,running=1" || reads() != 1 {
		t.Errorf("next beat: %+v after %d readings, want the kept space and the supervisor's zones", s, reads())
	}

	// Due again (the interval passed), a failed reading is not kept.
	a.hostRead.at = time.Now().Add(-hostReadBeats * time.Hour)
	available = ""
	a.latestSummary(t.Context())
	available = "3000"
	if s := a.latestSummary(t.Context()); s.available != "3000" || reads() != 3 {
		t.Errorf("after a failed reading: %+v after %d readings, want the host read again", s, reads())
	}
}
