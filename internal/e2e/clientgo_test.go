package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/encryption"
)

// clientConfig is how a controller built on client-go reaches the
// cluster: the admin token, the cluster CA, protobuf first as
// Kubernetes' own controllers ask.
func (c *cluster) clientConfig() *rest.Config {
	return &rest.Config{Host: c.api, BearerToken: c.cp.AdminToken(),
		TLSClientConfig: rest.TLSClientConfig{CAFile: controlplane.CAFile(c.cpConfig.StateDir)},
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json"}}
}

// podLog records what an informer's handlers saw of each pod, by UID.
type podLog struct {
	mu             sync.Mutex
	added, deleted map[string]int
	names          map[string]string
	// versions is the last resourceVersion seen of each pod; an update
	// not newer than it is a repeat.
	versions map[string]int64
	repeats  []string
}

func (l *podLog) handlers() cache.ResourceEventHandlerFuncs {
	uid := func(obj any) (string, string) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p := obj.(*corev1.Pod)
		return string(p.UID), p.Name
	}
	seen := func(obj any) {
		p := obj.(*corev1.Pod)
		rv, _ := strconv.ParseInt(p.ResourceVersion, 10, 64)
		if last, ok := l.versions[string(p.UID)]; ok && rv <= last {
			l.repeats = append(l.repeats, fmt.Sprintf("%s at %d after %d", p.Name, rv, last))
		}
		l.versions[string(p.UID)] = rv
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			l.mu.Lock()
			defer l.mu.Unlock()
			u, n := uid(obj)
			l.added[u]++
			l.names[u] = n
			seen(obj)
		},
		UpdateFunc: func(_, obj any) {
			l.mu.Lock()
			defer l.mu.Unlock()
			seen(obj)
		},
		DeleteFunc: func(obj any) {
			l.mu.Lock()
			defer l.mu.Unlock()
			u, _ := uid(obj)
			l.deleted[u]++
		},
	}
}

func (l *podLog) counts(uid string) (added, deleted int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.added[uid], l.deleted[uid]
}

// client-go drives zonewright as controllers do: a typed clientset
// creates and deletes pods and deployments (in protobuf), a shared
// informer lists and watches pods through a restart of the control
// plane and sees every pod added once, every deletion once and every
// change once, in order of version (none missed, none repeated), and a
// dynamic client lists every kind discovery names. (Drop the BOOKMARK
// that ends a streaming list to see the informer never sync.)
func TestClientGoInformerThroughAControlPlaneRestart(t *testing.T) {
	t.Parallel()
	// Secrets need a key, and the dynamic client lists them.
	key, err := encryption.NewKey([]byte(strings.Repeat("k", encryption.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) { cfg.EncryptionKey = key })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	const ns = "informed"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the namespace: %v", err)
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "informed"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "base", Command: []string{"sleep", "3600"}}}}}
	}
	create := func(name string) string {
		t.Helper()
		p, err := cs.CoreV1().Pods(ns).Create(ctx, pod(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		return string(p.UID)
	}
	before, kept := create("before"), create("kept")

	log := &podLog{added: map[string]int{}, deleted: map[string]int{}, names: map[string]string{}, versions: map[string]int64{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods()
	if _, err := pods.Informer().AddEventHandler(log.handlers()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		t.Fatal("the informer never synced")
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		c.eventually(2*time.Minute, what, cond)
	}
	eventually("the informer to hold the pods Running", func() bool {
		for _, name := range []string{"before", "kept"} {
			p, err := pods.Lister().Pods(ns).Get(name)
			if err != nil || p.Status.Phase != corev1.PodRunning {
				return false
			}
		}
		return true
	})

	// The control plane goes and comes back; the informer's watch ends
	// with it and must resume where it was.
	c.stopControlPlane()()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "before", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatalf("delete pod before: %v", err)
	}
	after := create("after")
	eventually("the informer to see the deletion and the new pod", func() bool {
		_, deleted := log.counts(before)
		added, _ := log.counts(after)
		return deleted == 1 && added == 1
	})
	for uid, want := range map[string][2]int{before: {1, 1}, kept: {1, 0}, after: {1, 0}} {
		if added, deleted := log.counts(uid); added != want[0] || deleted != want[1] {
			t.Errorf("pod %s (%s): added %d times and deleted %d, want %d and %d", log.names[uid], uid, added, deleted, want[0], want[1])
		}
	}
	log.mu.Lock()
	if len(log.repeats) > 0 {
		t.Errorf("the informer saw pods again at versions it had seen: %v", log.repeats)
	}
	log.mu.Unlock()
	cached, err := pods.Lister().Pods(ns).List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range cached {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "after,kept" {
		t.Errorf("the informer's pods: %v, want after and kept", names)
	}

	// A deployment, created and deleted through the typed client.
	replicas := int32(1)
	selector := map[string]string{"app": "typed"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "typed"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "base", Command: []string{"sleep", "3600"}}}}}}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a deployment: %v", err)
	}
	eventually("the deployment's pod to be added", func() bool {
		got, err := cs.AppsV1().Deployments(ns).Get(ctx, "typed", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 1
	})
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "typed", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the deployment: %v", err)
	}

	// A dynamic client lists every kind discovery names.
	dyn, err := dynamic.NewForConfig(c.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	lists, err := cs.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	listed := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") {
				continue
			}
			res := dyn.Resource(gv.WithResource(r.Name))
			var err error
			if r.Namespaced {
				_, err = res.Namespace(ns).List(ctx, metav1.ListOptions{})
			} else {
				_, err = res.List(ctx, metav1.ListOptions{})
			}
			if err != nil {
				t.Errorf("dynamic list of %s: %v", gv.WithResource(r.Name), err)
			}
			listed++
		}
	}
	if listed < 10 {
		t.Errorf("the dynamic client listed only %d kinds", listed)
	}
	t.Logf("the dynamic client listed %d kinds", listed)
}
