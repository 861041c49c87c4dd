package model

// Namespace groups pods and services under one name.
type Namespace struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta      `json:"metadata"`
	Spec     NamespaceSpec   `json:"spec"`
	Status   NamespaceStatus `json:"status"`
}

// NamespaceSpec is empty today; kept so the object has the usual shape.
type NamespaceSpec struct{}

// NamespaceStatus reports whether the namespace is usable.
type NamespaceStatus struct {
	Phase string `json:"phase,omitempty"`
}

// NamespaceActive is the phase of a namespace that accepts pods.
const NamespaceActive = "Active"

// DefaultNamespace exists from the first start.
const DefaultNamespace = "default"

func (n *Namespace) GetTypeMeta() *TypeMeta    { return &n.TypeMeta }
func (n *Namespace) GetMeta() *ObjectMeta      { return &n.Metadata }
func (n *Namespace) Parts() (spec, status any) { return &n.Spec, &n.Status }
