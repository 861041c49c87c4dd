package hostops

import (
	"errors"
	"fmt"
)

// Error is a failed host operation. What says what failed, where, in the
// words a person acts on ("create the VNIC for pod default/web (zone
// web-…) on node n1"); Err says why: an *illumos.Error (the command's
// kind, argv and stderr) or one of the errors below. Callers classify it
// with errors.As and illumos.KindOf; a caller that retries may put its
// attempt number between the two.
type Error struct {
	What string
	Err  error
}

func (e *Error) Error() string { return e.What + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// InvalidError is a request that cannot succeed however often it is
// tried: a sandbox without a name, an address that is not one, an image
// kind no brand installs. (Commands that refuse their input fail with an
// illumos.KindInvalid error, which stands the same.)
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// ConflictError is something on the host in a pod's way that is not the
// pod's: a VNIC of its name over another link, a zone of its name that
// belongs to another pod or is installed with another configuration.
// Retrying does not help; a person has to look.
type ConflictError struct{ Reason string }

func (e *ConflictError) Error() string { return e.Reason }

// MaintenanceError is a container whose SMF service is in maintenance:
// SMF stopped restarting it (its command exited too often).
type MaintenanceError struct {
	Container string
	Zone      string
	FMRI      string // the container's SMF instance
	Log       string // its log, inside the zone
}

func (e *MaintenanceError) Error() string {
	return fmt.Sprintf("container %q is in maintenance: SMF stopped restarting it (its command exited too often); see `svcs -xv %s` and the log %s in zone %s",
		e.Container, e.FMRI, e.Log, e.Zone)
}

// ConfigError is a container whose configuration cannot be built: an
// environment variable names a secret or a key that does not exist
// (Kubernetes' CreateContainerConfigError). The container does not
// start; it may once the secret is there, so it is worth trying again.
type ConfigError struct {
	Container string
	Message   string // which secret or key is missing, never a value
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("CreateContainerConfigError: container %q: %s", e.Container, e.Message)
}

// ImageMissingError is an install that needs an image the node does not
// have: the control plane pulls images before it installs.
type ImageMissingError struct {
	Image, Kind string
	Namespace   string // of the pod
	Pod         string
	Node        string
	Artefact    string // what is missing: a snapshot or a file
}

func (e *ImageMissingError) Error() string {
	return fmt.Sprintf("image %s (%s) of pod %s/%s is not on node %s (%s is missing); pull it first",
		e.Image, e.Kind, e.Namespace, e.Pod, e.Node, e.Artefact)
}

// DigestMismatchError is a pulled artefact whose sha256 or size is not the
// catalog's; nothing of it is left on the node.
type DigestMismatchError struct{ msg string }

func (e *DigestMismatchError) Error() string { return e.msg }

// DownloadError is a failed image download (a refused request, a dropped
// or stalled connection); nothing half-installed is left.
type DownloadError struct{ err error }

func (e *DownloadError) Error() string { return e.err.Error() }
func (e *DownloadError) Unwrap() error { return e.err }

// ImageInUseError is an image that cannot be removed while zones or pod
// volumes are clones of it.
type ImageInUseError struct{ Err error }

func (e *ImageInUseError) Error() string { return "zones still use it: " + e.Err.Error() }
func (e *ImageInUseError) Unwrap() error { return e.Err }

// shaped reports whether err already says what failed where.
func shaped(err error) bool {
	var e *Error
	var m *ImageMissingError
	return errors.As(err, &e) || errors.As(err, &m)
}
