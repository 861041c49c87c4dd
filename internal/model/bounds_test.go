package model

import (
	"math"
	"strings"
	"testing"
)

// Valid objects of each kind, changed by one field for a case.
func checkDeployment(change func(*Deployment)) FieldErrors {
	d := &Deployment{Metadata: ObjectMeta{Name: "web", Namespace: "default"}, Spec: DeploymentSpec{
		Selector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: PodTemplate{Metadata: TemplateMeta{Labels: map[string]string{"app": "web"}},
			Spec: PodSpec{Containers: []Container{{Name: "app", Image: "base", Command: []string{"/bin/sleep"}}}}}}}
	DefaultDeployment(d)
	change(d)
	return ValidateDeployment(d)
}

func checkJob(change func(*Job)) FieldErrors {
	j := &Job{Metadata: ObjectMeta{Name: "sum", Namespace: "default"}, Spec: JobSpec{
		Template: PodTemplate{Spec: PodSpec{Containers: []Container{{Name: "app", Image: "base", Command: []string{"/bin/true"}}}}}}}
	DefaultJob(j)
	change(j)
	return ValidateJob(j)
}

func checkPod(change func(*Pod)) FieldErrors {
	p := &Pod{Metadata: ObjectMeta{Name: "web", Namespace: "default"},
		Spec: PodSpec{Containers: []Container{{Name: "app", Image: "base", Command: []string{"/bin/sleep"}}}}}
	DefaultPod(p)
	change(p)
	return ValidatePod(p)
}

func checkService(change func(*Service)) FieldErrors {
	s := &Service{Metadata: ObjectMeta{Name: "web", Namespace: "default"}, Spec: ServiceSpec{Ports: []ServicePort{{Port: 80}}}}
	DefaultService(s)
	change(s)
	return ValidateService(s)
}

func checkClaim(change func(*PersistentVolumeClaim)) FieldErrors {
	c := claim("1Gi")
	change(c)
	return ValidatePersistentVolumeClaim(c)
}

func checkImage(change func(*Image)) FieldErrors {
	img := &Image{Metadata: ObjectMeta{Name: "base"}, Spec: ImageSpec{Kind: ImageZoneTemplate}}
	DefaultImage(img)
	change(img)
	return ValidateImage(img)
}

func checkNode(change func(*Node)) FieldErrors {
	n := &Node{Metadata: ObjectMeta{Name: "n1"}, Status: NodeStatus{Capacity: ResourceList{ResourceCPU: "8", ResourceMemory: "32Gi"}}}
	DefaultNode(n)
	change(n)
	return ValidateNode(n)
}

func ptr[T any](v T) *T { return &v }

