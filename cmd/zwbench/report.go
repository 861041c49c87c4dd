package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"text/tabwriter"
)

var stderr io.Writer = os.Stderr

func (r *Results) print(w io.Writer) {
	if r.PeakRSS != nil { // the sections of the first stack ran
		r.printSections(w)
	}
	if r.Scale != nil {
		r.Scale.print(w)
	}
	if r.NAT != nil {
		r.NAT.print(w)
	}
	if r.APIGet != nil {
		r.APIGet.print(w)
	}
	if r.DNS != nil {
		r.DNS.print(w)
	}
	if r.Heartbeats != nil {
		r.Heartbeats.print(w)
	}
	if r.Store != nil {
		r.Store.print(w)
	}
	if r.Isolation != nil {
		r.Isolation.print(w)
	}
}

// verdict says whether a target holds.
func verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}

func (r *NATResults) print(w io.Writer) {
	fmt.Fprintf(w, "\nservice NAT: %d endpoint changes on %d nodes, snapshot → each node's rules read back in force\n", r.Changes, r.Nodes)
	fmt.Fprintf(w, "  p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms\n", r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
}

func (r *Results) printSections(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "measure\tp50\tp95\tp99\tmax\n")
	row := func(name string, p Percentiles) {
		fmt.Fprintf(tw, "%s\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms\n", name, p.P50, p.P95, p.P99, p.Max)
	}
	row(fmt.Sprintf("idle create→Running (%d pods, one at a time)", r.IdlePods), r.IdleCreateToRun)
	row(fmt.Sprintf("burst create→Running (%d pods at once)", r.BurstPods), r.BurstCreateToRun)
	row(fmt.Sprintf("burst delete→gone (%d pods)", r.BurstPods), r.BurstDelete)
	tw.Flush()
	fmt.Fprintf(w, "\nburst throughput        %.1f pods/s\n", r.BurstThroughput)
	fmt.Fprintf(w, "ceiling                 %.1f workflows/s (%d no-op local activities and %d activities each, %d at once)\n",
		r.Ceiling, r.CeilingShape.Local, r.CeilingShape.Remote, r.BurstPods)
	fmt.Fprintf(w, "burst / ceiling         %.0f%% (target ≥ %.0f%%: %s)\n", 100*r.Ratio, 100*targetBurstToCeiling, verdict(r.Ratio >= targetBurstToCeiling))
	if f := r.HostFloor; f != nil {
		fmt.Fprintf(w, "host floor              %.1f pods/s (the provisions alone, %d at once on %d fresh simulated nodes, no Temporal;\n", f.PodsPerSecond, f.Pods, f.Nodes)
		fmt.Fprintf(w, "                        %.1f illumos commands and %.1f ms CPU a pod, %.1f ms of it in the commands)\n", f.CommandsPerPod, f.CPUMsPerPod, f.CommandsMsPerPod)
		fmt.Fprintf(w, "machine ceiling         %.1f pods/s (1 / (1/ceiling + 1/host floor): both kinds of work sharing the CPU)\n", r.MachineCeiling)
		fmt.Fprintf(w, "burst / machine ceiling %.0f%% (the same target against it: %s)\n", 100*r.MachineRatio, verdict(r.MachineRatio >= targetBurstToCeiling))
		fmt.Fprintf(w, "\nillumos commands per provision (host floor)\n")
		cmds := make([]string, 0, len(f.CommandsByName))
		for n := range f.CommandsByName {
			cmds = append(cmds, n)
		}
		sort.Strings(cmds)
		for _, n := range cmds {
			fmt.Fprintf(w, "  %-55s %6.2f\n", n, f.CommandsByName[n])
		}
	}
	fmt.Fprintf(w, "\nburst CPU per pod (create to Running)\n")
	parts := make([]string, 0, len(r.BurstCPU))
	for n := range r.BurstCPU {
		parts = append(parts, n)
	}
	sort.Strings(parts)
	for _, n := range parts {
		fmt.Fprintf(w, "  %-55s %6.1f ms\n", n, r.BurstCPU[n])
	}
	fmt.Fprintf(w, "\npeak RSS\n")
	names := make([]string, 0, len(r.PeakRSS))
	for n := range r.PeakRSS {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-55s %6.0f MiB\n", n, float64(r.PeakRSS[n])/1024)
	}
	if r.Steady != nil {
		r.Steady.print(w)
	}
}

