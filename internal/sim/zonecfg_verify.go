package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// Validation of a configuration: what end, commit and verify refuse.

func validNCPURange(v string) bool {
	lo, hi, isRange := strings.Cut(v, "-")
	a, err := strconv.Atoi(lo)
	if err != nil || a <= 0 {
		return false
	}
	if !isRange {
		return true
	}
	b, err := strconv.Atoi(hi)
	return err == nil && b >= a
}

func attrProblems(p map[string]string) []string {
	var out []string
	if n := p["name"]; n != "" {
		ok := isAlnum(n[0])
		for i := 0; i < len(n); i++ {
			if !isAlnum(n[i]) && n[i] != '-' && n[i] != '.' {
				ok = false
			}
		}
		if !ok {
			out = append(out, fmt.Sprintf("invalid attr name: %s", n))
		}
	}
	t, v := p["type"], p["value"]
	if t == "" || v == "" {
		return out
	}
	switch t {
	case "string":
	case "int":
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			out = append(out, fmt.Sprintf("invalid int value: %s", v))
		}
	case "uint":
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			out = append(out, fmt.Sprintf("invalid uint value: %s", v))
		}
	case "boolean":
		if v != "true" && v != "false" {
			out = append(out, fmt.Sprintf("invalid boolean value: %s", v))
		}
	default:
		out = append(out, fmt.Sprintf("invalid type specified: %s", t))
	}
	return out
}

// verifyZoneConfig returns zonecfg's verify complaints.
func verifyZoneConfig(c *ZoneConfig) []string {
	var out []string
	if c.Zonepath == "" {
		out = append(out, "zonepath not specified")
	}
	if exclusiveOnlyBrands[c.Brand] && !c.exclusive() {
		out = append(out, fmt.Sprintf("ip-type: brand %s requires an exclusive IP type", c.Brand))
	}
	for _, n := range c.resources("net") {
		if c.exclusive() {
			if n.Props["address"] != "" {
				out = append(out, "net: address cannot be specified for an exclusive IP type")
			}
			if n.Props["defrouter"] != "" && n.Props["allowed-address"] == "" {
				out = append(out, "net: defrouter cannot be specified without allowed-address for an exclusive IP type")
			}
		} else {
			if n.Props["allowed-address"] != "" {
				out = append(out, "net: allowed-address cannot be specified for a shared IP type")
			}
			if n.Props["address"] == "" {
				out = append(out, "net: address not specified")
			}
		}
	}
	for _, d := range c.resources("dataset") {
		if datasetNameProblem(d.Props["name"]) != "" || strings.Contains(d.Props["name"], "@") {
			out = append(out, "dataset: name invalid")
		}
	}
	return out
}

// badPrivilege returns the first unknown privilege of a limitpriv list.
func badPrivilege(list string) string {
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimLeft(p, "!-")
		if p == "" || illumosPrivileges[p] {
			continue
		}
		return p
	}
	return ""
}

var illumosPrivileges = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Fields(`default all none zone basic
		contract_event contract_identity contract_observer cpc_cpu dtrace_kernel
		dtrace_proc dtrace_user file_chown file_chown_self file_dac_execute
		file_dac_read file_dac_search file_dac_write file_downgrade_sl
		file_flag_set file_link_any file_owner file_read file_setid
		file_upgrade_sl file_write graphics_access graphics_map ipc_dac_read
		ipc_dac_write ipc_owner net_access net_bindmlp net_icmpaccess
		net_mac_aware net_mac_implicit net_observability net_privaddr
		net_rawaccess proc_audit proc_chroot proc_clock_highres proc_exec
		proc_fork proc_info proc_lock_memory proc_owner proc_prioup
		proc_priocntl proc_secflags proc_session proc_setid proc_taskid
		proc_zone sys_acct sys_admin sys_audit sys_config sys_devices
		sys_dl_config sys_fs_import sys_ip_config sys_iptun_config
		sys_ipc_config sys_linkdir sys_mount sys_net_config sys_nfs
		sys_ppp_config sys_res_bind sys_res_config sys_resource sys_share
		sys_smb sys_suser_compat sys_time sys_trans_label virt_manage
		win_colormap win_config win_dac_read win_dac_write win_devices
		win_dga win_downgrade_sl win_fontpath win_mac_read win_mac_write
		win_selection win_upgrade_sl`) {
		m[p] = true
	}
	return m
}()
