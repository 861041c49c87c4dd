// Package e2e holds end-to-end tests of pod lifecycles: a real PostgreSQL,
// a real embedded Temporal server, the control plane, and simulated nodes
// each run by a real `zonewright agent` process over illumos-sim.
//
// Every test has a cluster of its own. Tests that measure time (grace
// periods, readiness within a probe period, node health deadlines) run
// alone; the others call t.Parallel and overlap.
package e2e
