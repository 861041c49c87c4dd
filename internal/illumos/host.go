package illumos

// Host gathers the typed operations on one illumos host, all running
// their commands through one Executor.
//
//	h := illumos.Host{Runner: &illumos.Runner{}}
//	err := h.Zoneadm().Boot(ctx, "web01")
type Host struct{ Runner Executor }

func (h Host) Zonecfg() Zonecfg { return Zonecfg{Runner: h.Runner} }
func (h Host) Zoneadm() Zoneadm { return Zoneadm{Runner: h.Runner} }
func (h Host) Dladm() Dladm     { return Dladm{Runner: h.Runner} }
func (h Host) ZFS() ZFS         { return ZFS{Runner: h.Runner} }
func (h Host) Zpool() Zpool     { return Zpool{Runner: h.Runner} }
func (h Host) Ipnat() Ipnat     { return Ipnat{Runner: h.Runner} }

// Zone runs commands inside the running zone name (through zlogin).
func (h Host) Zone(name string) InZone { return InZone{Runner: h.Runner, Zone: name} }
