package model

// KindReplicaSet is the kind of a deployment's revision as Kubernetes
// clients see it.
const KindReplicaSet = "ReplicaSet"

// Annotations a ReplicaSet of a deployment carries.
const (
	// AnnotationDesiredReplicas is the deployment's replicas when the
	// ReplicaSet was derived, as Kubernetes' deployment controller records it.
	AnnotationDesiredReplicas = "deployment.kubernetes.io/desired-replicas"
	// AnnotationChangeCause says why a revision was made; kubectl rollout
	// history shows it.
	AnnotationChangeCause = "kubernetes.io/change-cause"
)

// annotationsNotCopied are a deployment's annotations its revisions do
// not keep, as Kubernetes' deployment controller skips them: they are
// the deployment's own, and kubectl rollout undo keeps the deployment's.
var annotationsNotCopied = map[string]bool{
	"kubectl.kubernetes.io/last-applied-configuration": true,
	AnnotationRevision:                          true,
	"deployment.kubernetes.io/revision-history": true,
	AnnotationDesiredReplicas:                   true,
	"deployment.kubernetes.io/max-replicas":     true,
	"deprecated.deployment.rollback.to":         true,
}

// RevisionAnnotations are the annotations of a deployment that its
// current revision keeps (its change-cause among them), so that each
// older revision still says what it was made for; nil when there are none.
func RevisionAnnotations(d *Deployment) map[string]string {
	var out map[string]string
	for k, v := range d.Metadata.Annotations {
		if annotationsNotCopied[k] {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// ReplicaSet is one revision of a deployment with the deployment's pods
// of that revision, shaped as Kubernetes' apps/v1 ReplicaSet. zonewright
// keeps no ReplicaSets: each is derived, read-only, from a
// ControllerRevision, its deployment and its pods, for the clients
// (kubectl rollout history, undo, describe) that look for them.
type ReplicaSet struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     ReplicaSetSpec   `json:"spec"`
	Status   ReplicaSetStatus `json:"status"`
}

// ReplicaSetSpec is what the deployment wants of the revision.
type ReplicaSetSpec struct {
	// Replicas: the deployment's replicas for its newest revision, the
	// pods it still keeps for an older one.
	Replicas        *int32         `json:"replicas"`
	MinReadySeconds int32          `json:"minReadySeconds,omitempty"`
	Selector        *LabelSelector `json:"selector"`
	Template        PodTemplate    `json:"template"`
}

// ReplicaSetStatus counts the revision's pods.
type ReplicaSetStatus struct {
	Replicas             int32 `json:"replicas"`
	FullyLabeledReplicas int32 `json:"fullyLabeledReplicas,omitempty"`
	ReadyReplicas        int32 `json:"readyReplicas,omitempty"`
	AvailableReplicas    int32 `json:"availableReplicas,omitempty"`
	ObservedGeneration   int64 `json:"observedGeneration,omitempty"`
}

// AnnotationsAfterRollback are a deployment's annotations once it is
// rolled back to a revision that kept revision (as kubectl rollout undo
// makes them): the deployment's own (its last-applied configuration,
// its revision) and the revision's others, its change-cause among them.
// A revision that kept none (made before revisions kept them) leaves
// the deployment's as they are.
func AnnotationsAfterRollback(deployment, revision map[string]string) map[string]string {
	if len(revision) == 0 {
		return deployment
	}
	out := map[string]string{}
	for k, v := range deployment {
		if annotationsNotCopied[k] {
			out[k] = v
		}
	}
	for k, v := range revision {
		if !annotationsNotCopied[k] {
			out[k] = v
		}
	}
	return out
}
