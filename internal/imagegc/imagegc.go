// Package imagegc is the arithmetic of a node's image garbage collection,
// as the kubelet's: when the pool holding the images is used at or above
// the high threshold, the images no pod on the node uses are removed,
// least recently used first, until the estimated usage is below the low
// threshold. It is pure, so it is tested without PostgreSQL or Temporal.
package imagegc

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults are the kubelet's (--image-gc-high-threshold,
// --image-gc-low-threshold), in percent of the image filesystem.
const (
	DefaultHighThreshold = 85
	DefaultLowThreshold  = 80
)

// Thresholds say when to collect and where to stop, in percent of the
// pool. High 100 turns collection off.
type Thresholds struct {
	High, Low int
}

// Check refuses thresholds outside 0 < low < high <= 100.
func (t Thresholds) Check() error {
	if t.High <= 0 || t.High > 100 {
		return fmt.Errorf("image GC high threshold %d%%: must be in 1..100", t.High)
	}
	if t.Low <= 0 || t.Low >= t.High {
		return fmt.Errorf("image GC low threshold %d%%: must be above 0 and below the high threshold %d%%", t.Low, t.High)
	}
	return nil
}

// Off reports whether collection is turned off.
func (t Thresholds) Off() bool { return t.High >= 100 }

// Image is one image on the node as the choice sees it.
type Image struct {
	Name string
	// Bytes is what removing it is estimated to free.
	Bytes int64
	// LastUsed is when a pod on the node last used it (or it was pulled).
	LastUsed time.Time
	// InUse: a pod assigned to the node uses it (any phase but gone).
	InUse bool
}

// Choice is what to remove from one node.
type Choice struct {
	// Remove lists the images to remove, least recently used first.
	Remove []Image
	// Used and Size are the pool's usage and size before; Left is the
	// estimated usage after.
	Used, Size, Left int64
	// Short: removing every unused image does not bring the usage below
	// the low threshold (the kubelet's FreeDiskSpaceFailed).
	Short bool
}

// Collect is true when the choice removes something or falls short.
func (c Choice) Collect() bool { return len(c.Remove) > 0 || c.Short }

// Choose picks the images to remove from a node whose pool holds size
// bytes with used in use. Nothing is chosen below the high threshold.
func Choose(t Thresholds, used, size int64, images []Image) Choice {
	c := Choice{Used: used, Size: size, Left: used}
	if t.Off() || size <= 0 || used*100 < int64(t.High)*size {
		return c
	}
	unused := slices.DeleteFunc(slices.Clone(images), func(i Image) bool { return i.InUse })
	slices.SortStableFunc(unused, func(a, b Image) int {
		if d := a.LastUsed.Compare(b.LastUsed); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, img := range unused {
		if below(t, c.Left, size) {
			break
		}
		c.Remove = append(c.Remove, img)
		c.Left -= img.Bytes
	}
	c.Short = !below(t, c.Left, size)
	return c
}

func below(t Thresholds, used, size int64) bool { return used*100 < int64(t.Low)*size }
