package controlops

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// createOwnedPod creates a pod that newPod builds from a controller's
// template, with its lifecycle (Pods.Create). A pod whose lifecycle
// cannot start now (Temporal not answering, the control plane stopping)
// stays, and the reconciler starts it (PodCreate.KeepWithoutLifecycle).
// newPod is called again when the pod's generated name is taken. The
// create checks the template's images in its transaction, as an API
// create does, so an image deleted a moment before is a
// model.FieldErrors (see failedCreate), never a pod.
func (a *Control) createOwnedPod(ctx context.Context, newPod func() *model.Pod) error {
	for attempt := 0; ; attempt++ {
		p := newPod()
		model.DefaultPod(p)
		// A template's images are in the catalog: the create adds none.
		_, err := a.Pods().Create(ctx, p, PodCreate{KeepWithoutLifecycle: true})
		if errors.Is(err, store.ErrAlreadyExists) && attempt < 5 {
			continue // the random suffix was taken
		}
		return err
	}
}

// failedCreate says why a pod of a template was refused when the
// template itself is at fault (an image missing from the catalog or being
// deleted), naming the template's fields, or when the namespace's quota
// or limit range refused it (in Kubernetes' words); ok is false for any other error,
// which the sync returns to be retried.
func failedCreate(err error) (msg string, ok bool) {
	var (
		qe *model.QuotaError
		le *model.LimitError
	)
	if errors.As(err, &qe) || errors.As(err, &le) {
		return "Error creating: " + err.Error(), true
	}
	var fe model.FieldErrors
	if !errors.As(err, &fe) {
		return "", false
	}
	parts := make([]string, len(fe))
	for i, e := range fe {
		parts[i] = "spec.template." + e.Field + ": " + e.Detail
	}
	return "Error creating a pod: " + strings.Join(parts, ", "), true
}

// The retry of a failed create: as long again as the failure has lasted,
// within these bounds, so a brief gap (an image re-imported) retries
// soon and a long one costs a few syncs an hour. Kubernetes' ReplicaSet
// controller backs off the same way, per object.
const (
	minCreateRetry = 5 * time.Second
	maxCreateRetry = 5 * time.Minute
)

// createRetryAt is when to try a failed create again, the failure having
// lasted since since (nil: it begins now).
func createRetryAt(since *time.Time, now time.Time) time.Time {
	d := minCreateRetry
	if since != nil {
		d = max(d, now.Sub(*since))
	}
	return now.Add(min(d, maxCreateRetry))
}

// earliest is the earlier of two wake times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// deletePod starts the graceful deletion of a controller's pod, as DELETE
// on the pod does (Pods.Delete), within the pod's own grace period.
func (a *Control) deletePod(ctx context.Context, ns, name string) error {
	_, err := a.Pods().Delete(ctx, ns, name, PodDelete{})
	return err
}
