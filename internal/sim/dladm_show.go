package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// The show subcommands: ofmt tables of VNICs, etherstubs, links and
// physical links (spec §7.2, §7.3).

var vnicFields = []ofmtField{{"LINK", 13}, {"OVER", 11}, {"SPEED", 6}, {"MACADDRESS", 18}, {"MACADDRTYPE", 12}, {"VID", 5}, {"ZONE", 20}}

// outputSpec handles -p/-o: -p requires -o, "-o all" is invalid with -p,
// field names are case-insensitive and an unknown one is fatal.
func outputSpec(inv *invocation, cmd string, known []ofmtField, parsable bool, fields string) (*ofmtTable, bool) {
	if parsable && fields == "" {
		inv.errf("%s: -p requires -o", cmd)
		return nil, false
	}
	if parsable && strings.EqualFold(fields, "all") {
		inv.errf("%s: \"-o all\" is invalid with -p", cmd)
		return nil, false
	}
	defaults := make([]string, len(known))
	for i, f := range known {
		defaults[i] = f.name
	}
	t, bad := selectFields(known, defaults, fields)
	if t == nil {
		inv.errf("%s: unknown output field: '%s'", cmd, bad)
		return nil, false
	}
	return t, true
}

// dladm show-vnic [-P] [[-p] -o FIELDS] [-l LINK] [VNIC]
func dladmShowVnic(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "pPo:l:s:i:")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-vnic")
	}
	parsable, persistent := false, false
	var fields, over string
	for _, o := range opts {
		switch o.c {
		case 'p':
			parsable = true
		case 'P':
			persistent = true
		case 'o':
			fields = o.val
		case 'l':
			over = o.val
		}
	}
	t, ok := outputSpec(inv, "dladm", vnicFields, parsable, fields)
	if !ok {
		return 1
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		if len(rest) == 1 {
			if l := st.link(rest[0]); l == nil || l.Class != "vnic" {
				inv.errf("dladm: invalid vnic name '%s': object not found", rest[0])
				code = 1
				return
			}
		}
		if over != "" && st.link(over) == nil {
			inv.errf("dladm: invalid link name '%s'", over)
			code = 1
			return
		}
		owners := linkOwners(st)
		for _, l := range st.Links {
			if l.Class != "vnic" || (len(rest) == 1 && l.Name != rest[0]) || (over != "" && l.Over != over) {
				continue
			}
			if persistent && l.Temporary {
				continue
			}
			zone := owners[l.Name]
			if zone == "" {
				zone = "--"
			}
			rows = append(rows, map[string]string{
				"LINK": l.Name, "OVER": l.Over, "SPEED": strconv.Itoa(l.Speed),
				"MACADDRESS": l.MAC, "MACADDRTYPE": l.MACType, "VID": strconv.Itoa(l.VID), "ZONE": zone,
			})
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 {
		t.print(inv.stdout, parsable, rows)
	}
	return code
}

// dladm show-etherstub [NAME]
func dladmShowEtherstub(inv *invocation, args []string) int {
	_, rest, _, ok := getopt(args, "t")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-etherstub")
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		if len(rest) == 1 && st.link(rest[0]) == nil {
			inv.errf("dladm: invalid etherstub name '%s': object not found", rest[0])
			code = 1
			return
		}
		for _, l := range st.Links {
			if l.Class == "etherstub" && (len(rest) == 0 || l.Name == rest[0]) {
				rows = append(rows, map[string]string{"LINK": l.Name})
			}
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 && len(rows) > 0 {
		(&ofmtTable{fields: []ofmtField{{"LINK", 13}}}).print(inv.stdout, false, rows)
	}
	return code
}

var linkFields = []ofmtField{{"LINK", 12}, {"CLASS", 10}, {"MTU", 7}, {"STATE", 9}, {"BRIDGE", 11}, {"OVER", 32}}

// dladm show-link [-P] [[-p] -o FIELDS] [LINK]
func dladmShowLink(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "pPo:s:i:")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-link")
	}
	parsable, persistent := false, false
	fields := ""
	for _, o := range opts {
		switch o.c {
		case 'p':
			parsable = true
		case 'P':
			persistent = true
		case 'o':
			fields = o.val
		}
	}
	t, ok := outputSpec(inv, "dladm", linkFields, parsable, fields)
	if !ok {
		return 1
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		if len(rest) == 1 && st.link(rest[0]) == nil {
			inv.errf("dladm: link %s is not valid: object not found", rest[0])
			code = 1
			return
		}
		for _, l := range st.Links {
			if (len(rest) == 1 && l.Name != rest[0]) || (persistent && l.Temporary) {
				continue
			}
			state := "up"
			if l.Class == "etherstub" {
				state = "unknown"
			}
			overVal := l.Over
			if overVal == "" {
				overVal = "--"
			}
			rows = append(rows, map[string]string{
				"LINK": l.Name, "CLASS": l.Class, "MTU": strconv.Itoa(l.MTU), "STATE": state,
				"BRIDGE": "--", "OVER": overVal,
			})
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 {
		t.print(inv.stdout, parsable, rows)
	}
	return code
}

var physFields = []ofmtField{{"LINK", 13}, {"MEDIA", 21}, {"STATE", 11}, {"SPEED", 7}, {"DUPLEX", 10}, {"DEVICE", 13}}

var physMacFields = []ofmtField{{"LINK", 13}, {"SLOT", 9}, {"ADDRESS", 19}, {"INUSE", 5}, {"CLIENT", 13}}

// dladm show-phys [-m] [[-p] -o FIELDS] [LINK]
func dladmShowPhys(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "mHPpo:")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-phys")
	}
	parsable, macMode := false, false
	fields := ""
	for _, o := range opts {
		switch o.c {
		case 'p':
			parsable = true
		case 'm':
			macMode = true
		case 'o':
			fields = o.val
		}
	}
	known := physFields
	if macMode {
		known = physMacFields
	}
	t, ok := outputSpec(inv, "dladm", known, parsable, fields)
	if !ok {
		return 1
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		if len(rest) == 1 {
			if l := st.link(rest[0]); l == nil || l.Class != "phys" {
				inv.errf("dladm: link %s is not valid: object not found", rest[0])
				code = 1
				return
			}
		}
		n := 0
		for _, l := range st.Links {
			if l.Class != "phys" {
				continue
			}
			dev := fmt.Sprintf("vioif%d", n)
			n++
			if len(rest) == 1 && l.Name != rest[0] {
				continue
			}
			rows = append(rows, map[string]string{
				"LINK": l.Name, "MEDIA": "Ethernet", "STATE": "up", "SPEED": strconv.Itoa(l.Speed),
				"DUPLEX": "full", "DEVICE": dev, "SLOT": "primary", "ADDRESS": l.MAC,
				"INUSE": "yes", "CLIENT": l.Name,
			})
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 {
		t.print(inv.stdout, parsable, rows)
	}
	return code
}
