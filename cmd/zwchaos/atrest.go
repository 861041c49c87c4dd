package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/zonewright/zonewright/internal/devcluster"
	"github.com/zonewright/zonewright/internal/model"
)

// The deployment at rest: made before the chaos starts and never touched
// by the churn, on a node the churn never drains, with a healthy
// deadline and autoRevert (what a restart must not mistake for a failed
// rollout). Through every kind of kill, its pods must stay the same and
// it must record no failure.
const (
	atRestName     = "at-rest"
	atRestReplicas = 2
	// atRestLabel marks the node its pods run on.
	atRestLabel = "chaos.zonewright.io/at-rest"
	// atRestHealthyDeadline is short, so that its pods are past it by the
	// first kill, and long enough for a pod to start on a loaded machine
	// in isolation mode.
	atRestHealthyDeadline = 10 * time.Second
)

const eventsPath = "/api/v1/namespaces/default/events"

// startAtRest labels node, makes the deployment at rest there and waits
// until it has rolled out and its pods are past their healthy deadline;
// it returns its pods, uid → name, and when it was at rest.
func startAtRest(ctx context.Context, a *api, node string) (map[string]string, time.Time, error) {
	// The node may not have registered yet; the agent's own writes can
	// make a 409.
	var answer string
	err := devcluster.WaitFor(ctx, time.Minute, func() bool {
		var n model.Node
		if !a.get(ctx, "/api/v1/nodes/"+node, &n) {
			answer = "not found"
			return false
		}
		if n.Metadata.Labels == nil {
			n.Metadata.Labels = map[string]string{}
		}
		n.Metadata.Labels[atRestLabel] = "true"
		code, b := a.do(ctx, "label node", http.MethodPut, "/api/v1/nodes/"+node, n)
		answer = fmt.Sprintf("%d %s", code, truncate(b, 300))
		return code == http.StatusOK
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("label node %s for the deployment at rest: %w (last answer: %s)", node, err, answer)
	}
	d := deployment(atRestName, atRestReplicas, 1)
	spec := d["spec"].(map[string]any)
	spec["template"].(map[string]any)["spec"].(map[string]any)["nodeSelector"] = map[string]string{atRestLabel: "true"}
	spec["minReadySeconds"] = 1
	spec["progressDeadlineSeconds"] = 60
	spec["autoRevert"] = true
	spec["strategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": 0,
		"healthyDeadlineSeconds": int(atRestHealthyDeadline / time.Second)}}
	if code, b := a.do(ctx, "create deployment", http.MethodPost, deploymentsPath, d); code != http.StatusCreated {
		return nil, time.Time{}, fmt.Errorf("create the deployment at rest: %d %s", code, truncate(b, 300))
	}
	var pods map[string]string
	err = devcluster.WaitFor(ctx, 2*time.Minute, func() bool {
		var d model.Deployment
		var list model.List[model.Pod]
		if !a.get(ctx, deploymentsPath+"/"+atRestName, &d) || !a.get(ctx, podsPath+"?labelSelector=app%3D"+atRestName, &list) {
			return false
		}
		c := d.Status.Condition(model.DeploymentProgressing)
		if c == nil || c.Reason != model.ReasonNewReplicaSetAvailable || d.Status.AvailableReplicas != atRestReplicas || len(list.Items) != atRestReplicas {
			return false
		}
		pods = map[string]string{}
		for _, p := range list.Items {
			pods[p.Metadata.UID] = p.Metadata.Name
		}
		return true
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("the deployment at rest did not roll out: %w", err)
	}
	select {
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	case <-time.After(atRestHealthyDeadline):
	}
	return pods, time.Now(), nil
}
