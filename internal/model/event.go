package model

import "time"

// Event records something that happened to an object, for people to read.
type Event struct {
	TypeMeta  `json:",inline"`
	Metadata  ObjectMeta `json:"metadata"`
	EventData `json:",inline"`
}

// EventData is the body of an event; stored as the event's spec.
type EventData struct {
	InvolvedObject ObjectReference `json:"involvedObject"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message"`
	Type           string          `json:"type"` // Normal or Warning
	Count          int             `json:"count"`
	FirstTimestamp *time.Time      `json:"firstTimestamp,omitempty"`
	LastTimestamp  *time.Time      `json:"lastTimestamp,omitempty"`
	Source         string          `json:"source,omitempty"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// ObjectReference points at another object.
type ObjectReference struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// eventStatus is empty: events have no observed state.
type eventStatus struct{}

func (e *Event) GetTypeMeta() *TypeMeta    { return &e.TypeMeta }
func (e *Event) GetMeta() *ObjectMeta      { return &e.Metadata }
func (e *Event) Parts() (spec, status any) { return &e.EventData, &eventStatus{} }
