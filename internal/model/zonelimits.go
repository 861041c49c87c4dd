package model

import (
	"fmt"
	"strconv"
)

// ResourceEphemeralStorage is a container's scratch space, as in
// Kubernetes: the pod's sum becomes its zone dataset's quota, which
// holds the zone's root and its emptyDirs.
const ResourceEphemeralStorage = "ephemeral-storage"

// Annotations that lower a pod's zone process limits (zonecfg's max-lwps
// and max-processes) below its node's, never above.
const (
	AnnotationMaxProcesses = "zonewright.io/max-processes"
	AnnotationMaxLWPs      = "zonewright.io/max-lwps"
)

// Bounds of a zone's process limits: zonecfg refuses an aliased
// max-lwps or max-processes below 100 (libzonecfg's low limit), and the
// kernel counts both in an int.
const (
	MinZoneProcessLimit int64 = 100
	MaxZoneProcessLimit int64 = 1<<31 - 1
)

// ZoneProcessLimits are a pod's asked process limits; 0 asks for none.
type ZoneProcessLimits struct {
	MaxProcesses int64 `json:",omitempty"`
	MaxLWPs      int64 `json:",omitempty"`
}

// PodZoneProcessLimits reads the limits a pod's annotations ask for;
// a value validation refuses reads as none.
func PodZoneProcessLimits(m *ObjectMeta) ZoneProcessLimits {
	read := func(k string) int64 {
		n, err := strconv.ParseInt(m.Annotations[k], 10, 64)
		if err != nil || n < MinZoneProcessLimit || n > MaxZoneProcessLimit {
			return 0
		}
		return n
	}
	return ZoneProcessLimits{MaxProcesses: read(AnnotationMaxProcesses), MaxLWPs: read(AnnotationMaxLWPs)}
}

// validateZoneLimitAnnotations checks the process limit annotations.
func validateZoneLimitAnnotations(m *ObjectMeta) FieldErrors {
	var errs FieldErrors
	for _, k := range []string{AnnotationMaxProcesses, AnnotationMaxLWPs} {
		v, ok := m.Annotations[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < MinZoneProcessLimit || n > MaxZoneProcessLimit {
			errs.add(fmt.Sprintf("metadata.annotations[%s]", k), FieldInvalid,
				"Invalid value: %q: must be a whole number from %d to %d", v, MinZoneProcessLimit, MaxZoneProcessLimit)
		}
	}
	return errs
}

// PodCaps sums what a pod may use over its containers, a container's
// limit, else its request: its zone's CPU (millicores) and memory (bytes)
// caps; 0 sets none.
func PodCaps(spec *PodSpec) (milliCPU, memoryBytes int64) {
	limitElseRequest := func(c Container, name string, parse func(string) (int64, error)) int64 {
		v, ok := c.Resources.Limits[name]
		if !ok {
			v, ok = c.Resources.Requests[name]
		}
		if !ok {
			return 0
		}
		n, _ := parse(v) // validated at admission
		return n
	}
	for _, c := range spec.Containers {
		milliCPU += limitElseRequest(c, ResourceCPU, MilliCPU)
		memoryBytes += limitElseRequest(c, ResourceMemory, Bytes)
	}
	return milliCPU, memoryBytes
}

// PodEphemeralStorage sums the pod's ephemeral storage over its
// containers (a container's limit, else its request, as the zone's
// other caps): the bytes its zone dataset may hold; 0 sets none.
func PodEphemeralStorage(spec *PodSpec) int64 {
	var sum int64
	for _, c := range spec.Containers {
		v, ok := c.Resources.Limits[ResourceEphemeralStorage]
		if !ok {
			v, ok = c.Resources.Requests[ResourceEphemeralStorage]
		}
		if !ok {
			continue
		}
		if n, err := Bytes(v); err == nil && n > 0 {
			sum += n
		}
	}
	return sum
}