func (r *ScaleResults) print(w io.Writer) {
	const mib = 1024.0
	last := r.Steps[len(r.Steps)-1]
	mode := "shared loopback"
	if r.Isolated {
		mode = "isolation mode"
	}
	fmt.Fprintf(w, "\nscale: %d pods on %d nodes (%s), Running and Ready, one exec probe each every %.0f s; %.0f s window a step\n",
		r.Pods, r.Nodes, mode, r.ProbePeriodSeconds, last.WindowSeconds)
	fmt.Fprintf(w, "  the nodes fit %d such pods (at most %d a node); the scheduler put %d–%d on each\n",
		r.PodsTheNodesFit, r.MaxPodsPerNode, r.PodsPerNodeMin, r.PodsPerNodeMax)
	fmt.Fprintf(w, "  machine: %d CPUs, %.1f GiB; %.1f GiB available at %d pods; Temporal on %s; %s\n",
		r.MachineCPUs, float64(r.MachineMemKiB)/mib/mib, float64(last.MemAvailableKiB)/mib/mib, last.Pods, r.TemporalStore, r.CPU)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  measure\tp50\tp95\tp99\tmax\n")
	row := func(name string, p Percentiles) {
		fmt.Fprintf(tw, "  %s\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms\n", name, p.P50, p.P95, p.P99, p.Max)
	}
	row(fmt.Sprintf("create→Running, all %d pods (%d creations in flight)", r.Pods, r.CreateInFlight), r.CreateToRunning)
	row(fmt.Sprintf("create→Ready, all %d pods", r.Pods), r.CreateToReady)
	tw.Flush()
	fmt.Fprintf(w, "  pods reached Running at %.1f pods/s (each step's first creation → its last pod Running)\n\n", r.RunningPodsPerSecond)

	// One row a step. Δ columns are less the stack without pods, per pod:
	// the same at every step means a cost linear in pods.
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pods\tReady\tRunning in\tReady in\tCPU %% of a core\t/100 pods\tΔ /100 pods\tRSS MiB\t/pod\tΔ /pod\tPSS MiB\tΔ /pod\tevents/pod/min\tTemporal req/s\tprobe CPU ms\tsim state KiB/node\tmachine CPU %%\t\n")
	for i, st := range r.Steps {
		ev := fmt.Sprintf("%.1f (max %.1f)", st.EventsPerPodMinuteMedian, st.EventsPerPodMinuteMax)
		if i == 0 {
			fmt.Fprintf(tw, "%d\t–\t–\t–\t%.1f\t–\t–\t%.0f\t–\t–\t%.0f\t–\t–\t%.1f\t–\t%.0f\t%.0f\t\n",
				st.Pods, st.CPUPercent, float64(st.RSSKiB)/mib, float64(st.PSSKiB)/mib, st.RequestsPerSecond, st.SimStateKiB, st.MachineCPUPercent)
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%.0f s\t%.0f s\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t%.2f\t%.0f\t%.2f\t%s\t%.1f\t%.1f\t%.0f\t%.0f\t\n",
			st.Pods, st.PodsReady, st.RunningSeconds, st.ReadySeconds, st.CPUPercent, st.CPUPer100Pods, st.CPUPer100PodsAboveEmpty,
			float64(st.RSSKiB)/mib, st.RSSKiBPerPod/mib, st.RSSKiBPerPodAboveEmpty/mib,
			float64(st.PSSKiB)/mib, st.PSSKiBPerPodAboveEmpty/mib, ev, st.RequestsPerSecond, st.ProbeCPUMs, st.SimStateKiB, st.MachineCPUPercent)
	}
	tw.Flush()
	fmt.Fprintf(w, "  (Δ: above the stack without pods, per pod; the same at every step = cost linear in pods.\n")
	fmt.Fprintf(w, "   RSS counts shared pages in every process, PSS splits them; machine CPU includes whatever else runs.)\n")
	fmt.Fprintf(w, "  straight line through the steps, cost = a + b × pods (R² = 1: exactly linear):\n")
	fmt.Fprintf(w, "    CPU  a = %.1f %% of a core, b = %.2f %% per 100 pods, R² = %.3f\n", r.CPUFit.Intercept, r.CPUFit.Slope, r.CPUFit.R2)
	fmt.Fprintf(w, "    RSS  a = %.0f MiB, b = %.2f MiB per pod, R² = %.3f\n", r.RSSFit.Intercept/mib, r.RSSFit.Slope/mib, r.RSSFit.R2)
	fmt.Fprintf(w, "    PSS  a = %.0f MiB, b = %.2f MiB per pod, R² = %.3f\n", r.PSSFit.Intercept/mib, r.PSSFit.Slope/mib, r.PSSFit.R2)
	fmt.Fprintf(w, "  floor at %d pods: the probe executions alone, %.1f %% of a core per 100 pods (%.2f ms CPU each)\n", r.Pods, r.FloorCPUPer100Pods, r.ProbeCPUMs)

	r.printGroups(w)
	r.printHeadroom(w)
	if r.Stream != nil {
		r.Stream.print(w)
	}
	if d := r.Drain; d != nil {
		fmt.Fprintf(w, "\n  drain of %s with %d pods: %d running on other nodes %.1f s after the first request (%d requests)\n", d.Node, d.Pods, d.Moved, d.Seconds, d.Requests)
		if d.Error != "" {
			fmt.Fprintf(w, "  the drain failed: %s\n", d.Error)
		}
	}
	if st := r.Stop; st != nil {
		fmt.Fprintf(w, "\n  stopping the whole stack with every pod running (as Ctrl-C of make dev) took %.1f s, the nodes %.1f s of it (target ≤ 30 s); %d of its processes were left %s later (target 0)\n",
			st.Seconds, st.NodesSeconds, st.ProcessesLeft, leftoverSettle)
	}
	if r.Restart != nil {
		r.Restart.print(w)
	}
	fmt.Fprintf(w, "  the section took %.0f s\n", r.ElapsedSeconds)
}

