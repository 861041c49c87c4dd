package model

import (
	"strings"
	"testing"
)

// A pod's ephemeral storage and process limit annotations are checked
// where Kubernetes checks its fields, each refusal naming its field.
func TestZoneLimitsAreValidatedWithTheirFieldPaths(t *testing.T) {
	pod := func(limits, requests ResourceList, annotations map[string]string) *Pod {
		p := &Pod{Metadata: ObjectMeta{Name: "web", Namespace: "default", Annotations: annotations}}
		p.Spec.Containers = []Container{{Name: "app", Image: "base", Command: []string{"sleep", "1"},
			Resources: ResourceRequirements{Limits: limits, Requests: requests}}}
		DefaultPod(p)
		return p
	}
	good := pod(ResourceList{"ephemeral-storage": "2Gi", "memory": "1Gi"}, ResourceList{"ephemeral-storage": "1Gi"},
		map[string]string{AnnotationMaxProcesses: "500", AnnotationMaxLWPs: "100"})
	if errs := ValidatePod(good); len(errs) > 0 {
		t.Fatalf("a pod with ephemeral storage and process limits: %v", errs)
	}
	if got := PodEphemeralStorage(&good.Spec); got != 2<<30 {
		t.Errorf("ephemeral storage %d, want the limit's 2Gi", got)
	}
	if got := PodZoneProcessLimits(&good.Metadata); got != (ZoneProcessLimits{MaxProcesses: 500, MaxLWPs: 100}) {
		t.Errorf("process limits %+v", got)
	}
	for _, tc := range []struct {
		name  string
		pod   *Pod
		field string
	}{
		{"a bad quantity", pod(ResourceList{"ephemeral-storage": "lots"}, nil, nil), "spec.containers[0].resources.limits.ephemeral-storage"},
		{"a negative request", pod(nil, ResourceList{"ephemeral-storage": "-1Gi"}, nil), "spec.containers[0].resources.requests.ephemeral-storage"},
		{"more than 1Pi", pod(ResourceList{"ephemeral-storage": "2Pi"}, nil, nil), "spec.containers[0].resources.limits.ephemeral-storage"},
		{"a request above the limit", pod(ResourceList{"ephemeral-storage": "1Gi"}, ResourceList{"ephemeral-storage": "2Gi"}, nil), "spec.containers[0].resources.requests.ephemeral-storage"},
		{"a word", pod(nil, nil, map[string]string{AnnotationMaxProcesses: "many"}), "metadata.annotations[zonewright.io/max-processes]"},
		{"below zonecfg's floor", pod(nil, nil, map[string]string{AnnotationMaxLWPs: "99"}), "metadata.annotations[zonewright.io/max-lwps]"},
		{"zero", pod(nil, nil, map[string]string{AnnotationMaxProcesses: "0"}), "metadata.annotations[zonewright.io/max-processes]"},
		{"beyond an int", pod(nil, nil, map[string]string{AnnotationMaxLWPs: "2147483648"}), "metadata.annotations[zonewright.io/max-lwps]"},
	} {
		errs := ValidatePod(tc.pod)
		if len(errs) != 1 || errs[0].Field != tc.field {
			t.Errorf("%s: %v, want one error on %s", tc.name, errs, tc.field)
		}
	}

	// A deployment's template names its own path.
	d := &Deployment{Metadata: ObjectMeta{Name: "web", Namespace: "default"}}
	d.Spec.Selector = &LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	d.Spec.Template.Metadata.Labels = map[string]string{"app": "web"}
	d.Spec.Template.Metadata.Annotations = map[string]string{AnnotationMaxProcesses: "10"}
	d.Spec.Template.Spec = good.Spec
	DefaultDeployment(d)
	var found bool
	for _, e := range ValidateDeployment(d) {
		found = found || e.Field == "spec.template.metadata.annotations[zonewright.io/max-processes]" && strings.Contains(e.Detail, "from 100")
	}
	if !found {
		t.Errorf("a deployment's template with max-processes 10: %v", ValidateDeployment(d))
	}
}

// A zone's CPU and memory caps are its containers' limits, else their
// requests, summed; a container that sets neither adds nothing.
func TestPodCapsSumLimitsElseRequests(t *testing.T) {
	spec := PodSpec{Containers: []Container{
		{Name: "a", Resources: ResourceRequirements{Limits: ResourceList{"cpu": "500m", "memory": "1Gi"}, Requests: ResourceList{"cpu": "100m"}}},
		{Name: "b", Resources: ResourceRequirements{Requests: ResourceList{"cpu": "1", "memory": "256Mi"}}},
		{Name: "c"},
	}}
	cpu, mem := PodCaps(&spec)
	if cpu != 1500 || mem != (1<<30)+(256<<20) {
		t.Fatalf("caps %dm CPU, %d bytes; want 1500m and %d", cpu, mem, (1<<30)+(256<<20))
	}
}
