package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/store"
)

// HeartbeatResults compare what node heartbeats cost, per 1,000 nodes per
// minute at the default 10 s interval: the way agents heartbeated first
// (each one an update of the Node row through the change feed), then (the
// Node read, found unchanged, its lease renewed) and now (the lease
// renewed while the Node is at the version the agent last saw).
type HeartbeatResults struct {
	Nodes         int           `json:"nodes"`
	Rounds        int           `json:"rounds"`
	NodeRow       HeartbeatCost `json:"nodeRow"`
	NodeReadLease HeartbeatCost `json:"nodeReadLease"`
	Lease         HeartbeatCost `json:"lease"`
}

// HeartbeatCost is one way's writes per 1,000 nodes per minute.
type HeartbeatCost struct {
	// ChangeFeedRows are rows added to the change feed (each one a full
	// copy of the object, a NOTIFY, and an event to every node watcher).
	ChangeFeedRows float64 `json:"changeFeedRows"`
	// RowsWritten are rows inserted, updated or deleted in every table.
	RowsWritten float64 `json:"rowsWritten"`
	// WALBytes is the write-ahead log written.
	WALBytes float64 `json:"walBytes"`
	// CPUMsPerBeat is the CPU a heartbeat costs the API, PostgreSQL and
	// the node's side of the calls (not the host commands a node runs
	// for its status: those are the simulator's BenchmarkCommands).
	CPUMsPerBeat float64 `json:"cpuMsPerBeat"`
}

// heartbeatsPerMinute is 1,000 nodes heartbeating every 10 s.
const heartbeatsPerMinute = 1000 * 60 / 10

