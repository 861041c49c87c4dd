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
}
