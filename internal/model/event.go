package model

import (
	"time"
	"unicode/utf8"
)

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

// Bounds of the free text that reaches a status or an event.
const (
	// MaxReasonBytes bounds a reason a user gives (a cancel's): the API
	// refuses a longer one with 422.
	MaxReasonBytes = 1024
	// MaxMessageBytes bounds a status or event message, which may quote a
	// user's reason or a host's error: a longer one is cut (ShortMessage).
	MaxMessageBytes = 4096
)

// ValidateReason checks a reason a user gives.
func ValidateReason(field, reason string) FieldErrors {
	var errs FieldErrors
	if len(reason) > MaxReasonBytes {
		errs.add(field, FieldTooLong, "Too long: %d bytes: must have at most %d", len(reason), MaxReasonBytes)
	} else if d := hostCannotCarry(reason); d != "" {
		errs.add(field, FieldInvalid, "Invalid value: %s", d)
	}
	return errs
}

// ShortMessage cuts s to at most limit bytes at a character boundary,
// marking the cut with an ellipsis.
func ShortMessage(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = "…"
	cut := max(limit-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