// heartbeatSection registers nodes through the API on a private
// PostgreSQL and runs rounds of heartbeats both ways.
func heartbeatSection(ctx context.Context, nodes, rounds int, log *slog.Logger) (*HeartbeatResults, error) {
	st, done, err := privateStore(ctx, "heartbeat", log)
	if err != nil {
		return nil, err
	}
	defer done()
	hs := httptest.NewServer(api.New(api.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	defer hs.Close()
	// The nodes' requests go as a cluster-admin's: what they write is
	// measured, not who may write it.
	token, _, err := (&auth.Tokens{Pool: st.Pool()}).Issue(ctx, auth.RoleClusterAdmin, "", time.Hour)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: auth.Bearer{Token: token, Next: hs.Client().Transport}}

	clients := make([]*nodeapi.Client, nodes)
	for i := range clients {
		clients[i] = nodeapi.New(hc, hs.URL, fmt.Sprintf("node-%d", i))
		now := time.Now().UTC()
		n := &model.Node{Status: model.NodeStatus{Capacity: model.ResourceList{"cpu": "8"},
			Conditions: []model.NodeCondition{{Type: model.NodeReady, Status: model.ConditionTrue, Reason: "AgentReady", LastHeartbeatTime: &now}}}}
		if _, err := clients[i].PutStatus(ctx, n); err != nil {
			return nil, fmt.Errorf("register node-%d: %w", i, err)
		}
	}
	res := &HeartbeatResults{Nodes: nodes, Rounds: rounds}
	// First: what the agent did with the database every interval — read
	// the Node (was it declared lost?), read it again, set the Ready
	// condition's heartbeat time, update it.
	if res.NodeRow, err = measureHeartbeats(ctx, st, nodes*rounds, func() error {
		for range rounds {
			for i := range nodes {
				name := fmt.Sprintf("node-%d", i)
				if _, err := st.Nodes().Get(ctx, "", name); err != nil {
					return err
				}
				if _, err := st.Nodes().Modify(ctx, "", name, func(n *model.Node) bool {
					now := time.Now().UTC()
					model.SetCondition(&n.Status.Conditions, model.NodeCondition{Type: model.NodeReady, Status: model.ConditionTrue,
						Reason: "AgentReady", LastHeartbeatTime: &now}, now)
					return true
				}); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Then: the agent read its Node through the API, found nothing
	// changed, and renewed its lease: two requests.
	versions := make([]string, nodes)
	if res.NodeReadLease, err = measureHeartbeats(ctx, st, nodes*rounds, func() error {
		for range rounds {
			for i, c := range clients {
				n, err := c.GetNode(ctx)
				if err != nil {
					return err
				}
				if _, err := c.RenewLease(ctx, c.Node(), 40*time.Second, ""); err != nil {
					return err
				}
				versions[i] = n.Metadata.ResourceVersion
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Now: one request, the lease renewed while the Node is still the
	// version the agent last saw.
	if res.Lease, err = measureHeartbeats(ctx, st, nodes*rounds, func() error {
		for range rounds {
			for i, c := range clients {
				l, err := c.RenewLease(ctx, c.Node(), 40*time.Second, versions[i])
				if err != nil {
					return err
				}
				if l.NodeVersion() != versions[i] {
					return fmt.Errorf("node-%d: the renewal answered version %q, want %q", i, l.NodeVersion(), versions[i])
				}
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return res, nil
}

// measureHeartbeats runs beats heartbeats and scales what they wrote to
// 1,000 nodes per minute.
func measureHeartbeats(ctx context.Context, st *store.Store, beats int, run func() error) (HeartbeatCost, error) {
	before, err := writeCounters(ctx, st)
	if err != nil {
		return HeartbeatCost{}, err
	}
	cpu0, err := sectionCPU()
	if err != nil {
		return HeartbeatCost{}, err
	}
	if err := run(); err != nil {
		return HeartbeatCost{}, err
	}
	cpu1, err := sectionCPU()
	if err != nil {
		return HeartbeatCost{}, err
	}
	after, err := writeCounters(ctx, st)
	if err != nil {
		return HeartbeatCost{}, err
	}
	scale := float64(heartbeatsPerMinute) / float64(beats)
	return HeartbeatCost{
		ChangeFeedRows: scale * float64(after.changes-before.changes),
		RowsWritten:    scale * float64(after.rows-before.rows),
		WALBytes:       scale * float64(after.wal-before.wal),
		CPUMsPerBeat:   float64((cpu1 - cpu0).Microseconds()) / 1000 / float64(beats),
	}, nil
}

// sectionCPU is the CPU time of this process and of its descendants, live
// and reaped: the API, the nodes' clients and PostgreSQL, as the section
// runs before any stack.
func sectionCPU() (time.Duration, error) {
	u, err := rusage()
	if err != nil {
		return 0, err
	}
	self, procs := os.Getpid(), processTable()
	var ticks int64
	for p, pr := range procs {
		for q := pr.ppid; p != self && q > 1; q = procs[q].ppid {
			if q == self {
				ticks += pr.ticks()
				break
			}
			if _, ok := procs[q]; !ok {
				break
			}
		}
	}
	return u.self + u.children + time.Duration(ticks)*time.Second/clockTicks, nil
}

// heartbeatTargetNodes heartbeating every 10 s should cost at most
// heartbeatTargetPercent of a core.
const (
	heartbeatTargetNodes   = 50
	heartbeatTargetPercent = 1.0
)

// percentOfACore is what n nodes' heartbeats every 10 s cost at cpuMs a
// beat, in % of one core.
func percentOfACore(cpuMs float64, n int) float64 { return cpuMs * float64(n) / 10 / 1000 * 100 }

type counters struct{ changes, rows, wal int64 }

// writeCounters reads the change feed's length, the rows written in every
// table (the statistics of every backend, flushed first) and the WAL
// position.
func writeCounters(ctx context.Context, st *store.Store) (counters, error) {
	var c counters
	// Backends flush their table statistics when idle, at most once a
	// second.
	time.Sleep(1500 * time.Millisecond)
	pool := st.Pool()
	if _, err := pool.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return c, err
	}
	err := errors.Join(
		pool.QueryRow(ctx, "SELECT count(*) FROM changes").Scan(&c.changes),
		pool.QueryRow(ctx, "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables").Scan(&c.rows),
		pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&c.wal),
	)
	return c, err
}

func (r *HeartbeatResults) print(w io.Writer) {
	fmt.Fprintf(w, "\nnode heartbeats: writes per 1,000 nodes per minute at a 10 s interval (%d nodes × %d rounds measured)\n", r.Nodes, r.Rounds)
	fmt.Fprintf(w, "  %-36s %14s %14s %14s %12s\n", "", "change feed", "rows written", "WAL", "CPU a beat")
	for _, row := range []struct {
		name string
		c    HeartbeatCost
	}{{"Node row each heartbeat (first)", r.NodeRow}, {"Node read, lease renewed (then)", r.NodeReadLease},
		{"lease checked against the Node (now)", r.Lease}} {
		fmt.Fprintf(w, "  %-36s %14.0f %14.0f %11.1f MB %9.2f ms\n", row.name, row.c.ChangeFeedRows, row.c.RowsWritten, row.c.WALBytes/1e6, row.c.CPUMsPerBeat)
	}
	pct := percentOfACore(r.Lease.CPUMsPerBeat, heartbeatTargetNodes)
	fmt.Fprintf(w, "  %d nodes' leases every 10 s: %.2f%% of a core (API, PostgreSQL and the nodes' calls; target ≤ %.0f%%: %s)\n",
		heartbeatTargetNodes, pct, heartbeatTargetPercent, verdict(pct <= heartbeatTargetPercent))
}
