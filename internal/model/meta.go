// Package model holds zonewright's domain types: the Kubernetes-shaped
// objects the API serves and the store persists, their defaults and their
// validation. Every other package imports them from here.
package model

import (
	"encoding/json"
	"time"
)

// APIVersion is the version of the core kinds (pods, nodes, services…);
// the workload kinds have their groups' versions.
const (
	APIVersion      = "v1"
	APIVersionApps  = "apps/v1"
	APIVersionBatch = "batch/v1"
)

// Kinds of resources.
const (
	KindNamespace = "Namespace"
	KindNode      = "Node"
	KindPod       = "Pod"
	KindEvent     = "Event"
)

// TypeMeta names an object's kind and version.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// ObjectMeta is the metadata every resource carries.
type ObjectMeta struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace,omitempty"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Generation counts the changes of the object's spec; the server sets it.
	Generation        int64             `json:"generation,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	CreationTimestamp *time.Time        `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
	// DeletionGracePeriodSeconds is the grace period a pending deletion asked for.
	DeletionGracePeriodSeconds *int64 `json:"deletionGracePeriodSeconds,omitempty"`
	// OwnerReferences name the objects this one belongs to (a
	// deployment's pods name it); deleting the owner deletes them.
	OwnerReferences []OwnerReference `json:"ownerReferences,omitempty"`
	// ManagedFields says which manager set which fields, as server-side
	// apply records it; the API maintains it, clients read it.
	ManagedFields []ManagedFieldsEntry `json:"managedFields,omitempty"`
}

// ManagedFieldsEntry is one manager's set of fields, in Kubernetes' shape
// (FieldsV1 is the structured-merge-diff field set).
type ManagedFieldsEntry struct {
	Manager     string          `json:"manager,omitempty"`
	Operation   string          `json:"operation,omitempty"`
	APIVersion  string          `json:"apiVersion,omitempty"`
	Time        *time.Time      `json:"time,omitempty"`
	FieldsType  string          `json:"fieldsType,omitempty"`
	FieldsV1    json.RawMessage `json:"fieldsV1,omitempty"`
	Subresource string          `json:"subresource,omitempty"`
}

// OwnerReference names the owner of an object.
type OwnerReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	// Controller marks the one owner that manages the object.
	Controller *bool `json:"controller,omitempty"`
}

// ControllerOf is the owner that manages m, or nil.
func ControllerOf(m *ObjectMeta) *OwnerReference {
	for i := range m.OwnerReferences {
		if r := &m.OwnerReferences[i]; r.Controller != nil && *r.Controller {
			return r
		}
	}
	return nil
}

// Object is implemented by every stored resource: the store persists the
// metadata in columns and spec and status as documents.
type Object interface {
	GetTypeMeta() *TypeMeta
	GetMeta() *ObjectMeta
	// Parts returns pointers to the spec and status documents.
	Parts() (spec, status any)
}

// ListMeta is the metadata of a list response.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Continue        string `json:"continue,omitempty"`
}

// List is a page of objects of one kind.
type List[T any] struct {
	TypeMeta `json:",inline"`
	Metadata ListMeta `json:"metadata"`
	Items    []T      `json:"items"`
}

// Condition types and statuses shared by pods and nodes.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)