// Every number and amount the API accepts has a bound: a value at it
// passes, and one past it (or one that cannot be parsed) is refused,
// naming its field.
func TestEveryNumberHasABound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		at    FieldErrors // nil: the case has only a refused value
		past  FieldErrors
		field string
	}{
		// Deployments.
		{"replicas", checkDeployment(func(d *Deployment) { d.Spec.Replicas = ptr(MaxDeploymentReplicas) }),
			checkDeployment(func(d *Deployment) { d.Spec.Replicas = ptr(MaxDeploymentReplicas + 1) }), "spec.replicas"},
		{"negative replicas", nil, checkDeployment(func(d *Deployment) { d.Spec.Replicas = ptr(int32(-1)) }), "spec.replicas"},
		{"minReadySeconds", checkDeployment(func(d *Deployment) {
			d.Spec.MinReadySeconds, d.Spec.ProgressDeadlineSeconds = MaxRolloutSeconds-1, ptr(MaxRolloutSeconds)
		}), checkDeployment(func(d *Deployment) { d.Spec.MinReadySeconds = math.MaxInt32 }), "spec.minReadySeconds"},
		{"revisionHistoryLimit", checkDeployment(func(d *Deployment) { d.Spec.RevisionHistoryLimit = ptr(MaxRevisionHistoryLimit) }),
			checkDeployment(func(d *Deployment) { d.Spec.RevisionHistoryLimit = ptr(MaxRevisionHistoryLimit + 1) }), "spec.revisionHistoryLimit"},
		{"progressDeadlineSeconds", checkDeployment(func(d *Deployment) { d.Spec.ProgressDeadlineSeconds = ptr(MaxRolloutSeconds) }),
			checkDeployment(func(d *Deployment) { d.Spec.ProgressDeadlineSeconds = ptr(int32(math.MaxInt32)) }), "spec.progressDeadlineSeconds"},
		{"maxSurge as a number", checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(IntValue(MaxDeploymentReplicas)) }),
			checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(IntValue(math.MaxInt32)) }), "spec.strategy.rollingUpdate.maxSurge"},
		{"maxSurge as a percentage", checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(StrValue("100%")) }),
			checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(StrValue("2147483647%")) }), "spec.strategy.rollingUpdate.maxSurge"},
		{"maxSurge past int", nil, checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(StrValue("99999999999999999999%")) }),
			"spec.strategy.rollingUpdate.maxSurge"},
		{"maxUnavailable as a number", checkDeployment(func(d *Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(IntValue(MaxDeploymentReplicas))
		}), checkDeployment(func(d *Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(IntValue(MaxDeploymentReplicas + 1))
		}),
			"spec.strategy.rollingUpdate.maxUnavailable"},
		{"maxUnavailable as a percentage", checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(StrValue("100%")) }),
			checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(StrValue("101%")) }), "spec.strategy.rollingUpdate.maxUnavailable"},
		{"healthyDeadlineSeconds", checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.HealthyDeadlineSeconds = MaxRolloutSeconds }),
			checkDeployment(func(d *Deployment) { d.Spec.Strategy.RollingUpdate.HealthyDeadlineSeconds = MaxRolloutSeconds + 1 }),
			"spec.strategy.rollingUpdate.healthyDeadlineSeconds"},
		{"a template's cpu", nil, checkDeployment(func(d *Deployment) {
			d.Spec.Template.Spec.Containers[0].Resources.Requests = ResourceList{ResourceCPU: "1000001"}
		}), "spec.template.spec.containers[0].resources.requests.cpu"},

		// Jobs.
		{"parallelism", checkJob(func(j *Job) { j.Spec.Parallelism = ptr(MaxJobParallelism) }),
			checkJob(func(j *Job) { j.Spec.Parallelism = ptr(MaxJobParallelism + 1) }), "spec.parallelism"},
		{"completions", checkJob(func(j *Job) { j.Spec.Completions = ptr(MaxJobCompletions) }),
			checkJob(func(j *Job) { j.Spec.Completions = ptr(MaxJobCompletions + 1) }), "spec.completions"},
		{"backoffLimit", checkJob(func(j *Job) { j.Spec.BackoffLimit = ptr(MaxJobBackoffLimit) }),
			checkJob(func(j *Job) { j.Spec.BackoffLimit = ptr(int32(math.MaxInt32)) }), "spec.backoffLimit"},
		{"activeDeadlineSeconds", checkJob(func(j *Job) { j.Spec.ActiveDeadlineSeconds = ptr(MaxJobSeconds) }),
			checkJob(func(j *Job) { j.Spec.ActiveDeadlineSeconds = ptr(int64(math.MaxInt64)) }), "spec.activeDeadlineSeconds"},
		{"ttlSecondsAfterFinished", checkJob(func(j *Job) { j.Spec.TTLSecondsAfterFinished = ptr(int32(MaxJobSeconds)) }),
			checkJob(func(j *Job) { j.Spec.TTLSecondsAfterFinished = ptr(int32(MaxJobSeconds + 1)) }), "spec.ttlSecondsAfterFinished"},

		// Pods.
		{"terminationGracePeriodSeconds", checkPod(func(p *Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(MaxGracePeriodSeconds) }),
			checkPod(func(p *Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(math.MaxInt64)) }), "spec.terminationGracePeriodSeconds"},
		{"containerPort", checkPod(func(p *Pod) { p.Spec.Containers[0].Ports = []ContainerPort{{ContainerPort: 65535, Protocol: "TCP"}} }),
			checkPod(func(p *Pod) { p.Spec.Containers[0].Ports = []ContainerPort{{ContainerPort: 65536, Protocol: "TCP"}} }),
			"spec.containers[0].ports[0].containerPort"},
		{"a probe's period", checkPod(func(p *Pod) {
			p.Spec.Containers[0].ReadinessProbe = &Probe{TCPSocket: &TCPSocketAction{Port: IntValue(80)}, PeriodSeconds: MaxProbePeriodSeconds, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
		}), checkPod(func(p *Pod) {
			p.Spec.Containers[0].ReadinessProbe = &Probe{TCPSocket: &TCPSocketAction{Port: IntValue(80)}, PeriodSeconds: math.MaxInt32, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
		}), "spec.containers[0].readinessProbe.periodSeconds"},
		{"a probe's port", nil, checkPod(func(p *Pod) {
			p.Spec.Containers[0].ReadinessProbe = &Probe{TCPSocket: &TCPSocketAction{Port: IntValue(70000)}, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
		}), "spec.containers[0].readinessProbe.tcpSocket.port"},
		{"cpu", checkPod(func(p *Pod) { p.Spec.Containers[0].Resources.Requests = ResourceList{ResourceCPU: "1M"} }),
			checkPod(func(p *Pod) { p.Spec.Containers[0].Resources.Requests = ResourceList{ResourceCPU: "1000001"} }),
			"spec.containers[0].resources.requests.cpu"},
		{"cpu past int64", nil, checkPod(func(p *Pod) { p.Spec.Containers[0].Resources.Limits = ResourceList{ResourceCPU: "1e30"} }),
			"spec.containers[0].resources.limits.cpu"},
		{"memory", checkPod(func(p *Pod) { p.Spec.Containers[0].Resources.Limits = ResourceList{ResourceMemory: "1Pi"} }),
			checkPod(func(p *Pod) { p.Spec.Containers[0].Resources.Limits = ResourceList{ResourceMemory: "1025Ti"} }),
			"spec.containers[0].resources.limits.memory"},
		{"memory that does not parse", nil, checkPod(func(p *Pod) { p.Spec.Containers[0].Resources.Requests = ResourceList{ResourceMemory: "1.5.3Gi"} }),
			"spec.containers[0].resources.requests.memory"},
		{"negative memory", nil, checkPod(func(p *Pod) { p.Spec.Containers[0].Resources.Requests = ResourceList{ResourceMemory: "-1"} }),
			"spec.containers[0].resources.requests.memory"},
		{"an emptyDir's sizeLimit", checkPod(func(p *Pod) {
			p.Spec.Volumes = []Volume{{Name: "scratch", EmptyDir: &EmptyDirVolumeSource{SizeLimit: "1Pi"}}}
		}), checkPod(func(p *Pod) {
			p.Spec.Volumes = []Volume{{Name: "scratch", EmptyDir: &EmptyDirVolumeSource{SizeLimit: "8Ei"}}}
		}), "spec.volumes[0].emptyDir.sizeLimit"},

		// Services.
		{"a service's port", checkService(func(s *Service) { s.Spec.Ports[0].Port, s.Spec.Ports[0].TargetPort = 65535, IntValue(1) }),
			checkService(func(s *Service) { s.Spec.Ports[0].Port = 65536 }), "spec.ports[0].port"},
		{"a service's targetPort", checkService(func(s *Service) { s.Spec.Ports[0].TargetPort = IntValue(65535) }),
			checkService(func(s *Service) { s.Spec.Ports[0].TargetPort = IntValue(65536) }), "spec.ports[0].targetPort"},
		{"clientIP timeoutSeconds", checkService(func(s *Service) {
			s.Spec.SessionAffinity = AffinityClientIP
			s.Spec.SessionAffinityConfig = &SessionAffinityConfig{ClientIP: &ClientIPConfig{TimeoutSeconds: ptr(MaxClientIPTimeout)}}
		}), checkService(func(s *Service) {
			s.Spec.SessionAffinity = AffinityClientIP
			s.Spec.SessionAffinityConfig = &SessionAffinityConfig{ClientIP: &ClientIPConfig{TimeoutSeconds: ptr(MaxClientIPTimeout + 1)}}
		}), "spec.sessionAffinityConfig.clientIP.timeoutSeconds"},

		// Claims.
		{"a claim's size", checkClaim(func(c *PersistentVolumeClaim) { c.Spec.Resources.Requests[ResourceStorage] = "1Pi" }),
			checkClaim(func(c *PersistentVolumeClaim) { c.Spec.Resources.Requests[ResourceStorage] = "1025Ti" }), "spec.resources.requests.storage"},
		{"a claim of 2^63 bytes", nil, checkClaim(func(c *PersistentVolumeClaim) { c.Spec.Resources.Requests[ResourceStorage] = "8Ei" }),
			"spec.resources.requests.storage"},
		{"a claim of nothing", nil, checkClaim(func(c *PersistentVolumeClaim) { c.Spec.Resources.Requests[ResourceStorage] = "0" }),
			"spec.resources.requests.storage"},

		// Images.
		{"an image's size", checkImage(func(img *Image) { img.Spec.Size = MaxStorageBytes }),
			checkImage(func(img *Image) { img.Spec.Size = math.MaxInt64 }), "spec.size"},
		{"an image's memory", checkImage(func(img *Image) { img.Spec.Resources = ResourceList{ResourceMemory: "1Pi"} }),
			checkImage(func(img *Image) { img.Spec.Resources = ResourceList{ResourceMemory: "2Pi"} }), "spec.resources.memory"},

		// Nodes: what the host has, so no bound but the quantity's own.
		{"a node's negative capacity", checkNode(func(n *Node) { n.Status.Capacity[ResourceStorage] = "4Pi" }),
			checkNode(func(n *Node) { n.Status.Capacity[ResourceMemory] = "-1Gi" }), "status.capacity.memory"},
		{"a node's allocatable past int64", nil, checkNode(func(n *Node) { n.Status.Allocatable = ResourceList{ResourceCPU: "1e30"} }),
			"status.allocatable.cpu"},
		{"a node's agent port", checkNode(func(n *Node) { n.Status.DaemonEndpoints.AgentEndpoint.Port = 65535 }),
			checkNode(func(n *Node) { n.Status.DaemonEndpoints.AgentEndpoint.Port = 65536 }), "status.daemonEndpoints.agentEndpoint.Port"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			if len(tc.at) > 0 {
				t.Errorf("refused at the bound: %v", tc.at)
			}
			if got := refused(tc.past); got != tc.field {
				t.Errorf("past the bound: refused %q (%v); want %s alone", got, tc.past, tc.field)
			}
		})
	}
}
