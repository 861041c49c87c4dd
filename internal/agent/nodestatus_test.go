package agent

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/fakes"
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
