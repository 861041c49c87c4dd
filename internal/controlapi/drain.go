package controlapi

import (
	"time"
)

// EndpointsLeftInput is a terminating pod whose traffic must stop
// arriving before its containers are stopped.
type EndpointsLeftInput struct {
	Pod PodRef
	IP  string
	// Until bounds the wait (the pod's grace period).
	Until time.Time
}

// EndpointsLeftResult says whether the pod left every node's rules in
// time, and at which service network generation.
type EndpointsLeftResult struct {
	Left       bool
	Generation int64
}
