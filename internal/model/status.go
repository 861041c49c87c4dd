package model

import (
	"encoding/json"
	"net/http"
)

// Status is the body of every API error, in the Kubernetes shape.
type Status struct {
	TypeMeta `json:",inline"`
	Status   string         `json:"status"`
	Message  string         `json:"message"`
	Reason   string         `json:"reason"`
	Details  *StatusDetails `json:"details,omitempty"`
	Code     int            `json:"code"`
}

// StatusDetails names the object and, for invalid ones, each bad field.
type StatusDetails struct {
	Name   string        `json:"name,omitempty"`
	Kind   string        `json:"kind,omitempty"`
	Causes []StatusCause `json:"causes,omitempty"`
}

// StatusCause is one reason an object was refused.
type StatusCause struct {
	Type    string `json:"reason"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

// WriteFailure answers w with a failure Status: for the handlers the API
// hands a request to whole (image artefacts, volume transfers).
func WriteFailure(w http.ResponseWriter, code int, reason, msg string) {
	st := Status{TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: "Status"}, Status: "Failure", Message: msg, Reason: reason, Code: code}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(st)
}
