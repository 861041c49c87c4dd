// Package podcidr assigns nodes their pod CIDRs from the cluster's range,
// recorded in PostgreSQL (table node_pod_cidrs, whose exclusion constraint
// refuses overlapping ranges whichever replica writes), so no two nodes
// ever hold overlapping pod networks. A node keeps its CIDR for its life:
// asking again returns the same one.
package podcidr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zonewright/zonewright/internal/pglock"
)

// Defaults of the cluster range and of each node's share of it.
const (
	DefaultClusterCIDR  = "10.88.0.0/16"
	DefaultNodeMaskSize = 24
)

// Errors callers branch on.
var (
	// ErrOverlap: the CIDR asked for overlaps one another node holds.
	ErrOverlap = errors.New("pod CIDR overlaps another node's")
	// ErrExhausted: the cluster range has no free node CIDR left.
	ErrExhausted = errors.New("the cluster CIDR has no free node CIDR left")
	// ErrHeld: the node holds another pod CIDR, kept for its life.
	ErrHeld = errors.New("the node holds another pod CIDR")
	// ErrInvalid: the CIDR asked for is not a network.
	ErrInvalid = errors.New("invalid pod CIDR")
)

// Range is the cluster's pod range cut into node CIDRs of one size.
type Range struct {
	Cluster  netip.Prefix
	NodeBits int
}

// ParseRange checks a cluster CIDR and a node mask size.
func ParseRange(cluster string, nodeBits int) (Range, error) {
	p, err := netip.ParsePrefix(cluster)
	if err != nil || p.Masked() != p || !p.Addr().Is4() {
		return Range{}, fmt.Errorf("cluster CIDR %q is not an IPv4 network such as %s", cluster, DefaultClusterCIDR)
	}
	if nodeBits < p.Bits() || nodeBits > 30 {
		return Range{}, fmt.Errorf("node CIDR mask size %d must be between the cluster CIDR's (%d) and 30", nodeBits, p.Bits())
	}
	if nodeBits-p.Bits() > 24 {
		return Range{}, fmt.Errorf("node CIDR mask size %d cuts %s into more than 2^24 node CIDRs", nodeBits, cluster)
	}
	return Range{Cluster: p, NodeBits: nodeBits}, nil
}

// FirstFree is the lowest node CIDR of r that overlaps none of held.
func (r Range) FirstFree(held []netip.Prefix) (netip.Prefix, bool) {
	size := uint32(1) << (32 - r.NodeBits)
	base := r.Cluster.Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	count := uint32(1) << (r.NodeBits - r.Cluster.Bits())
	for i := uint32(0); i < count; i++ {
		a := start + i*size
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), r.NodeBits)
		if !overlapsAny(p, held) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func overlapsAny(p netip.Prefix, held []netip.Prefix) bool {
	for _, h := range held {
		if p.Overlaps(h) {
			return true
		}
	}
	return false
}

// Allocator assigns pod CIDRs from the node_pod_cidrs table.
type Allocator struct {
	pool  *pgxpool.Pool
	Range Range
}

// New returns an allocator of r over pool.
func New(pool *pgxpool.Pool, r Range) *Allocator { return &Allocator{pool: pool, Range: r} }

// Assign returns node's pod CIDR. A node that holds one keeps it (asking
// for another one is refused with ErrHeld: a node's CIDR does not change
// under its pods). A node
// without one gets want when it is given and free (it need not lie in the
// cluster range: the operator chose it), else the lowest free node CIDR.
func (a *Allocator) Assign(ctx context.Context, node, want string) (string, error) {
	var wanted netip.Prefix
	if want != "" {
		p, err := netip.ParsePrefix(want)
		if err != nil || p.Masked() != p || !p.Addr().Is4() || p.Bits() > 30 {
			return "", fmt.Errorf("%w: %q is not an IPv4 network of at least 4 addresses such as 10.88.1.0/24", ErrInvalid, want)
		}
		wanted = p
	}
	// The common case, a node that holds one, reads its row alone.
	var own string
	err := a.pool.QueryRow(ctx, "SELECT cidr::text FROM node_pod_cidrs WHERE node_name = $1", node).Scan(&own)
	if err == nil {
		return keep(node, own, wanted)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("read the pod CIDR of node %s: %w", node, err)
	}
	return a.assignNew(ctx, node, wanted)
}

// assignNew gives node a CIDR under a lock: nodes joining at once would
// otherwise all pick the same lowest free block, and all but one pick
// again, round after round.
func (a *Allocator) assignNew(ctx context.Context, node string, wanted netip.Prefix) (string, error) {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("assign node %s a pod CIDR: %w", node, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", pglock.PodCIDR); err != nil {
		return "", fmt.Errorf("assign node %s a pod CIDR: %w", node, err)
	}
	held, mine, err := heldBy(ctx, tx, node)
	if err != nil {
		return "", err
	}
	if mine.IsValid() {
		return keep(node, mine.String(), wanted)
	}
	pick := wanted
	if !pick.IsValid() {
		var ok bool
		if pick, ok = a.Range.FirstFree(held); !ok {
			return "", fmt.Errorf("%w: %s in /%d blocks", ErrExhausted, a.Range.Cluster, a.Range.NodeBits)
		}
	}
	_, err = tx.Exec(ctx, "INSERT INTO node_pod_cidrs (node_name, cidr) VALUES ($1, $2)", node, pick.String())
	if err == nil {
		err = tx.Commit(ctx)
	}
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return pick.String(), nil
	case errors.As(err, &pgErr) && pgErr.Code == "23P01": // exclusion: overlaps
		return "", fmt.Errorf("%w: %s", ErrOverlap, pick)
	default:
		return "", fmt.Errorf("assign node %s a pod CIDR: %w", node, err)
	}
}

// keep answers a node that holds own already: it keeps it, and asking for
// another is refused.
func keep(node, own string, wanted netip.Prefix) (string, error) {
	mine, err := netip.ParsePrefix(own)
	if err != nil {
		return "", fmt.Errorf("node %s holds an unreadable pod CIDR %q: %w", node, own, err)
	}
	if wanted.IsValid() && wanted != mine {
		return "", fmt.Errorf("%w: node %s holds %s for its life; it cannot take %s", ErrHeld, node, mine, wanted)
	}
	return mine.String(), nil
}

// heldBy lists every CIDR held, and node's own (invalid when none).
func heldBy(ctx context.Context, tx pgx.Tx, node string) ([]netip.Prefix, netip.Prefix, error) {
	rows, err := tx.Query(ctx, "SELECT node_name, cidr::text FROM node_pod_cidrs")
	if err != nil {
		return nil, netip.Prefix{}, fmt.Errorf("read the pod CIDRs held: %w", err)
	}
	defer rows.Close()
	var held []netip.Prefix
	var mine netip.Prefix
	for rows.Next() {
		var name, cidr string
		if err := rows.Scan(&name, &cidr); err != nil {
			return nil, netip.Prefix{}, err
		}
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			continue
		}
		held = append(held, p)
		if name == node {
			mine = p
		}
	}
	if err := rows.Err(); err != nil {
		return nil, netip.Prefix{}, fmt.Errorf("read the pod CIDRs held: %w", err)
	}
	return held, mine, nil
}

// Release frees node's pod CIDR (the node was deleted).
func (a *Allocator) Release(ctx context.Context, node string) error {
	if _, err := a.pool.Exec(ctx, "DELETE FROM node_pod_cidrs WHERE node_name = $1", node); err != nil {
		return fmt.Errorf("release the pod CIDR of node %s: %w", node, err)
	}
	return nil
}
