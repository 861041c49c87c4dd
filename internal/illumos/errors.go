package illumos

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Kind says what a caller can do about a failed operation.
type Kind int

const (
	// KindUnknown is a failure the classifier does not recognise. Treat it
	// as retryable a bounded number of times.
	KindUnknown Kind = iota
	// KindNotFound: the subject (zone, link, dataset, address object,
	// service, route) does not exist. A delete may treat it as success.
	KindNotFound
	// KindAlreadyExists: the subject already exists. A create may treat it
	// as success after checking that what exists is what it wanted.
	KindAlreadyExists
	// KindWrongState: the subject exists but is not in a state that allows
	// the operation (boot of a configured zone, delete of a running zone).
	KindWrongState
	// KindBusy: the subject is in use (a VNIC held by a running zone, a
	// dataset held open). Retry after the user goes away.
	KindBusy
	// KindInvalid: the request itself is wrong (bad name, bad value, usage
	// error). Retrying cannot help.
	KindInvalid
	// KindTransient: the command timed out, was killed or could not run this
	// time. Retrying may help.
	KindTransient
)

var kindNames = [...]string{
	KindUnknown:       "unknown",
	KindNotFound:      "not found",
	KindAlreadyExists: "already exists",
	KindWrongState:    "wrong state",
	KindBusy:          "busy",
	KindInvalid:       "invalid",
	KindTransient:     "transient",
}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Sentinels for errors.Is. Every *Error matches the sentinel of its Kind:
//
//	if errors.Is(err, illumos.ErrNotFound) { return nil } // already gone
var (
	ErrNotFound      = &kindError{KindNotFound}
	ErrAlreadyExists = &kindError{KindAlreadyExists}
	ErrWrongState    = &kindError{KindWrongState}
	ErrBusy          = &kindError{KindBusy}
	ErrInvalid       = &kindError{KindInvalid}
	ErrTransient     = &kindError{KindTransient}
)

type kindError struct{ kind Kind }

func (e *kindError) Error() string { return "illumos: " + e.kind.String() }

func (k Kind) sentinel() error {
	switch k {
	case KindNotFound:
		return ErrNotFound
	case KindAlreadyExists:
		return ErrAlreadyExists
	case KindWrongState:
		return ErrWrongState
	case KindBusy:
		return ErrBusy
	case KindInvalid:
		return ErrInvalid
	case KindTransient:
		return ErrTransient
	}
	return nil
}

// Error is the error of every typed operation: which operation, on which
// subject, what kind of failure, and the cause (usually an *ExecError with
// the argv, exit status and stderr; for requests refused before running
// anything, a description of what is wrong).
type Error struct {
	Op      string // operation, e.g. "zoneadm boot", "dladm create-vnic"
	Subject string // zone, link, dataset, address object, FMRI...
	Kind    Kind
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Subject != "" {
		b.WriteString(" ")
		b.WriteString(e.Subject)
	}
	b.WriteString(": ")
	if e.Kind != KindUnknown {
		b.WriteString(e.Kind.String())
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) and friends work.
func (e *Error) Is(target error) bool {
	s := e.Kind.sentinel()
	return s != nil && s == target
}

// KindOf returns the Kind of err: the Kind of the outermost *Error in its
// chain, else the classification of an *ExecError in it, else
// KindTransient for context expiry, else KindUnknown.
func KindOf(err error) Kind {
	if err == nil {
		return KindUnknown
	}
	var oe *Error
	if errors.As(err, &oe) {
		return oe.Kind
	}
	var ee *ExecError
	if errors.As(err, &ee) {
		return Classify(ee)
	}
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return KindTransient
	}
	return KindUnknown
}

// IsRetryable reports whether retrying the same operation may succeed.
func IsRetryable(err error) bool {
	switch KindOf(err) {
	case KindTransient, KindBusy, KindUnknown:
		return true
	}
	return false
}

// opError wraps the failure of a command run as an *Error, classifying it.
func opError(op, subject string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Subject: subject, Kind: KindOf(err), Err: err}
}

// invalidf is a request refused before any command runs.
func invalidf(op, subject, format string, args ...any) error {
	return &Error{Op: op, Subject: subject, Kind: KindInvalid, Err: fmt.Errorf(format, args...)}
}

// parseError is output that does not have the documented shape: the command
// ran, but its answer cannot be trusted.
func parseError(op, subject string, err error) error {
	return &Error{Op: op, Subject: subject, Kind: KindUnknown, Err: fmt.Errorf("parse output: %w", err)}
}
