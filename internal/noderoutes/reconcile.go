package noderoutes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/zonewright/zonewright/internal/illumos"
)

// Stack is the global zone's IP stack (illumos.Host.GlobalZone()).
type Stack interface {
	AddNetRoute(ctx context.Context, dest netip.Prefix, gw netip.Addr) error
	DeleteNetRoute(ctx context.Context, dest netip.Prefix, gw netip.Addr) error
	IfProp(ctx context.Context, ifname, proto, prop string) (string, error)
	SetIfProp(ctx context.Context, ifname, proto, prop, value string) error
}

// Reconciler converges the global zone's routes to the wanted ones. One
// goroutine uses it.
type Reconciler struct {
	Stack Stack
	// Table reads the routing table (illumos.Host.RoutingTable).
	Table func(context.Context) ([]illumos.NetRoute, error)
	// LedgerFile keeps the routes this node programmed across restarts,
	// so a route to a node deleted while the agent was down still goes;
	// empty: they are kept in memory only.
	LedgerFile string

	owned  []Route
	loaded bool
	dirty  bool // the ledger file lags owned (a write failed)
}

// Result is what one Reconcile did.
type Result struct {
	Plan
	// Failed are the routes the host refused to add or delete, each with
	// why; the next Reconcile tries them again.
	Failed []error
}

// Changed reports whether the routing table was changed.
func (r Result) Changed() bool { return len(r.Add)+len(r.Delete) > len(r.Failed) }

// Reconcile reads the routing table, adds the wanted routes it lacks and
// deletes the stale ones (Diff), leaving the correct ones alone. own is
// this node's pod CIDR. An error means the table could not be read
// (nothing was tried) or the ledger not written (the routes were still
// applied, and it is written again next time).
func (r *Reconciler) Reconcile(ctx context.Context, want []Route, own netip.Prefix) (Result, error) {
	if !r.loaded {
		owned, err := readLedger(r.LedgerFile)
		if err != nil {
			return Result{}, err
		}
		r.owned, r.loaded = owned, true
	}
	table, err := r.Table(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("read the routing table: %w", err)
	}
	res := Result{Plan: Diff(want, table, r.owned, own)}
	var ledgerErr error
	if len(res.Add) > 0 {
		// Owned before they exist: an agent that dies mid-way still
		// knows them as its own. A ledger that cannot be written holds
		// back no route: the pods' traffic comes first.
		ledgerErr = r.remember(append(slices.Clone(r.owned), res.Add...))
	}
	for _, rt := range res.Add {
		if err := r.Stack.AddNetRoute(ctx, rt.Dest, rt.Gateway); err != nil {
			res.Failed = append(res.Failed, fmt.Errorf("add %s via %s (node %s): %w", rt.Dest, rt.Gateway, rt.Node, err))
		}
	}
	kept := slices.Clone(want)
	for _, rt := range res.Delete {
		if err := r.Stack.DeleteNetRoute(ctx, rt.Dest, rt.Gateway); err != nil {
			res.Failed = append(res.Failed, fmt.Errorf("delete %s via %s: %w", rt.Dest, rt.Gateway, err))
			if slices.ContainsFunc(r.owned, rt.same) {
				kept = append(kept, rt) // still ours to delete
			}
		}
	}
	if !sameRoutes(kept, r.owned) || r.dirty {
		ledgerErr = r.remember(kept)
	}
	return res, ledgerErr
}

// Owned is the routes the Reconciler holds as its own.
func (r *Reconciler) Owned() []Route { return slices.Clone(r.owned) }

func (r *Reconciler) remember(routes []Route) error {
	var uniq []Route
	for _, rt := range routes {
		if !slices.ContainsFunc(uniq, rt.same) {
			uniq = append(uniq, rt)
		}
	}
	sortRoutes(uniq)
	r.owned = uniq
	if r.LedgerFile == "" {
		return nil
	}
	err := writeLedger(r.LedgerFile, uniq)
	r.dirty = err != nil
	return err
}

func sameRoutes(a, b []Route) bool {
	if len(a) != len(b) {
		return false
	}
	for _, r := range a {
		if !slices.ContainsFunc(b, r.same) {
			return false
		}
	}
	return true
}

type ledger struct {
	Routes []Route `json:"routes"`
}

func readLedger(path string) ([]Route, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the node routes ledger: %w", err)
	}
	var l ledger
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("read the node routes ledger %s: %w", path, err)
	}
	return l.Routes, nil
}

// writeLedger replaces the file at once (write, then rename).
func writeLedger(path string, routes []Route) error {
	b, err := json.MarshalIndent(ledger{Routes: routes}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".noderoutes-*")
	if err != nil {
		return fmt.Errorf("write the node routes ledger: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write the node routes ledger: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the node routes ledger: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the node routes ledger: %w", err)
	}
	return nil
}

// Forwarding turns IPv4 forwarding on for each of ifaces that has it off
// (illumos is believed to forward a packet only when the interface it
// arrives on and the one it leaves by both have it on; UNCONFIRMED) and
// returns those it turned on.
func Forwarding(ctx context.Context, s Stack, ifaces ...string) ([]string, error) {
	var turned []string
	var errs []error
	for _, ifc := range ifaces {
		v, err := s.IfProp(ctx, ifc, "ipv4", "forwarding")
		if err != nil {
			errs = append(errs, fmt.Errorf("read IPv4 forwarding of %s: %w", ifc, err))
			continue
		}
		if v == "on" {
			continue
		}
		if err := s.SetIfProp(ctx, ifc, "ipv4", "forwarding", "on"); err != nil {
			errs = append(errs, fmt.Errorf("turn IPv4 forwarding on for %s: %w", ifc, err))
			continue
		}
		turned = append(turned, ifc)
	}
	return turned, errors.Join(errs...)
}
