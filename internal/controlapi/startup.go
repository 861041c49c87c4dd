package controlapi

import (
	"time"
)

// PodStartup is how a pod's first start went, as its lifecycle saw it:
// when it passed each step, and how long its node spent on the parts of
// building its zone. The lifecycle passes it with the status that first
// makes the pod Ready, and UpdatePodStatus measures the start from it.
type PodStartup struct {
	Scheduled   time.Time // bound to a node
	ImageReady  time.Time // its address held and its image on the node
	Provisioned time.Time // its zone built, containers online, supervised
	// Boot, Network and Containers are the node's own times for those
	// parts of the provision; the rest of Provisioned-ImageReady is the
	// install's (datasets, link, zone configuration and install, and the
	// request's way to the node).
	Boot, Network, Containers time.Duration `json:",omitempty"`
}

// The phases of a pod's start, in order; their times add up to the start.
const (
	StartupScheduling = "scheduling" // creation to bound to a node
	StartupImage      = "image"      // bound to address and image on the node
	StartupInstall    = "install"    // the zone's datasets, link, configuration and install
	StartupBoot       = "boot"       // the zone's boot
	StartupNetwork    = "network"    // the zone's address and route
	StartupContainers = "containers" // services imported, online, supervised
	StartupReady      = "ready"      // supervised to Ready (readiness probes)
)

// Phases divides the start from created to ready into its phases: each
// step's time on the lifecycle's clock, the provision divided as its node
// measured it. A phase is never negative (a clock step back makes it 0).
func (s PodStartup) Phases(created, ready time.Time) (total time.Duration, phases map[string]time.Duration) {
	span := func(from, to time.Time) time.Duration {
		if from.IsZero() || to.IsZero() || to.Before(from) {
			return 0
		}
		return to.Sub(from)
	}
	provision := span(s.ImageReady, s.Provisioned)
	onNode := s.Boot + s.Network + s.Containers
	if onNode > provision {
		// The node's times cannot exceed the provision around them;
		// scale them into it so the phases still add up.
		scale := float64(provision) / float64(onNode)
		s.Boot = time.Duration(float64(s.Boot) * scale)
		s.Network = time.Duration(float64(s.Network) * scale)
		s.Containers = provision - s.Boot - s.Network
		onNode = provision
	}
	phases = map[string]time.Duration{
		StartupScheduling: span(created, s.Scheduled),
		StartupImage:      span(s.Scheduled, s.ImageReady),
		StartupInstall:    provision - onNode,
		StartupBoot:       s.Boot,
		StartupNetwork:    s.Network,
		StartupContainers: s.Containers,
		StartupReady:      span(s.Provisioned, ready),
	}
	return span(created, ready), phases
}
