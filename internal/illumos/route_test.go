package illumos

import (
	"net/netip"
	"reflect"
	"testing"
)

// The verbose table carries the masks; a route without a device has one
// field fewer, a long device name or flags run into the next column; the
// IPv6 table is skipped.
func TestParseNetstatRoutes(t *testing.T) {
	out := "\nIRE Table: IPv4\n" +
		"  Destination             Mask           Gateway          Device Mxfrg Rtt   Ref Flg  Out  In/Fwd \n" +
		"-------------------- --------------- -------------------- ------ ----- ----- --- --- ----- ------ \n" +
		"default              0.0.0.0         192.168.7.1          net0    1500*    0   1 UG      12      7 \n" +
		"192.168.7.0          255.255.255.0   192.168.7.11         net0    1500*    0   1 U        0      0 \n" +
		"10.88.2.0            255.255.255.0   192.168.7.12                 1500     0   0 UG       0      0 \n" +
		"127.0.0.1            255.255.255.255 127.0.0.1            lo0     8232*    0   2 UH      30     30 \n" +
		"10.88.3.0            255.255.255.0   192.168.7.13         ixgbe10  9000*    0   1 UGMS123456 7 \n" +
		"\nIRE Table: IPv6\n" +
		"  Destination/Mask            Gateway                    If    PMTU   Rtt  Ref Flags  Out   In/Fwd \n" +
		"--------------------------- --------------------------- ----- ------ ----- --- ----- ------ ------ \n" +
		"::1                         ::1                         lo0    8252*     0   1 UH        0      0 \n"
	got, err := ParseNetstatRoutes(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []NetRoute{
		{Dest: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("192.168.7.1"), Device: "net0", Flags: "UG"},
		{Dest: netip.MustParsePrefix("192.168.7.0/24"), Gateway: netip.MustParseAddr("192.168.7.11"), Device: "net0", Flags: "U"},
		{Dest: netip.MustParsePrefix("10.88.2.0/24"), Gateway: netip.MustParseAddr("192.168.7.12"), Flags: "UG"},
		{Dest: netip.MustParsePrefix("127.0.0.1/32"), Gateway: netip.MustParseAddr("127.0.0.1"), Device: "lo0", Flags: "UH"},
		{Dest: netip.MustParsePrefix("10.88.3.0/24"), Gateway: netip.MustParseAddr("192.168.7.13"), Device: "ixgbe10", Flags: "UGMS"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if !got[2].ThroughGateway() || got[1].ThroughGateway() {
		t.Error("ThroughGateway: want G routes only")
	}
	for _, bad := range []string{
		"\nIRE Table: IPv4\nh\nh\n10.88.2.0 255.0.255.0 192.168.7.12 net0 1500 0 0 UG 0 0\n",
		"\nIRE Table: IPv4\nh\nh\n10.88.2.0 255.255.255.0 192.168.7.12\n",
	} {
		if _, err := ParseNetstatRoutes(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
