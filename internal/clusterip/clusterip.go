// Package clusterip hands out services' virtual addresses from the
// service CIDR, recorded in PostgreSQL (table cluster_ips) inside the
// transaction that writes the service, so an address is never given
// twice and is released together with its service.
//
// The range follows Kubernetes: the network address, the first address
// (kept for an API service) and the tenth (the cluster DNS) are never
// handed out, and the range is split as in KEP-3070 into a lower static
// band, for addresses people pick by hand, and an upper dynamic band that
// automatic allocation prefers, so hand-picked addresses rarely collide
// with allocated ones.
package clusterip

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
)

// DefaultCIDR is serve's service CIDR; the dev stack uses DevCIDR, inside
// 127.0.0.0/8, so service addresses are reachable on Linux without routes.
const (
	DefaultCIDR = "10.96.0.0/16"
	DevCIDR     = "127.96.0.0/16"
)

// Offsets in the range that are never handed out.
const (
	apiOffset = 1  // the first address, Kubernetes' `kubernetes` service
	dnsOffset = 10 // the cluster DNS (kubeadm's 10.96.0.10)
)

// ErrExhausted means every address of the range is taken.
var ErrExhausted = errors.New("service CIDR exhausted")

// Range is a service CIDR.
type Range struct {
	prefix netip.Prefix
	size   int64 // addresses in the prefix, network and broadcast included
	static int64 // offsets 1..static are the static band
}

// Parse reads a service CIDR: IPv4, from /12 (2^20 addresses, Kubernetes'
// limit) to /28 (the DNS address must fit).
func Parse(cidr string) (*Range, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR %q: %w", cidr, err)
	}
	if !p.Addr().Is4() || p.Bits() < 12 || p.Bits() > 28 {
		return nil, fmt.Errorf("service CIDR %q: want an IPv4 prefix from /12 to /28", cidr)
	}
	p = p.Masked()
	size := int64(1) << (32 - p.Bits())
	return &Range{prefix: p, size: size, static: staticBand(size)}, nil
}

// MustParse is Parse for constants.
func MustParse(cidr string) *Range {
	r, err := Parse(cidr)
	if err != nil {
		panic(err)
	}
	return r
}

// staticBand is KEP-3070's calculateRangeOffset: min(max(16, size/16), 256).
func staticBand(size int64) int64 {
	return min(max(16, size/16), 256)
}

// Prefix is the range as a prefix.
func (r *Range) Prefix() netip.Prefix { return r.prefix }

func (r *Range) String() string { return r.prefix.String() }

// DNSAddress is the cluster DNS server's address: the range's base + 10.
// Zones' resolv.conf and the DNS server itself use it.
func (r *Range) DNSAddress() netip.Addr { return r.at(dnsOffset) }

// DNSAddress is Range.DNSAddress of cidr.
func DNSAddress(cidr netip.Prefix) netip.Addr {
	return (&Range{prefix: cidr.Masked()}).at(dnsOffset)
}

// StaticBand is the range of offsets the static band covers, first and
// last address (for tests and documentation).
func (r *Range) StaticBand() (first, last netip.Addr) { return r.at(1), r.at(r.static) }

func (r *Range) at(off int64) netip.Addr {
	b := r.prefix.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(off)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (r *Range) offset(a netip.Addr) int64 {
	x, y := a.As4(), r.prefix.Addr().As4()
	ua := uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3])
	ub := uint32(y[0])<<24 | uint32(y[1])<<16 | uint32(y[2])<<8 | uint32(y[3])
	return int64(ua - ub)
}

// usable reports whether the address at off may be handed out.
func (r *Range) usable(off int64) bool {
	return off > 0 && off < r.size-1 && off != apiOffset && off != dnsOffset
}

// Service names the owner of an allocation.
type Service struct {
	UID, Namespace, Name string
}

