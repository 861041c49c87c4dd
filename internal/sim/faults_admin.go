package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"
)

// illumos-sim fault: editing the host's fault rules (faults.json) under the
// host lock.

// withFaultsFile edits faults.json under the host lock.
func withFaultsFile(h *host, fn func(c *FaultConfig) bool) error {
	l, err := h.lockHost(true)
	if err != nil {
		return err
	}
	defer l.release()
	c, err := readFaultConfig(h.faultsPath())
	if err != nil {
		return err
	}
	if !fn(c) {
		return nil
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(h.faultsPath(), append(b, '\n'))
}

const faultUsage = `usage: illumos-sim fault [--root ROOT] show
       illumos-sim fault clear [KEY]
       illumos-sim fault seed N
       illumos-sim fault latency KEY DURATION
       illumos-sim fault stream-rate KEY BYTES_PER_SECOND
       illumos-sim fault fail-next KEY COUNT [--stderr TEXT] [--exit N] [--brand-exit N]
       illumos-sim fault probability KEY P
       illumos-sim fault hang KEY | unhang KEY
KEY is "CMD", "CMD SUB" or "CMD SUB ZONE", e.g. "zoneadm install".`

// adminFault edits the host's fault rules.
func adminFault(h *host, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, faultUsage)
		return 2
	}
	bad := func() int { fmt.Fprintln(stderr, faultUsage); return 2 }
	var err error
	switch args[0] {
	case "show":
		c, e := readFaultConfig(h.faultsPath())
		if e != nil {
			err = e
			break
		}
		b, _ := json.MarshalIndent(c, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	case "clear":
		key := ""
		if len(args) > 1 {
			key = args[1]
		}
		err = withFaultsFile(h, func(c *FaultConfig) bool {
			if key == "" {
				*c = FaultConfig{}
				return true
			}
			delete(c.Latency, key)
			delete(c.StreamRate, key)
			delete(c.FailRate, key)
			delete(c.FailNext, key)
			var hang []string
			for _, k := range c.Hang {
				if k != key {
					hang = append(hang, k)
				}
			}
			c.Hang = hang
			return true
		})
		if err == nil {
			err = h.update(func(st *State) bool {
				if key == "" {
					st.FaultCalls = nil
				} else {
					delete(st.FaultCalls, key)
				}
				return true
			})
		}
	case "seed":
		if len(args) != 2 {
			return bad()
		}
		n, e := strconv.ParseInt(args[1], 10, 64)
		if e != nil {
			return bad()
		}
		err = withFaultsFile(h, func(c *FaultConfig) bool { c.Seed = n; return true })
	case "latency":
		if len(args) != 3 {
			return bad()
		}
		d, e := time.ParseDuration(args[2])
		if e != nil {
			return bad()
		}
		err = withFaultsFile(h, func(c *FaultConfig) bool {
			if c.Latency == nil {
				c.Latency = map[string]Duration{}
			}
			c.Latency[args[1]] = Duration(d)
			return true
		})
	case "stream-rate":
		if len(args) != 3 {
			return bad()
		}
		if n, ok := parseZfsSize(args[2]); !ok || n == 0 {
			return bad()
		}
		err = withFaultsFile(h, func(c *FaultConfig) bool {
			if c.StreamRate == nil {
				c.StreamRate = map[string]string{}
			}
			c.StreamRate[args[1]] = args[2]
			return true
		})
	case "fail-next":
		if len(args) < 3 {
			return bad()
		}
		n, e := strconv.Atoi(args[2])
		if e != nil || n < 0 {
			return bad()
		}
		rule := &FailNextRule{Count: n}
		for i := 3; i+1 < len(args); i += 2 {
			switch args[i] {
			case "--stderr":
				rule.Stderr = args[i+1]
			case "--exit":
				rule.Exit, e = strconv.Atoi(args[i+1])
			case "--brand-exit":
				rule.BrandExit, e = strconv.Atoi(args[i+1])
			default:
				return bad()
			}
			if e != nil {
				return bad()
			}
		}
		err = withFaultsFile(h, func(c *FaultConfig) bool {
			if c.FailNext == nil {
				c.FailNext = map[string]*FailNextRule{}
			}
			c.FailNext[args[1]] = rule
			return true
		})
	case "probability":
		if len(args) != 3 {
			return bad()
		}
		p, e := strconv.ParseFloat(args[2], 64)
		if e != nil || p < 0 || p > 1 {
			return bad()
		}
		err = withFaultsFile(h, func(c *FaultConfig) bool {
			if c.FailRate == nil {
				c.FailRate = map[string]float64{}
			}
			c.FailRate[args[1]] = p
			return true
		})
		if err == nil {
			// A new rate starts its sequence from the beginning.
			err = h.update(func(st *State) bool { delete(st.FaultCalls, args[1]); return true })
		}
	case "hang", "unhang":
		if len(args) != 2 {
			return bad()
		}
		err = withFaultsFile(h, func(c *FaultConfig) bool {
			var hang []string
			for _, k := range c.Hang {
				if k != args[1] {
					hang = append(hang, k)
				}
			}
			if args[0] == "hang" {
				hang = append(hang, args[1])
			}
			sort.Strings(hang)
			c.Hang = hang
			return true
		})
	default:
		return bad()
	}
	if err != nil {
		fmt.Fprintf(stderr, "illumos-sim fault: %v\n", err)
		return 1
	}
	return 0
}
