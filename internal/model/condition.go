package model

import "time"

// condition is what SetCondition needs of a pod's, a node's or a job's
// condition.
type condition interface {
	PodCondition | NodeCondition | JobCondition
}

// SetCondition puts c into conds, replacing the condition of its type. The
// transition time changes only when the status does (c's own is then
// used, or now when it has none); otherwise the old one stays, as
// Kubernetes' meta.SetStatusCondition does. It reports whether anything
// changed.
func SetCondition[C condition](conds *[]C, c C, now time.Time) bool {
	typ, status, since := fields(&c)
	for i := range *conds {
		old := &(*conds)[i]
		oldTyp, oldStatus, oldSince := fields(old)
		if oldTyp != typ {
			continue
		}
		if oldStatus == status && *oldSince != nil {
			*since = *oldSince
		} else if *since == nil {
			*since = &now
		}
		changed := !equalCondition(*old, c)
		*old = c
		return changed
	}
	if *since == nil {
		*since = &now
	}
	*conds = append(*conds, c)
	return true
}

// fields reaches the type, status and transition time of either kind.
func fields[C condition](c *C) (string, string, **time.Time) {
	switch v := any(c).(type) {
	case *PodCondition:
		return v.Type, v.Status, &v.LastTransitionTime
	case *NodeCondition:
		return v.Type, v.Status, &v.LastTransitionTime
	case *JobCondition:
		return v.Type, v.Status, &v.LastTransitionTime
	}
	panic("unreachable")
}

func equalCondition[C condition](a, b C) bool {
	switch x := any(a).(type) {
	case PodCondition:
		y := any(b).(PodCondition)
		return x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message && sameTime(x.LastTransitionTime, y.LastTransitionTime)
	case NodeCondition:
		y := any(b).(NodeCondition)
		return x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
			sameTime(x.LastTransitionTime, y.LastTransitionTime) && sameTime(x.LastHeartbeatTime, y.LastHeartbeatTime)
	case JobCondition:
		y := any(b).(JobCondition)
		return x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
			sameTime(x.LastTransitionTime, y.LastTransitionTime) && sameTime(x.LastProbeTime, y.LastProbeTime)
	}
	return false
}

func sameTime(a, b *time.Time) bool {
	return a == b || (a != nil && b != nil && a.Equal(*b))
}
