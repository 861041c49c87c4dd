package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/servicenat"
	"github.com/zonewright/zonewright/internal/servicenet"
)

// serviceNetPollSeconds is how long one long poll of the service network
// waits for a newer generation (the API answers 304 after it).
const serviceNetPollSeconds = 25

// serviceNATState is what the node reports in status.serviceNetwork.
type serviceNATState struct {
	mu     sync.Mutex
	status *model.NodeServiceNetwork // nil until a snapshot was applied
}

func (s *serviceNATState) get() *model.NodeServiceNetwork {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == nil {
		return nil
	}
	c := *s.status
	return &c
}

// set records st and reports whether it differs from what was recorded.
func (s *serviceNATState) set(st model.NodeServiceNetwork) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status != nil && s.status.Generation == st.Generation && s.status.Rules == st.Rules &&
		s.status.Missing == st.Missing && s.status.Message == st.Message {
		return false
	}
	s.status = &st
	return true
}

// programServiceNAT keeps the host's service rdr rules those of the
// control plane's newest service network snapshot, until ctx ends: it
// converges on each snapshot followServiceNet stores (signalled on newer),
// and every ServiceNATCheckInterval checks the host's rules again, so a
// wipe (`ipnat -CF`, an ipfilter refresh) is repaired within seconds. The
// last snapshot is kept: while the control plane is unreachable the node
// keeps, and repairs, the rules it has. Each generation fully in force is
// reported in the Node's status.serviceNetwork: report writes it (the
// agent passes writeServiceNetworkStatus).
func (a *Agent) programServiceNAT(ctx context.Context, newer <-chan struct{}, report func(context.Context)) {
	held := &a.serviceNet
	nat := a.host.Ipnat()
	nw := servicenat.Network{Interface: GatewayLink, PodCIDR: a.podCIDR}
	t := time.NewTicker(a.cfg.ServiceNATCheckInterval)
	defer t.Stop()
	var lastProblem string
	for {
		select {
		case <-ctx.Done():
			return
		case <-newer:
		case <-t.C:
		}
		snap := held.Load()
		if snap == nil {
			continue // nothing to program before the first snapshot
		}
		want := servicenat.Rules(snap, nw)
		res, err := servicenat.Converge(ctx, nat, want)
		problem := ""
		switch {
		case err != nil:
			problem = err.Error()
		case !res.Converged():
			problem = fmt.Sprintf("%d rules missing, %d obsolete rules left: %s", len(res.Missing), len(res.Leftover), ruleList(append(res.Missing, res.Leftover...)))
		}
		if problem != lastProblem && ctx.Err() == nil {
			if problem != "" {
				a.log.Warn("service NAT rules not in force; retrying", "generation", snap.Generation, "problem", problem)
			} else {
				a.log.Info("service NAT rules in force again", "generation", snap.Generation)
			}
			lastProblem = problem
		}
		if err != nil {
			continue
		}
		if res.Changed() {
			a.log.Info("service NAT rules converged", "generation", snap.Generation, "rules", len(want),
				"added", res.Added, "removed", res.Removed)
		}
		st := appliedStatus(a.serviceNAT.get(), snap.Generation, len(want), res, problem, time.Now().UTC())
		if a.serviceNAT.set(st) {
			report(ctx)
		}
	}
}

// appliedStatus is the node's service network status after converging to
// generation gen. The generation counts as applied once no obsolete rule
// is left: no traffic the snapshot took away still arrives (what a
// terminating pod waits for), even when the host refused some new rule
// (counted in Missing, told in Message, and tried again).
func appliedStatus(prev *model.NodeServiceNetwork, gen int64, rules int, res servicenat.Result, problem string, now time.Time) model.NodeServiceNetwork {
	st := model.NodeServiceNetwork{Rules: rules, Missing: len(res.Missing)}
	if prev != nil {
		st.Generation, st.AppliedTime = prev.Generation, prev.AppliedTime
	}
	if len(res.Leftover) == 0 && st.Generation != gen {
		st.Generation, st.AppliedTime = gen, &now
	}
	if !res.Converged() {
		st.Message = problem
	}
	return st
}

// ruleList renders at most three rules for a log line or message.
func ruleList(rules []illumos.NATRule) string {
	var parts []string
	for i, r := range rules {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(rules)-3))
			break
		}
		s, _ := r.Rule()
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// writeServiceNetworkStatus writes the Node's status at once, so the
// applied generation shows without waiting for a heartbeat. It leaves a
// node the control plane declared lost (or deleted) to the heartbeat,
// which cleans it first.
func (a *Agent) writeServiceNetworkStatus(ctx context.Context) {
	cur, err := a.api.GetNode(ctx)
	if err == nil && declaredLost(cur) {
		return
	}
	if err == nil {
		_, err = a.writeStatus(ctx, cur, a.latestSummary(ctx))
	}
	if err != nil && !nodeapi.IsNotFound(err) && ctx.Err() == nil {
		a.log.Warn("write the node's service network status; the next heartbeat writes it", "err", err)
	}
}

// followServiceNet long-polls the control plane for service network
// snapshots newer than the held one, stores each in a.serviceNet and signals
// newer, until ctx ends. Failures are retried with a growing pause (at
// most 5 s); the held snapshot stays meanwhile.
func (a *Agent) followServiceNet(ctx context.Context, newer chan<- struct{}) {
	held := &a.serviceNet
	client, base := a.api.HTTP(), a.api.BaseURL()
	pause, failing := time.Duration(0), false
	for ctx.Err() == nil {
		// At first the current snapshot, whatever its generation; then
		// the next newer one.
		url := base + "/api/v1/servicenet"
		if s := held.Load(); s != nil {
			url += fmt.Sprintf("?after=%d&timeoutSeconds=%d", s.Generation, serviceNetPollSeconds)
		}
		pctx, cancel := context.WithTimeout(ctx, (serviceNetPollSeconds+10)*time.Second)
		snap, err := fetchServiceNet(pctx, client, url)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				a.log.Warn("cannot follow the service network; keeping the rules of the last snapshot", "api", base, "err", err)
				failing = true
			}
			pause = min(max(2*pause, 250*time.Millisecond), 5*time.Second)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			continue
		}
		if failing {
			a.log.Info("following the service network again", "api", base)
			failing, pause = false, 0
		}
		if snap != nil && held.Store(snap) {
			select {
			case newer <- struct{}{}:
			default: // a signal is pending; the loop reads the newest
			}
		}
	}
}

// fetchServiceNet GETs one snapshot; nil, nil means 304 (none newer). A
// long poll answers within serviceNetPollSeconds: one that does not is
// given up.
func fetchServiceNet(ctx context.Context, client *http.Client, url string) (*servicenet.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, (serviceNetPollSeconds+10)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil, nil
	case http.StatusOK:
		var s servicenet.Snapshot
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			return nil, fmt.Errorf("decode the service network: %w", err)
		}
		return &s, nil
	}
	return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
}
