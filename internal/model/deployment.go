package model

import (
	"slices"
	"time"
)

// Kinds of the apps group.
const (
	KindDeployment         = "Deployment"
	KindControllerRevision = "ControllerRevision"
	KindScale              = "Scale"
)

// Labels and annotations a deployment writes.
const (
	// LabelPodTemplateHash tells the revisions of a deployment's pods apart.
	LabelPodTemplateHash = "pod-template-hash"
	// AnnotationRevision is the revision number of a deployment (its
	// current template) and of each of its revisions.
	AnnotationRevision = "deployment.kubernetes.io/revision"
	// AnnotationRestartedAt in a template makes a new revision of the same pods.
	AnnotationRestartedAt = "kubectl.kubernetes.io/restartedAt"
	// AnnotationHealthyAt on a deployment's pod is when its deployment
	// first saw it available: its healthy deadline is met for good.
	AnnotationHealthyAt = "deployment.zonewright.io/healthy-at"
)

// Deployment strategies.
const (
	StrategyRollingUpdate = "RollingUpdate"
	StrategyRecreate      = "Recreate"
)

// Deployment conditions and their reasons.
const (
	DeploymentAvailable   = "Available"
	DeploymentProgressing = "Progressing"

	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	ReasonNewReplicaSetCreated       = "NewReplicaSetCreated"
	ReasonReplicaSetUpdated          = "ReplicaSetUpdated"
	ReasonNewReplicaSetAvailable     = "NewReplicaSetAvailable"
	ReasonProgressDeadlineExceeded   = "ProgressDeadlineExceeded"
	ReasonDeploymentPaused           = "DeploymentPaused"
	ReasonDeploymentResumed          = "DeploymentResumed"
	// ReasonRolledBack: autoRevert put the last fully available revision back.
	ReasonRolledBack = "DeploymentRolledBack"
)

// ConditionReplicaFailure is true while a deployment or a job cannot
// create its pods (reason ReasonFailedCreate), as Kubernetes' ReplicaSet
// and Deployment say; it goes once a pod can be created again.
const (
	ConditionReplicaFailure = "ReplicaFailure"
	ReasonFailedCreate      = "FailedCreate"
)

// Deployment defaults, as Kubernetes has them.
const (
	DefaultRevisionHistoryLimit    = int32(10)
	DefaultProgressDeadlineSeconds = int32(600)
	// MaxDeploymentReplicas bounds replicas, and maxSurge and
	// maxUnavailable given as numbers: every replica is a zone.
	// Kubernetes bounds them by int32 alone.
	MaxDeploymentReplicas = int32(10000)
	// MaxRolloutSeconds bounds minReadySeconds, progressDeadlineSeconds
	// and healthyDeadlineSeconds: a day. Kubernetes sets no bound (a
	// progressDeadlineSeconds of MaxInt32 means never); a day keeps each a
	// timer a workflow holds, and deadline sums far from overflowing.
	MaxRolloutSeconds = int32(86400)
	// MaxRevisionHistoryLimit bounds the revisions kept (each a row).
	MaxRevisionHistoryLimit = int32(1000)
	// MaxDeploymentNameLength leaves room in a pod's name (a DNS label)
	// for "-<hash>-<suffix>".
	MaxDeploymentNameLength = 46
)

// Deployment keeps replicas of a pod template running and rolls them to a
// new template without downtime.
type Deployment struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     DeploymentSpec   `json:"spec"`
	Status   DeploymentStatus `json:"status"`
}

// DeploymentSpec is the desired state of a deployment.
type DeploymentSpec struct {
	Replicas *int32         `json:"replicas,omitempty"`
	Selector *LabelSelector `json:"selector"`
	Template PodTemplate    `json:"template"`
	Strategy Strategy       `json:"strategy"`
	// MinReadySeconds: a pod counts as available once Ready this long.
	MinReadySeconds         int32  `json:"minReadySeconds,omitempty"`
	RevisionHistoryLimit    *int32 `json:"revisionHistoryLimit,omitempty"`
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
	Paused                  bool   `json:"paused,omitempty"`
	// AutoRevert puts the last fully available revision back when a
	// rollout fails (its progress deadline passes, or too many new pods
	// miss their healthy deadline), with no operator action.
	AutoRevert bool `json:"autoRevert,omitempty"`
}

// LabelSelector picks objects by their labels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// PodTemplate is the pod a deployment makes copies of.
type PodTemplate struct {
	Metadata TemplateMeta `json:"metadata"`
	Spec     PodSpec      `json:"spec"`
}

// TemplateMeta is the metadata a template gives its pods.
type TemplateMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// CreationTimestamp is accepted because Kubernetes' clients write one
	// (null) into every template they send, as kubectl rollout undo's
	// patch does; the defaults drop it: a template is not an object.
	CreationTimestamp *time.Time `json:"creationTimestamp,omitempty"`
}

// Strategy says how pods of an old revision are replaced.
type Strategy struct {
	Type          string               `json:"type"`
	RollingUpdate *RollingUpdateConfig `json:"rollingUpdate,omitempty"`
}

