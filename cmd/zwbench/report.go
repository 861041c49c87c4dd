package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
)

var stderr io.Writer = os.Stderr

func (r *Results) print(w io.Writer) {
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
	fmt.Fprintf(w, "ceiling                 %.1f workflows/s (%d no-op activities each, %d at once)\n", r.Ceiling, r.CeilingSteps, r.BurstPods)
	fmt.Fprintf(w, "burst / ceiling         %.0f%%\n\npeak RSS\n", 100*r.Ratio)
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
	fmt.Fprintf(tw, "  floor: probe commands alone per 100 pods (%.2f ms CPU each, %d runs)\t%.1f %%\t\n", r.ProbeCPUMs, r.FloorProbes, r.FloorCPUPer100Pods)
	fmt.Fprintf(tw, "  stack CPU / floor\t%.1f×\t≤ %.1f×\n", r.StackToFloor, r.TargetStackToFloor)
	fmt.Fprintf(tw, "  pods' share / floor\t%.1f×\t\n", r.PodsToFloor)
	tw.Flush()
	fmt.Fprintf(w, "\n  busiest Temporal calls, no pods → %d pods\n", r.Pods)
	for _, m := range topMethods(r.RequestsByMethod, 8) {
		fmt.Fprintf(w, "    %-53s %6.1f → %5.1f /s\n", m, r.RequestsByMethodNoPods[m], r.RequestsByMethod[m])
	}
	fmt.Fprintf(w, "\n  stack CPU by process, no pods → %d pods\n", r.Pods)
	names := make([]string, 0, len(r.StackCPUByProcess))
	for n := range r.StackCPUByProcess {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "    %-53s %6.1f → %5.1f %% of a core\n", n, r.StackCPUByProcessNoPods[n], r.StackCPUByProcess[n])
	}
}
