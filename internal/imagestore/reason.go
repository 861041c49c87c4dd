package imagestore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Reason is what a client may be told about a failed Fetch or Decompress:
// a class of failure. It never describes what answered at an address
// (response bodies, protocol errors, which service closed the connection),
// nor paths, digests or sizes of what was read: those would turn an image
// import into a probe of the control plane's network and files. The full
// error belongs in the control plane's log.
func Reason(err error) string {
	var (
		refusedErr *RefusedSourceError
		mismatch   *DigestMismatchError
		source     *SourceError
		pathErr    *os.PathError
		linkErr    *os.LinkError
		noResponse *noResponseError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &refusedErr):
		return refusedErr.Error()
	case errors.As(err, &mismatch):
		return "the download does not match the catalog's sha256 digest (and size, if given)"
	case errors.Is(err, ErrTooLarge):
		return "the image is larger than the control plane accepts (--image-max-bytes); nothing of it was kept"
	case errors.Is(err, ErrCorrupt):
		return "not an image: the download does not decompress"
	case errors.Is(err, ErrInvalid):
		return "invalid image request"
	case errors.As(err, &noResponse) && isTLS(err):
		return "the source could not be fetched: TLS handshake failed"
	case errors.As(err, &noResponse) && !errors.Is(err, ErrRemoved) && !errors.Is(err, context.Canceled):
		return "the source could not be fetched: connection failed"
	case errors.Is(err, ErrStalled):
		return "the source could not be fetched: it sent nothing for too long"
	case errors.Is(err, ErrRemoved):
		return "the image was removed"
	case errors.As(err, &source) && source.Status != 0:
		return fmt.Sprintf("the source could not be fetched: HTTP status %d", source.Status)
	case errors.As(err, &source):
		return "the source could not be fetched: the file is missing or unreadable"
	case isTLS(err):
		return "the source could not be fetched: TLS handshake failed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "the import was interrupted"
	case errors.As(err, &pathErr), errors.As(err, &linkErr):
		// The store's own files (a file source's errors are SourceErrors).
		return "the image store could not keep the image (see the control plane's log)"
	}
	return "the source could not be fetched: connection failed"
}

func isTLS(err error) bool {
	var (
		rec      tls.RecordHeaderError
		verify   *tls.CertificateVerificationError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &rec) || errors.As(err, &verify) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}
