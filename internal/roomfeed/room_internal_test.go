package roomfeed

import (
	"context"
	"testing"

	"github.com/zonewright/zonewright/internal/informer"
	"github.com/zonewright/zonewright/internal/model"
)

func node(unschedulable, ready bool, labels map[string]string, taints ...string) *model.Node {
	n := &model.Node{Metadata: model.ObjectMeta{Name: "n1", Labels: labels}, Spec: model.NodeSpec{Unschedulable: unschedulable}}
	status := model.ConditionFalse
	if ready {
		status = model.ConditionTrue
	}
	n.Status.Conditions = []model.NodeCondition{{Type: model.NodeReady, Status: status}}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, model.Taint{Key: k, Effect: model.TaintNoSchedule})
	}
	return n
}

func pod(node, phase string) *model.Pod {
	return &model.Pod{Metadata: model.ObjectMeta{Name: "p", Namespace: "default"}, Spec: model.PodSpec{NodeName: node}, Status: model.PodStatus{Phase: phase}}
}

// Only changes that may admit a waiting pod count as room made: a node
// cordoned, going NotReady or writing its status, a pod bound, running
// or written again when ended make none.
func TestWhatMakesRoom(t *testing.T) {
	ctx := context.Background()
	nodes := []struct {
		name     string
		was, now *model.Node
		made     bool
	}{
		{"a node uncordoned", node(true, true, nil), node(false, true, nil), true},
		{"a node Ready again", node(false, false, nil), node(false, true, nil), true},
		{"a taint removed", node(false, true, nil, "node.zonewright.io/unreachable"), node(false, true, nil), true},
		{"a label added", node(false, true, nil), node(false, true, map[string]string{"disk": "ssd"}), true},
		{"a node cordoned", node(false, true, nil), node(true, true, nil), false},
		{"a node gone NotReady", node(false, true, nil), node(false, false, nil), false},
		{"a node written unchanged", node(false, true, nil), node(false, true, nil), false},
	}
	for _, c := range nodes {
		r := &room{nodes: map[string]nodeRoom{"n1": nodeRoomOf(c.was)}}
		if err := r.changeNode(ctx, informer.Event[model.Node]{Type: informer.Modified, Object: c.now}); err != nil {
			t.Fatal(err)
		}
		if r.made != c.made {
			t.Errorf("%s: room made %v; want %v", c.name, r.made, c.made)
		}
	}
	pods := []struct {
		name     string
		typ      string
		was, now *model.Pod
		made     bool
	}{
		{"a bound pod removed", informer.Deleted, pod("n1", model.PodRunning), pod("n1", model.PodRunning), true},
		{"a bound pod failed", informer.Modified, pod("n1", model.PodRunning), pod("n1", model.PodFailed), true},
		{"a bound pod unbound", informer.Modified, pod("n1", model.PodRunning), pod("", model.PodPending), true},
		{"an unbound pod removed", informer.Deleted, pod("", model.PodPending), pod("", model.PodPending), false},
		{"a pod bound", informer.Modified, pod("", model.PodPending), pod("n1", model.PodPending), false},
		{"a pod running", informer.Modified, pod("n1", model.PodPending), pod("n1", model.PodRunning), false},
		{"an ended pod written again", informer.Modified, pod("n1", model.PodFailed), pod("n1", model.PodFailed), false},
	}
	for _, c := range pods {
		r := &room{pods: map[string]podRoom{"default/p": podRoomOf(c.was)}}
		if err := r.changePod(ctx, informer.Event[model.Pod]{Type: c.typ, Object: c.now}); err != nil {
			t.Fatal(err)
		}
		if r.made != c.made {
			t.Errorf("%s: room made %v; want %v", c.name, r.made, c.made)
		}
	}
	claim := func(node string) *model.PersistentVolumeClaim {
		c := &model.PersistentVolumeClaim{Metadata: model.ObjectMeta{Name: "c", Namespace: "default"}}
		c.Status.NodeName = node
		return c
	}
	for _, c := range []struct {
		name     string
		was, now string
		made     bool
	}{
		{"a claim moved", "n1", "n2", true},
		{"a claim bound", "", "n1", false},
		{"a claim written unchanged", "n1", "n1", false},
	} {
		r := &room{claims: map[string]string{"default/c": c.was}}
		if err := r.changeClaim(ctx, informer.Event[model.PersistentVolumeClaim]{Type: informer.Modified, Object: claim(c.now)}); err != nil {
			t.Fatal(err)
		}
		if r.made != c.made {
			t.Errorf("%s: room made %v; want %v", c.name, r.made, c.made)
		}
	}
}
