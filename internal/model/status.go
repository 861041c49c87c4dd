package model

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