func (r *RestartResults) print(w io.Writer) {
	const mib = 1024.0
	if r.AllRunSeconds == 0 {
		fmt.Fprintf(w, "  started again on its directory, the control plane as a serve and a temporal process: API ready in %.1f s; stopped short: %s\n",
			r.StartSeconds, r.Error)
		return
	}
	fmt.Fprintf(w, "  started again on its directory, the control plane as a serve and a temporal process: API ready in %.1f s, every one of %d pods' zones running and the pod Running and Ready in %.1f s;\n",
		r.StartSeconds, r.Pods, r.AllRunSeconds)
	fmt.Fprintf(w, "    zones installed anew %d, pods replaced %d (target 0, 0: every pod adopted)\n", r.ZonesReinstalled, r.PodsReplaced)
	fmt.Fprintf(w, "  memory by part with every pod running (RSS / PSS, MiB; per pod: PSS over %d pods, an upper bound, fixed costs included):\n", r.Pods)
	for _, label := range slices.Sorted(maps.Keys(r.Memory)) {
		m := r.Memory[label]
		fmt.Fprintf(w, "    %-50s %8.0f / %8.0f  %6.3f MiB per pod  (%d processes)\n", label, float64(m.RSS)/mib, float64(m.PSS)/mib, float64(m.PSS)/mib/float64(max(r.Pods, 1)), m.Processes)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "  the restart section stopped short: %s\n", r.Error)
	}
	if k := r.Kill; k != nil {
		fmt.Fprintf(w, "  kill -9 of serve, Temporal and PostgreSQL at once: API ready in %.1f s; every lifecycle answered a query in %.1f s (target ≤ 60 s, %d did not);\n",
			k.APIReadySeconds, k.LifecyclesSeconds, k.LifecyclesUnanswered)
		fmt.Fprintf(w, "    every pod listed Running and Ready in %.1f s; a new pod Running %.1f s after its creation; zones booted again %d, pods replaced %d (target 0, 0)\n",
			k.AllReadySeconds, k.NewPodRunningSeconds, k.ZonesRebooted, k.PodsReplaced)
	}
}

