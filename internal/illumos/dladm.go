package illumos

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos/names"
)

const dladmPath = "/usr/sbin/dladm"

// Dladm administers datalinks (VNICs and etherstubs) on a host.
//
// Links are created persistent (no -t): after a host reboot or an agent
// restart the VNICs of existing zones are still there to be adopted, and a
// zone whose net resource names a VNIC can boot. Deletes are persistent too,
// so a deleted VNIC does not come back at the next boot. VNICSpec.Temporary
// asks for -t explicitly.
type Dladm struct{ Runner Executor }

// VNICSpec describes a VNIC to create.
type VNICSpec struct {
	Name string // must pass names.ValidLinkName (see names.LinkName)
	Over string // the link it sits on: a physical link or an etherstub
	// MAC is a fixed MAC address ("2:8:20:a:1b:c3" or "02:08:20:0a:1b:c3");
	// empty lets dladm choose.
	MAC string
	// VID is a VLAN id 1-4094; 0 means none.
	VID int
	// Temporary creates the VNIC with -t: gone at the next boot.
	Temporary bool
}

// VNIC is one row of `dladm show-vnic -p -o LINK,OVER,MACADDRESS,VID,ZONE`.
type VNIC struct {
	Name string
	Over string
	MAC  string // normalised: six lower-case two-digit octets, "02:08:20:0a:1b:c3"
	VID  int
	Zone string // the zone the link is assigned to; "" when none
}

// CreateVNIC creates a VNIC. ErrAlreadyExists when the name is taken;
// ErrNotFound when Over does not exist.
func (d Dladm) CreateVNIC(ctx context.Context, s VNICSpec) error {
	const op = "dladm create-vnic"
	if !names.ValidLinkName(s.Name) {
		return invalidf(op, s.Name, "invalid link name %q", s.Name)
	}
	if !names.ValidLinkName(s.Over) {
		return invalidf(op, s.Name, "invalid link name %q to create over", s.Over)
	}
	args := []string{"create-vnic"}
	if s.Temporary {
		args = append(args, "-t")
	}
	args = append(args, "-l", s.Over)
	if s.MAC != "" {
		mac, err := NormalizeMAC(s.MAC)
		if err != nil {
			return invalidf(op, s.Name, "%v", err)
		}
		args = append(args, "-m", mac)
	}
	if s.VID != 0 {
		if s.VID < 1 || s.VID > 4094 {
			return invalidf(op, s.Name, "VLAN id %d out of 1-4094", s.VID)
		}
		args = append(args, "-v", strconv.Itoa(s.VID))
	}
	args = append(args, s.Name)
	_, err := run(ctx, d.Runner, op, s.Name, Cmd{Path: dladmPath, Args: args})
	return err
}

// DeleteVNIC deletes a VNIC. ErrNotFound when there is none by that name;
// ErrBusy while a running zone or IP uses it.
func (d Dladm) DeleteVNIC(ctx context.Context, name string) error {
	return d.deleteLink(ctx, "dladm delete-vnic", name)
}

// VNIC returns one VNIC; ErrNotFound when there is none by that name.
func (d Dladm) VNIC(ctx context.Context, name string) (VNIC, error) {
	const op = "dladm show-vnic"
	if !names.ValidLinkName(name) {
		return VNIC{}, invalidf(op, name, "invalid link name %q", name)
	}
	vnics, err := d.showVNIC(ctx, op, name, name)
	if err != nil {
		return VNIC{}, err
	}
	for _, v := range vnics {
		if v.Name == name {
			return v, nil
		}
	}
	return VNIC{}, &Error{Op: op, Subject: name, Kind: KindNotFound, Err: fmt.Errorf("no vnic %q", name)}
}

// VNICs returns every VNIC of the host.
func (d Dladm) VNICs(ctx context.Context) ([]VNIC, error) {
	return d.showVNIC(ctx, "dladm show-vnic", "")
}

func (d Dladm) showVNIC(ctx context.Context, op, subject string, names ...string) ([]VNIC, error) {
	args := append([]string{"show-vnic", "-p", "-o", "LINK,OVER,MACADDRESS,VID,ZONE"}, names...)
	res, err := run(ctx, d.Runner, op, subject, Cmd{Path: dladmPath, Args: args})
	if err != nil {
		return nil, err
	}
	vnics, err := ParseShowVNIC(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, subject, err)
	}
	return vnics, nil
}

