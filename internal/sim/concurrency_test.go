package sim_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConcurrentUpdatesAreNotLost hammers one host with parallel creates
// and deletes of VNICs, datasets and zone configurations. Every command
// must succeed and the final state must hold exactly what was created and
// not deleted: no lost update, no torn state file.
func TestConcurrentUpdatesAreNotLost(t *testing.T) {
	h := newHost(t)
	h.must("zfs", "create", "tank/c")
	const workers, each = 6, 5
	var wg sync.WaitGroup
	errs := make(chan string, workers*each*8)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				vnic := fmt.Sprintf("v%d_%d", w, i)
				ds := fmt.Sprintf("tank/c/d%d-%d", w, i)
				zone := fmt.Sprintf("z%d-%d", w, i)
				steps := [][]string{
					{"dladm", "create-vnic", "-t", "-l", "net0", vnic},
					{"zfs", "create", "-o", "quota=1G", ds},
					{"zonecfg", "-z", zone, "create -b; set zonepath=/zones/" + zone},
				}
				if i%2 == 1 {
					steps = append(steps,
						[]string{"dladm", "delete-vnic", vnic},
						[]string{"zfs", "destroy", ds},
						[]string{"zonecfg", "-z", zone, "delete", "-F"})
				}
				for _, s := range steps {
					if r := h.run(s[0], s[1:]...); r.code != 0 {
						errs <- fmt.Sprintf("%v: %v", s, r)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var wantVnics, wantDS, wantZones []string
	for w := 0; w < workers; w++ {
		for i := 0; i < each; i += 2 {
			wantVnics = append(wantVnics, fmt.Sprintf("v%d_%d", w, i))
			wantDS = append(wantDS, fmt.Sprintf("tank/c/d%d-%d", w, i))
			wantZones = append(wantZones, fmt.Sprintf("z%d-%d", w, i))
		}
	}
	sort.Strings(wantVnics)
	sort.Strings(wantDS)
	sort.Strings(wantZones)
	st := h.state() // parses the JSON: a torn file would fail here
	var vnics, ds, zones []string
	for _, l := range st.Links {
		if l.Class == "vnic" {
			vnics = append(vnics, l.Name)
		}
	}
	for _, d := range st.Datasets {
		if strings.HasPrefix(d.Name, "tank/c/") {
			ds = append(ds, d.Name)
			if d.Props["quota"] != "1073741824" {
				t.Errorf("%s lost its quota: %v", d.Name, d.Props)
			}
		}
	}
	for _, z := range st.Zones {
		if z.Name != "global" {
			zones = append(zones, z.Name)
		}
	}
	sort.Strings(vnics)
	sort.Strings(zones)
	check := func(what string, got, want []string) {
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s:\n got %v\nwant %v", what, got, want)
		}
	}
	check("vnics", vnics, wantVnics)
	check("datasets", ds, wantDS)
	check("zones", zones, wantZones)
	// The commands agree with the state file.
	listed := strings.Fields(h.must("dladm", "show-vnic", "-p", "-o", "link"))
	sort.Strings(listed)
	check("show-vnic", listed, wantVnics)
}

// TestConcurrentCreateOfOneNameHasOneWinner checks the lock serialises
// racing creates of the same objects.
func TestConcurrentCreateOfOneNameHasOneWinner(t *testing.T) {
	h := newHost(t)
	const n = 8
	var wg sync.WaitGroup
	codes := make(chan int, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- h.run("zfs", "create", "tank/race").code
			codes <- h.run("dladm", "create-vnic", "-l", "net0", "race0").code
		}()
	}
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		if c == 0 {
			ok++
		}
	}
	if ok != 2 {
		t.Errorf("%d creates succeeded, want exactly 2 (one zfs, one dladm)", ok)
	}
}

// TestZoneAndHostCommandsInterleave runs, at once, commands that lock one
// zone (svcadm, the supervisors), commands that lock the host and then
// zones (boot, halt, zfs, dladm) and listings that lock nothing. None may
// deadlock or lose an update, and no zone's services may be lost.
func TestZoneAndHostCommandsInterleave(t *testing.T) {
	h := newHost(t)
	zones := []string{"c0", "c1", "c2"}
	for _, z := range zones {
		bootWithService(t, h, z, "s", "exec sleep 1000", "")
	}
	var wg sync.WaitGroup
	errs := make(chan string, 256)
	run := func(args ...string) {
		if r := h.run(args[0], args[1:]...); r.code != 0 {
			errs <- fmt.Sprintf("%v: %v", args, r)
		}
	}
	for _, z := range zones[:2] {
		wg.Add(1)
		go func(z string) {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				run("zlogin", z, "svcadm", "disable", "-s", "s")
				run("zlogin", z, "svcadm", "enable", "-s", "s")
			}
		}(z)
	}
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; i < 4; i++ {
			run("zoneadm", "-z", "c2", "halt")
			run("zoneadm", "-z", "c2", "boot")
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 8; i++ {
			run("zfs", "create", fmt.Sprintf("tank/i%d", i))
			run("dladm", "create-vnic", "-t", "-l", "net0", fmt.Sprintf("iv%d", i))
			run("zfs", "destroy", fmt.Sprintf("tank/i%d", i))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 12; i++ {
			run("zoneadm", "list", "-cp")
			run("svcs", "-Z", "-H")
			run("dladm", "show-vnic")
		}
	}()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, z := range zones {
		waitFor(t, 10*time.Second, z+" service online", func() bool {
			st, pid, _ := h.service(z, "svc:/site/s:default")
			return st == "online" && pid > 0
		})
	}
	if got := len(strings.Fields(h.must("dladm", "show-vnic", "-p", "-o", "link"))); got != 8 {
		t.Errorf("%d vnics, want 8", got)
	}
}
