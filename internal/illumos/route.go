package illumos

import (
	"context"
	"net/netip"
)

// routePath is route inside the zone; it runs through zlogin.
const routePath = "/usr/sbin/route"

// AddDefaultRoute adds a persistent default route via gw
// (`route -p add default GW`). A route that is already there (exit 17,
// EEXIST, or "entry exists" in the persistent store) is success.
func (z InZone) AddDefaultRoute(ctx context.Context, gw string) error {
	const op = "route add"
	if _, err := netip.ParseAddr(gw); err != nil {
		return invalidf(op, z.Zone, "gateway %q is not an address", gw)
	}
	_, err := z.run(ctx, op, "default", []string{inZone(routePath), "-p", "add", "default", gw}, nil)
	if KindOf(err) == KindAlreadyExists {
		return nil
	}
	return err
}

// DeleteDefaultRoute removes the persistent default route via gw. A route
// that is not there (exit 3, ESRCH) is success.
func (z InZone) DeleteDefaultRoute(ctx context.Context, gw string) error {
	const op = "route delete"
	if _, err := netip.ParseAddr(gw); err != nil {
		return invalidf(op, z.Zone, "gateway %q is not an address", gw)
	}
	_, err := z.run(ctx, op, "default", []string{inZone(routePath), "-p", "delete", "default", gw}, nil)
	if KindOf(err) == KindNotFound {
		return nil
	}
	return err
}
