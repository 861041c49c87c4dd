package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// faultKinds are the kinds of events the chaos draws from, with the
// counts the report shows.
const (
	faultFailures = "command failures"
	faultLatency  = "command latency"
)

// chaos kills processes and injects host faults at random moments (a gap
// of minGap to maxGap between two events) until ctx ends, then clears
// every fault. counts counts events by kind.
type chaos struct {
	s              *stack
	rng            *rand.Rand
	minGap, maxGap time.Duration

	mu     sync.Mutex
	counts map[string]int
	events []string
}

func (c *chaos) record(kind, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[kind]++
	c.events = append(c.events, fmt.Sprintf("%s %s", time.Now().Format("15:04:05"), what))
	c.s.log.Warn("chaos: " + what)
}

// eventKinds is how many kinds of events run draws from.
const eventKinds = 7

func (c *chaos) run(ctx context.Context) {
	var faults sync.WaitGroup
	defer faults.Wait()
	// The first events are every kind once, in a seeded order, so that
	// even a short run crashes every process; then kinds at random,
	// agents and API replicas twice as often.
	tour := c.rng.Perm(eventKinds)
	for n := 0; ; n++ {
		gap := c.minGap + time.Duration(c.rng.Int64N(int64(c.maxGap-c.minGap)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		kind := c.rng.IntN(eventKinds + 1)
		if n < len(tour) {
			kind = tour[n]
		}
		switch kind {
		case 0, eventKinds:
			i := c.rng.IntN(len(c.s.Nodes.Nodes))
			c.record(kindAgent, "SIGKILL agent "+c.s.Nodes.Nodes[i].Name)
			c.s.Nodes.Kill(i)
		case 1, 2:
			i := c.rng.IntN(len(c.s.Replicas))
			c.record(kindServe, "SIGKILL "+c.s.Replicas[i].Name)
			c.s.Replicas[i].Kill()
		case 3:
			c.record(kindTemporal, "SIGKILL the Temporal server")
			c.s.TemporalProcess.Kill()
		case 4:
			hard := c.rng.IntN(2) == 0
			how := "fast stop"
			if hard {
				how = "SIGKILL"
			}
			c.record(kindPostgres, "restart PostgreSQL ("+how+")")
			if err := c.s.RestartPostgres(context.WithoutCancel(ctx), hard); err != nil {
				c.s.log.Error("chaos: PostgreSQL did not come back", "err", err)
			}
		case 5:
			i := c.rng.IntN(len(c.s.Nodes.Nodes))
			p := 0.1 + 0.2*c.rng.Float64()
			c.record(faultFailures, fmt.Sprintf("%s: %.0f%% of zfs, dladm, zoneadm, zonecfg, zlogin commands fail for 20s", c.s.Nodes.Nodes[i].Name, p*100))
			c.fault(ctx, &faults, i, 20*time.Second, func(cmd string) []string {
				return []string{"fault", "probability", cmd, fmt.Sprintf("%.2f", p)}
			})
		case 6:
			i := c.rng.IntN(len(c.s.Nodes.Nodes))
			d := time.Duration(200+c.rng.IntN(1800)) * time.Millisecond
			c.record(faultLatency, fmt.Sprintf("%s: %s added to zfs, dladm, zoneadm, zonecfg, zlogin commands for 20s", c.s.Nodes.Nodes[i].Name, d))
			c.fault(ctx, &faults, i, 20*time.Second, func(cmd string) []string {
				return []string{"fault", "latency", cmd, d.String()}
			})
		}
	}
}

var faultCommands = []string{"zfs", "dladm", "zoneadm", "zonecfg", "zlogin"}

// fault sets a rule on node i's simulator for d, then clears it (at the
// latest when the chaos ends).
func (c *chaos) fault(ctx context.Context, wg *sync.WaitGroup, i int, d time.Duration, rule func(cmd string) []string) {
	bg := context.WithoutCancel(ctx)
	for _, cmd := range faultCommands {
		if _, err := c.s.simCmd(bg, i, rule(cmd)...); err != nil {
			c.s.log.Error("chaos: set a fault", "err", err)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
		for _, cmd := range faultCommands {
			if _, err := c.s.simCmd(bg, i, "fault", "clear", cmd); err != nil {
				c.s.log.Error("chaos: clear a fault", "err", err)
			}
		}
	}()
}
