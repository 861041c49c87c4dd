package servicefeed

import (
	"net/netip"
	"strings"
)

func compareIP(a, b string) int {
	x, errX := netip.ParseAddr(a)
	y, errY := netip.ParseAddr(b)
	if errX != nil || errY != nil {
		return strings.Compare(a, b)
	}
	return x.Compare(y)
}

func compareStrings(a, b string) int { return strings.Compare(a, b) }
