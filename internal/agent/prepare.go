package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/retry"
)

// prepareHost makes the zones' parent dataset and the etherstub exist
// (the pods' gateway waits for the pod CIDR: prepareGateway).
func (a *Agent) prepareHost(ctx context.Context) error {
	cfg := a.cfg
	zfs, dl := a.host.ZFS(), a.host.Dladm()
	if _, err := retryHost(ctx, a.log, "create the zones dataset", func() (struct{}, error) {
		return struct{}{}, zfs.Create(ctx, cfg.ZonesDataset, map[string]string{"mountpoint": cfg.ZonesPath})
	}); err != nil {
		return fmt.Errorf("create the zones dataset %s: %w", cfg.ZonesDataset, err)
	}
	if mp, err := zfs.Get(ctx, cfg.ZonesDataset, "mountpoint"); err == nil && mp != cfg.ZonesPath {
		// Zone datasets get their mountpoints explicitly, so this works;
		// but the operator chose another place, and we leave it.
		a.log.Warn("the zones dataset is mounted elsewhere than the zones path; zone datasets are mounted under the zones path",
			"dataset", cfg.ZonesDataset, "mountpoint", mp, "zonesPath", cfg.ZonesPath)
	}
	// The parents of images (received streams, disk volumes) and of the
	// pods' volumes; the directory of lx tarballs.
	for _, ds := range []string{cfg.ImagesDataset, cfg.VolumesDataset} {
		if _, err := retryHost(ctx, a.log, "create dataset "+ds, func() (struct{}, error) {
			return struct{}{}, zfs.Create(ctx, ds, nil)
		}); err != nil {
			return fmt.Errorf("create the dataset %s: %w", ds, err)
		}
	}
	if err := os.MkdirAll(cfg.ImageDir, 0o755); err != nil {
		return fmt.Errorf("create the image directory: %w", err)
	}
	if _, err := retryHost(ctx, a.log, "create the etherstub", func() (struct{}, error) {
		ok, err := dl.EtherstubExists(ctx, cfg.Etherstub)
		if err != nil || ok {
			return struct{}{}, err
		}
		err = dl.CreateEtherstub(ctx, cfg.Etherstub)
		if errors.Is(err, illumos.ErrAlreadyExists) {
			return struct{}{}, nil
		}
		return struct{}{}, err
	}); err != nil {
		return fmt.Errorf("create the etherstub %s: %w", cfg.Etherstub, err)
	}
	return nil
}

// prepareGateway gives the pods their default router: a VNIC on the
// etherstub (GatewayLink) whose IP interface holds the pod CIDR's first
// address, forwarding IPv4, so pods reach beyond their network and their
// traffic enters the global zone where the service rules apply.
func (a *Agent) prepareGateway(ctx context.Context) error {
	gw := netip.PrefixFrom(a.podGateway(), a.podCIDR.Bits()).String()
	dl, ip := a.host.Dladm(), a.host.GlobalZone()
	if a.hostCIDR.IsValid() && a.hostCIDR != a.podCIDR {
		// The node was given another pod CIDR than an earlier run's (its
		// Node was deleted meanwhile): the gateway moves to the new one.
		a.log.Warn("the node's pod CIDR changed; moving the pods' gateway", "old", a.hostCIDR, "new", a.podCIDR)
		if err := ip.DeleteAddr(ctx, GatewayLink+"/v4"); err != nil && !errors.Is(err, illumos.ErrNotFound) {
			return fmt.Errorf("remove the old gateway address of %s: %w", GatewayLink, err)
		}
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"create the gateway VNIC " + GatewayLink, func() error {
			return dl.CreateVNIC(ctx, illumos.VNICSpec{Name: GatewayLink, Over: a.cfg.Etherstub})
		}},
		{"create the IP interface " + GatewayLink, func() error { return ip.CreateIf(ctx, GatewayLink) }},
		{"give " + GatewayLink + " the pods' gateway " + gw, func() error { return ip.CreateStaticAddr(ctx, GatewayLink+"/v4", gw) }},
		{"turn IPv4 forwarding on for " + GatewayLink, func() error { return ip.SetIfProp(ctx, GatewayLink, "ipv4", "forwarding", "on") }},
	}
	for _, st := range steps {
		if _, err := retryHost(ctx, a.log, st.what, func() (struct{}, error) {
			if err := st.do(); err != nil && !errors.Is(err, illumos.ErrAlreadyExists) {
				return struct{}{}, err
			}
			return struct{}{}, nil
		}); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return nil
}

// gatewayCIDR is the pod network the host's gateway holds (an earlier
// run's), or an invalid prefix when it holds none.
func (a *Agent) gatewayCIDR(ctx context.Context) netip.Prefix {
	addrs, err := a.host.GlobalZone().Addrs(ctx, GatewayLink+"/v4")
	if err != nil || len(addrs) == 0 {
		return netip.Prefix{}
	}
	p, err := netip.ParsePrefix(addrs[0].Addr)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}
	}
	return p.Masked()
}

// apiRetry is how the agent asks the API again while it does not answer
// (or answers 429 or 5xx): a refusal is final.
var apiRetry = retry.Policy{Pause: 250 * time.Millisecond, MaxPause: 5 * time.Second, Retryable: nodeapi.Retryable}

// retryHost runs a host command's fn until it succeeds, fails for good
// (not retryable) or has failed five times, pausing a second, then two,
// four, eight.
func retryHost[T any](ctx context.Context, log *slog.Logger, what string, fn func() (T, error)) (T, error) {
	var v T
	err := retry.Do(ctx, retry.Policy{Pause: time.Second, MaxPause: 8 * time.Second, Attempts: 5, Retryable: illumos.IsRetryable,
		OnRetry: func(attempt int, err error) { log.Warn("retrying", "what", what, "attempt", attempt, "err", err) },
	}, func(context.Context) (err error) {
		v, err = fn()
		return err
	})
	return v, err
}