// CreateEtherstub creates an etherstub (a virtual switch for VNICs that
// need no physical link). ErrAlreadyExists when the name is taken.
func (d Dladm) CreateEtherstub(ctx context.Context, name string) error {
	const op = "dladm create-etherstub"
	if !names.ValidLinkName(name) {
		return invalidf(op, name, "invalid link name %q", name)
	}
	_, err := run(ctx, d.Runner, op, name, Cmd{Path: dladmPath, Args: []string{"create-etherstub", name}})
	return err
}

// DeleteEtherstub deletes an etherstub. ErrNotFound when there is none;
// ErrBusy while VNICs sit on it.
func (d Dladm) DeleteEtherstub(ctx context.Context, name string) error {
	return d.deleteLink(ctx, "dladm delete-etherstub", name)
}

// Etherstubs returns the names of the host's etherstubs.
func (d Dladm) Etherstubs(ctx context.Context) ([]string, error) {
	res, err := run(ctx, d.Runner, "dladm show-etherstub", "", Cmd{Path: dladmPath, Args: []string{"show-etherstub"}})
	if err != nil {
		return nil, err
	}
	return ParseShowEtherstub(string(res.Stdout)), nil
}

// EtherstubExists reports whether an etherstub of that name exists.
func (d Dladm) EtherstubExists(ctx context.Context, name string) (bool, error) {
	const op = "dladm show-etherstub"
	if !names.ValidLinkName(name) {
		return false, invalidf(op, name, "invalid link name %q", name)
	}
	res, err := run(ctx, d.Runner, op, name, Cmd{Path: dladmPath, Args: []string{"show-etherstub", name}})
	if err != nil {
		if KindOf(err) == KindNotFound {
			return false, nil
		}
		return false, err
	}
	// A link that exists but is no etherstub prints nothing.
	for _, n := range ParseShowEtherstub(string(res.Stdout)) {
		if n == name {
			return true, nil
		}
	}
	return false, nil
}

func (d Dladm) deleteLink(ctx context.Context, op, name string) error {
	if !names.ValidLinkName(name) {
		return invalidf(op, name, "invalid link name %q", name)
	}
	sub := strings.TrimPrefix(op, "dladm ")
	_, err := run(ctx, d.Runner, op, name, Cmd{Path: dladmPath, Args: []string{sub, name}})
	return err
}

// ParseShowVNIC parses `dladm show-vnic -p -o LINK,OVER,MACADDRESS,VID,ZONE`.
func ParseShowVNIC(out string) ([]VNIC, error) {
	var vnics []VNIC
	for _, line := range nonEmptyLines(out) {
		f, err := splitParsable(line, 5)
		if err != nil {
			return nil, err
		}
		v := VNIC{Name: f[0], Over: f[1], Zone: f[4]}
		if v.Name == "" {
			return nil, fmt.Errorf("empty link name in %q", line)
		}
		if v.Zone == "--" {
			v.Zone = ""
		}
		if f[2] != "" {
			mac, err := NormalizeMAC(f[2])
			if err != nil {
				return nil, fmt.Errorf("link %s: %w", v.Name, err)
			}
			v.MAC = mac
		}
		if f[3] != "" {
			vid, err := strconv.Atoi(f[3])
			if err != nil || vid < 0 || vid > 4094 {
				return nil, fmt.Errorf("link %s: bad VID %q", v.Name, f[3])
			}
			v.VID = vid
		}
		vnics = append(vnics, v)
	}
	return vnics, nil
}

// ParseShowEtherstub parses `dladm show-etherstub`: a LINK header, then
// one name per line.
func ParseShowEtherstub(out string) []string {
	var names []string
	for i, line := range nonEmptyLines(out) {
		name := strings.Fields(line)[0]
		if i == 0 && name == "LINK" {
			continue
		}
		names = append(names, name)
	}
	return names
}

// NormalizeMAC turns a MAC address as dladm prints it (hex octets without
// leading zeros, "2:8:20:a:1b:c3") or as people write it into six
// lower-case two-digit octets.
func NormalizeMAC(s string) (string, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return "", fmt.Errorf("invalid MAC address %q", s)
	}
	out := make([]string, 6)
	for i, p := range parts {
		if len(p) < 1 || len(p) > 2 {
			return "", fmt.Errorf("invalid MAC address %q", s)
		}
		v, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return "", fmt.Errorf("invalid MAC address %q", s)
		}
		out[i] = fmt.Sprintf("%02x", v)
	}
	return strings.Join(out, ":"), nil
}
