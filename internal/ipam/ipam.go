// Package ipam hands out pod addresses from each node's pod CIDR, recorded
// in PostgreSQL so that an address is never given twice and a retried
// allocation for the same pod returns the same address.
package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zonewright/zonewright/internal/model"
)

// ErrExhausted means the node's pod CIDR has no free address.
var ErrExhausted = errors.New("pod CIDR exhausted")

// IPAM allocates from the ip_allocations table.
type IPAM struct{ pool *pgxpool.Pool }

// New returns an allocator over pool.
func New(pool *pgxpool.Pool) *IPAM { return &IPAM{pool: pool} }

// Allocation is one pod's address and how to route it.
type Allocation struct {
	Addr    netip.Addr
	Prefix  int        // the CIDR's length, for ipadm ADDR/LEN
	Gateway netip.Addr // the node's address on the pod network: the defrouter
	// GaveUp is the node where the pod held an address it gave up (it
	// moved): one more is free there.
	GaveUp string
}

// Allocate returns podUID's address on node, allocating the lowest free one
// from cidr. It is idempotent per pod: a pod that already holds an address
// on this node gets it back; one holding an address on another node (it
// moved) gives that one up first.
func (a *IPAM) Allocate(ctx context.Context, node, cidr, podUID string) (Allocation, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return Allocation{}, fmt.Errorf("node %s pod CIDR %q: %w", node, cidr, err)
	}
	prefix = prefix.Masked()
	alloc := Allocation{Prefix: prefix.Bits(), Gateway: model.PodGateway(prefix)}
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		// One allocator per node at a time; nodes do not wait on each other.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('ipam/' || $1))", node); err != nil {
			return err
		}
		var held netip.Addr
		var heldNode string
		err := tx.QueryRow(ctx, "SELECT node_name, host(ip)::inet FROM ip_allocations WHERE pod_uid = $1", podUID).Scan(&heldNode, &held)
		switch {
		case err == nil && heldNode == node && prefix.Contains(held):
			alloc.Addr = held
			return nil
		case err == nil:
			if _, err := tx.Exec(ctx, "DELETE FROM ip_allocations WHERE pod_uid = $1", podUID); err != nil {
				return err
			}
			alloc.GaveUp = heldNode
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		rows, err := tx.Query(ctx, "SELECT host(ip)::inet FROM ip_allocations WHERE node_name = $1", node)
		if err != nil {
			return err
		}
		used, err := pgx.CollectRows(rows, pgx.RowTo[netip.Addr])
		if err != nil {
			return err
		}
		taken := make(map[netip.Addr]bool, len(used)+1)
		for _, u := range used {
			taken[u] = true
		}
		taken[alloc.Gateway] = true
		free, ok := firstFree(prefix, taken)
		if !ok {
			return fmt.Errorf("%w: node %s has no free address in %s (%d in use)", ErrExhausted, node, prefix, len(used))
		}
		if _, err := tx.Exec(ctx, "INSERT INTO ip_allocations (node_name, ip, pod_uid) VALUES ($1, $2, $3)", node, free, podUID); err != nil {
			return err
		}
		alloc.Addr = free
		return nil
	})
	return alloc, err
}

// firstFree is the lowest host address of prefix not in taken, skipping the
// network and (for IPv4) broadcast addresses.
func firstFree(prefix netip.Prefix, taken map[netip.Addr]bool) (netip.Addr, bool) {
	last := lastAddr(prefix)
	for ip := prefix.Addr().Next(); ip.IsValid() && prefix.Contains(ip); ip = ip.Next() {
		if ip.Is4() && ip == last && prefix.Bits() < 31 {
			break
		}
		if !taken[ip] {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func lastAddr(prefix netip.Prefix) netip.Addr {
	b := prefix.Addr().AsSlice()
	bits := prefix.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 1 << (7 - j)
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Release frees whatever address podUID holds; releasing nothing is fine.
// node is where the freed address was, empty when there was none.
func (a *IPAM) Release(ctx context.Context, podUID string) (node string, err error) {
	err = a.pool.QueryRow(ctx, "DELETE FROM ip_allocations WHERE pod_uid = $1 RETURNING node_name", podUID).Scan(&node)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return node, err
}

// Holders names the pods holding an address on node.
func (a *IPAM) Holders(ctx context.Context, node string) (map[string]bool, error) {
	rows, err := a.pool.Query(ctx, "SELECT pod_uid::text FROM ip_allocations WHERE node_name = $1", node)
	if err != nil {
		return nil, fmt.Errorf("list the addresses held on node %s: %w", node, err)
	}
	uids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list the addresses held on node %s: %w", node, err)
	}
	holders := make(map[string]bool, len(uids))
	for _, uid := range uids {
		holders[uid] = true
	}
	return holders, nil
}

// Lookup returns the address podUID holds, if any.
func (a *IPAM) Lookup(ctx context.Context, podUID string) (node string, addr netip.Addr, ok bool, err error) {
	err = a.pool.QueryRow(ctx, "SELECT node_name, host(ip)::inet FROM ip_allocations WHERE pod_uid = $1", podUID).Scan(&node, &addr)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", netip.Addr{}, false, nil
	}
	return node, addr, err == nil, err
}