func (r *SteadyResults) print(w io.Writer) {
	fmt.Fprintf(w, "\nsteady state: %d pods Running and Ready, one exec probe each every %.0f s, %.0f s window\n",
		r.Pods, r.ProbePeriodSeconds, r.WindowSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  measure\tmeasured\ttarget\n")
	fmt.Fprintf(tw, "  history events per pod per minute, median (mean, max)\t%.1f (%.1f, %.1f)\t%.0f\n",
		r.EventsPerPodMinuteMedian, r.EventsPerPodMinuteMean, r.EventsPerPodMinuteMax, r.TargetEventsPerPodMinute)
	fmt.Fprintf(tw, "  history events in the window, all pods\t%d\t\n", r.EventsTotal)
	fmt.Fprintf(tw, "  pods that continued-as-new in the window\t%d\t\n", r.PodsContinuedAsNew)
	fmt.Fprintf(tw, "  pods still Ready at the end\t%d / %d\t\n", r.PodsReadyAtEnd, r.Pods)
	fmt.Fprintf(tw, "  Temporal requests/s, no pods → %d pods\t%.1f → %.1f\t\n", r.Pods, r.RequestsPerSecondNoPods, r.RequestsPerSecond)
	fmt.Fprintf(tw, "  stack CPU, %% of a core, no pods → %d pods\t%.1f → %.1f\t\n", r.Pods, r.StackCPUNoPods, r.StackCPU)
	fmt.Fprintf(tw, "  stack CPU per 100 pods\t%.1f %%\t≤ %.1f %% (%.1f× floor)\n", r.StackCPUPer100Pods, r.TargetStackToFloor*r.FloorCPUPer100Pods, r.TargetStackToFloor)
	fmt.Fprintf(tw, "  pods' share of it (less the stack without pods) per 100 pods\t%.1f %%\t\n", r.PodsCPUPer100Pods)
	fmt.Fprintf(tw, "  floor: probe executions alone per 100 pods (%.2f ms CPU each: %.2f the command, %.2f the process running it; %d probes)\t%.1f %%\t\n",
		r.ProbeCPUMs, r.ProbeCommandsCPUMs, r.ProbeProcessCPUMs, r.FloorProbes, r.FloorCPUPer100Pods)
	fmt.Fprintf(tw, "  stack CPU / floor\t%.1f×\t≤ %.1f× (%s)\n", r.StackToFloor, r.TargetStackToFloor, verdict(r.StackToFloor <= r.TargetStackToFloor))
	fmt.Fprintf(tw, "  pods' share / floor\t%.1f×\t\n", r.PodsToFloor)
	fmt.Fprintf(tw, "  (before: the floor as the probe commands alone, per 100 pods\t%.1f %%\t)\n", r.CommandsFloorCPUPer100Pods)
	fmt.Fprintf(tw, "  (stack CPU / that floor\t%.1f×\t)\n", r.StackToCommandsFloor)
	tw.Flush()
	fmt.Fprintf(w, "\n  busiest Temporal calls, no pods → %d pods\n", r.Pods)
	for _, m := range topMethods(r.RequestsByMethod, 8) {
		fmt.Fprintf(w, "    %-53s %6.1f → %5.1f /s\n", m, r.RequestsByMethodNoPods[m], r.RequestsByMethod[m])
	}
	fmt.Fprintf(w, "\n  stack CPU by process, no pods → %d pods\n", r.Pods)
	for _, n := range slices.Sorted(maps.Keys(r.StackCPUByProcess)) {
		fmt.Fprintf(w, "    %-53s %6.1f → %5.1f %% of a core\n", n, r.StackCPUByProcessNoPods[n], r.StackCPUByProcess[n])
	}
}

func (r *ScaleResults) printHeadroom(w io.Writer) {
	fmt.Fprintf(w, "\n  finite resources: a straight line through the steps, and where it meets the machine's limit\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  resource\tlimit\tat %d pods\tper pod\tR²\truns out at\n", r.Pods)
	for _, h := range r.Headroom {
		at := "does not grow"
		if h.RunsOut > 0 {
			at = fmt.Sprintf("%d pods", h.RunsOut)
		}
		fmt.Fprintf(tw, "  %s\t%.0f %s\t%.0f\t%.3g\t%.3f\t%s\n", h.Resource, h.Limit, h.Unit, h.Fit.Intercept+h.Fit.Slope*float64(r.Pods), h.Fit.Slope, h.Fit.R2, at)
	}
	tw.Flush()
	if r.FirstToRunOut != "" {
		fmt.Fprintf(w, "  first to run out: %s, at about %d pods\n", r.FirstToRunOut, r.FirstRunsOutAtPods)
	}
}

func (r *StreamResults) print(w io.Writer) {
	fmt.Fprintf(w, "\n  stream: pods created at a steady rate on top of the others, while the API is read, written and watched\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pods/s\tpods\tlate\tcreate→Running p50\tp99\tcreate p99\tupdate p99\tGET p99\tLIST all (pages) p99\twatch delivery p99 (watchers)\tmissed\terrors\t\n")
	for _, x := range r.Rates {
		fmt.Fprintf(tw, "%.1f\t%d\t%d\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms (%d)\t%.0f ms (%d)\t%d\t%d\t\n",
			x.PodsPerSecond, x.Pods, x.StartedLate, x.CreateToRunning.P50, x.CreateToRunning.P99, x.Create.P99, x.Update.P99, x.Get.P99,
			x.List.P99, x.ListPages, x.WatchDelivery.P99, x.Watchers, x.WatchMissed, x.Errors)
	}
	tw.Flush()
	fmt.Fprintf(w, "  sustained (create→Running p99 ≤ %.0f s): %.1f pods/s\n", r.StartupTargetMs/1000, r.SustainedPodsPerSecond)
	for _, x := range r.Rates {
		if x.FirstError != "" {
			fmt.Fprintf(w, "  at %.1f pods/s, first API error: %s\n", x.PodsPerSecond, x.FirstError)
		}
	}
}

// printGroups prints each process group's CPU and memory at every step.
func (r *ScaleResults) printGroups(w io.Writer) {
	const mib = 1024.0
	last := r.Steps[len(r.Steps)-1]
	groups := make([]string, 0, len(last.Memory))
	for g := range last.CPUPercentByGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	fmt.Fprintf(w, "\n  by process group, at each step\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t")
	for _, st := range r.Steps {
		fmt.Fprintf(tw, "%d pods\t", st.Pods)
	}
	fmt.Fprintf(tw, "\n")
	table := func(title string, value func(ScaleStep, string) string) {
		fmt.Fprintf(tw, "%s\t\n", title)
		for _, g := range groups {
			fmt.Fprintf(tw, "%s\t", g)
			for _, st := range r.Steps {
				fmt.Fprintf(tw, "%s\t", value(st, g))
			}
			fmt.Fprintf(tw, "\n")
		}
	}
	table("CPU % of a core", func(st ScaleStep, g string) string { return fmt.Sprintf("%.1f", st.CPUPercentByGroup[g]) })
	table("creating the step's pods, CPU ms a pod", func(st ScaleStep, g string) string {
		if st.CreationCPUMsPerPodByGroup == nil {
			return "–"
		}
		return fmt.Sprintf("%.0f", st.CreationCPUMsPerPodByGroup[g])
	})
	table("RSS MiB", func(st ScaleStep, g string) string { return fmt.Sprintf("%.0f", float64(st.Memory[g].RSS)/mib) })
	table("PSS MiB", func(st ScaleStep, g string) string { return fmt.Sprintf("%.0f", float64(st.Memory[g].PSS)/mib) })
	table("processes", func(st ScaleStep, g string) string { return strconv.Itoa(st.Memory[g].Processes) })
	tw.Flush()
	for _, st := range r.Steps {
		if st.CreationCPUMsPerPodByGroup != nil {
			fmt.Fprintf(w, "  the simulator's share (its commands and zones) at %d pods: %.0f%% of the stack's CPU at rest, %.0f%% of creating the step's pods\n",
				st.Pods, 100*simulatorShare(st.CPUPercentByGroup), 100*simulatorShare(st.CreationCPUMsPerPodByGroup))
		}
	}
}

// simulatorShare is the fraction of a CPU breakdown by group taken by the
// simulator: the commands the agents run and the simulated zones.
func simulatorShare(byGroup map[string]float64) float64 {
	total := 0.0
	for _, v := range byGroup {
		total += v
	}
	if total <= 0 {
		return 0
	}
	return (byGroup[commandsLabel] + byGroup[zonesLabel]) / total
}
