// Package e2e holds end-to-end tests of pod lifecycles: a real PostgreSQL,
// a real embedded Temporal server, the control plane, and simulated nodes
// each run by a real `zonewright agent` process over illumos-sim.
package e2e
