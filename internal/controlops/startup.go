package controlops

import (
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// podReadySince is when the pod's Ready condition last became True; zero
// when it is not True.
func podReadySince(st *model.PodStatus) time.Time {
	for _, c := range st.Conditions {
		if c.Type == model.PodReady && c.Status == model.ConditionTrue && c.LastTransitionTime != nil {
			return *c.LastTransitionTime
		}
	}
	return time.Time{}
}