// Allocate gives svc an address in tx: requested ("" for any) or a free
// one, preferring the dynamic band. A requested address outside the
// range, reserved or taken is a model.FieldErrors on spec.clusterIP, in
// Kubernetes' words.
func (r *Range) Allocate(ctx context.Context, tx pgx.Tx, svc Service, requested string) (netip.Addr, error) {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", pglock.ClusterIP); err != nil {
		return netip.Addr{}, err
	}
	if requested != "" {
		a, err := netip.ParseAddr(requested)
		if err != nil || !a.Is4() {
			return netip.Addr{}, fieldError(requested, "must be a valid IPv4 address")
		}
		off := r.offset(a)
		switch {
		case !r.prefix.Contains(a) || off == 0 || off == r.size-1:
			return netip.Addr{}, fieldError(requested, fmt.Sprintf("provided IP is not in the valid range. The range of valid IPs is %s", r.prefix))
		case !r.usable(off):
			return netip.Addr{}, fieldError(requested, "provided IP is reserved (the range's first address and its tenth, the cluster DNS)")
		}
		ok, err := r.insert(ctx, tx, svc, off)
		if err != nil {
			return netip.Addr{}, err
		}
		if !ok {
			return netip.Addr{}, fieldError(requested, "provided IP is already allocated")
		}
		return a, nil
	}
	// The dynamic band from a random point, wrapping; then the static band.
	last := r.size - 2
	bands := [][2]int64{}
	if r.static < last {
		start := r.static + 1 + rand.Int64N(last-r.static)
		bands = append(bands, [2]int64{start, last}, [2]int64{r.static + 1, start - 1})
	}
	bands = append(bands, [2]int64{1, min(r.static, last)})
	for _, b := range bands {
		if b[0] > b[1] {
			continue
		}
		off, found, err := r.firstFree(ctx, tx, b[0], b[1])
		if err != nil {
			return netip.Addr{}, err
		}
		if !found {
			continue
		}
		ok, err := r.insert(ctx, tx, svc, off)
		if err != nil {
			return netip.Addr{}, err
		}
		if ok {
			return r.at(off), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: no free address in %s for service %s/%s", ErrExhausted, r.prefix, svc.Namespace, svc.Name)
}

func fieldError(value, detail string) model.FieldErrors {
	return model.FieldErrors{{Field: "spec.clusterIP", Type: model.FieldInvalid, Detail: fmt.Sprintf("Invalid value: %q: %s", value, detail)}}
}

// firstFree is the lowest usable offset in [lo, hi] without an allocation.
func (r *Range) firstFree(ctx context.Context, tx pgx.Tx, lo, hi int64) (int64, bool, error) {
	var off int64
	err := tx.QueryRow(ctx, `SELECT o FROM generate_series($2::bigint, $3::bigint) AS o
		WHERE o NOT IN ($4, $5) AND NOT EXISTS (SELECT 1 FROM cluster_ips c WHERE c.ip = $1::inet + o)
		ORDER BY o LIMIT 1`, r.prefix.Addr(), lo, hi, int64(apiOffset), int64(dnsOffset)).Scan(&off)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return off, err == nil, err
}

func (r *Range) insert(ctx context.Context, tx pgx.Tx, svc Service, off int64) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO cluster_ips (ip, service_uid, namespace, name) VALUES ($1, $2, $3, $4)
		ON CONFLICT (ip) DO NOTHING`, r.at(off), svc.UID, svc.Namespace, svc.Name)
	if err != nil {
		return false, fmt.Errorf("record cluster IP %s for service %s/%s: %w", r.at(off), svc.Namespace, svc.Name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Release frees the address of the service with uid, in tx (the
// service's deletion). Releasing nothing is fine.
func Release(ctx context.Context, tx pgx.Tx, uid string) error {
	_, err := tx.Exec(ctx, "DELETE FROM cluster_ips WHERE service_uid = $1", uid)
	return err
}

// Sweep frees every address whose service is gone, and returns how many.
// Deletion releases in its own transaction, so this finds only what was
// left behind otherwise (a row removed by hand, an older version's bug).
func Sweep(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	tag, err := pool.Exec(ctx, `DELETE FROM cluster_ips c WHERE NOT EXISTS (SELECT 1 FROM services s WHERE s.uid = c.service_uid)`)
	if err != nil {
		return 0, fmt.Errorf("sweep cluster IPs: %w", err)
	}
	return tag.RowsAffected(), nil
}