// RollingUpdateConfig bounds a rolling update.
type RollingUpdateConfig struct {
	// MaxSurge: pods above replicas during an update (a number or a
	// percentage, rounded up).
	MaxSurge *IntOrString `json:"maxSurge,omitempty"`
	// MaxUnavailable: pods below replicas during an update (a number or a
	// percentage, rounded down).
	MaxUnavailable *IntOrString `json:"maxUnavailable,omitempty"`
	// HealthyDeadlineSeconds: a new pod never available (Ready for
	// minReadySeconds) within it counts as failed and is replaced (Nomad's
	// healthy_deadline); one that has been available has met it for good
	// (AnnotationHealthyAt); 0: no deadline.
	HealthyDeadlineSeconds int32 `json:"healthyDeadlineSeconds,omitempty"`
}

// DeploymentStatus is the observed state of a deployment.
type DeploymentStatus struct {
	ObservedGeneration  int64                 `json:"observedGeneration,omitempty"`
	Replicas            int32                 `json:"replicas"`
	UpdatedReplicas     int32                 `json:"updatedReplicas"`
	ReadyReplicas       int32                 `json:"readyReplicas"`
	AvailableReplicas   int32                 `json:"availableReplicas"`
	UnavailableReplicas int32                 `json:"unavailableReplicas"`
	Conditions          []DeploymentCondition `json:"conditions,omitempty"`
	// Revision is the revision number of the current template.
	Revision int64 `json:"revision,omitempty"`
	// StableRevision names the last revision whose rollout completed
	// (every replica available); autoRevert returns to it.
	StableRevision string `json:"stableRevision,omitempty"`
	// FailedPods counts new pods that missed their healthy deadline in
	// the current rollout.
	FailedPods int32 `json:"failedPods,omitempty"`
}

// DeploymentCondition is one facet of a deployment's state.
type DeploymentCondition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastUpdateTime     *time.Time `json:"lastUpdateTime,omitempty"`
	LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
}

// Condition returns the condition of type typ, or nil.
func (s *DeploymentStatus) Condition(typ string) *DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}

// SetCondition replaces the condition of c's type: its transition time
// changes only when its status does, its update time whenever anything
// does (or when c brings one).
func (s *DeploymentStatus) SetCondition(c DeploymentCondition, now time.Time) {
	old := s.Condition(c.Type)
	if old == nil {
		if c.LastUpdateTime == nil {
			c.LastUpdateTime = &now
		}
		c.LastTransitionTime = &now
		s.Conditions = append(s.Conditions, c)
		return
	}
	changed := old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message
	if c.LastUpdateTime == nil {
		c.LastUpdateTime = old.LastUpdateTime
		if changed || c.LastUpdateTime == nil {
			c.LastUpdateTime = &now
		}
	}
	c.LastTransitionTime = old.LastTransitionTime
	if old.Status != c.Status || c.LastTransitionTime == nil {
		c.LastTransitionTime = &now
	}
	*old = c
}

// RemoveCondition drops the condition of type typ; it reports whether
// there was one.
func (s *DeploymentStatus) RemoveCondition(typ string) bool {
	n := len(s.Conditions)
	s.Conditions = slices.DeleteFunc(s.Conditions, func(c DeploymentCondition) bool { return c.Type == typ })
	return len(s.Conditions) != n
}

// DesiredReplicas is spec.replicas with its default.
func (d *Deployment) DesiredReplicas() int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func (d *Deployment) GetTypeMeta() *TypeMeta    { return &d.TypeMeta }
func (d *Deployment) GetMeta() *ObjectMeta      { return &d.Metadata }
func (d *Deployment) Parts() (spec, status any) { return &d.Spec, &d.Status }

// ControllerRevision is one revision of a deployment's template, kept so
// the deployment can roll back to it.
type ControllerRevision struct {
	TypeMeta               `json:",inline"`
	Metadata               ObjectMeta `json:"metadata"`
	ControllerRevisionData `json:",inline"`
}

// ControllerRevisionData is the body of a revision; stored as its spec.
type ControllerRevisionData struct {
	Data     PodTemplate `json:"data"`
	Revision int64       `json:"revision"`
}

type revisionStatus struct{}

func (r *ControllerRevision) GetTypeMeta() *TypeMeta { return &r.TypeMeta }
func (r *ControllerRevision) GetMeta() *ObjectMeta   { return &r.Metadata }
func (r *ControllerRevision) Parts() (spec, status any) {
	return &r.ControllerRevisionData, &revisionStatus{}
}

// Scale is the scale subresource of a deployment (autoscaling/v1).
type Scale struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     ScaleSpec   `json:"spec"`
	Status   ScaleStatus `json:"status"`
}

// ScaleSpec is the replicas asked for.
type ScaleSpec struct {
	Replicas int32 `json:"replicas"`
}

// ScaleStatus is the replicas there are, and the selector that finds them.
type ScaleStatus struct {
	Replicas int32  `json:"replicas"`
	Selector string `json:"selector,omitempty"`
}
