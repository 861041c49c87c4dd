package control

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/imagestore"
)

// The image workflows tell import failures apart by these types; the
// library's errors must keep mapping onto them.
func TestImportErrorsKeepTheirTypes(t *testing.T) {
	imp := func(err error) error {
		return &controlops.ImportError{Image: "ubuntu", Source: "http://x/u.tar.gz", Err: err}
	}
	tests := []struct {
		name         string
		err          error
		typ          string // "" : not an ApplicationError
		nonRetryable bool
		says         string
	}{
		{"a digest mismatch is not retried and names both digests",
			imp(&imagestore.DigestMismatchError{Name: "ubuntu", Want: "ff", Got: "00"}), ErrTypeDigestMismatch, true,
			"image ubuntu: sha256 of http://x/u.tar.gz is 00, the catalog expects ff"},
		{"a source that says no for good is not retried",
			imp(fmt.Errorf("fetch: %w", imagestore.ErrCorrupt)), ErrTypeSourceFailed, true, "image ubuntu: fetch:"},
		{"a stall is retried", imp(imagestore.ErrStalled), ErrTypeStalled, false, "image ubuntu: transfer stalled"},
		{"an image deleted meanwhile is not retried", &controlops.ImageGoneError{Image: "ubuntu"}, ErrTypeImageGone, true,
			"image ubuntu is gone"},
		{"anything else is a plain error, retried", imp(errors.New("connection reset")), "", false,
			"image ubuntu: connection reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := importError(tt.err)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("%v does not say %q", err, tt.says)
			}
			var ae *temporal.ApplicationError
			isApp := errors.As(err, &ae)
			if tt.typ == "" {
				if isApp {
					t.Fatalf("%v is an ApplicationError of type %s", err, ae.Type())
				}
				return
			}
			if !isApp || ae.Type() != tt.typ || ae.NonRetryable() != tt.nonRetryable {
				t.Fatalf("%v (%T): want type %s, non-retryable %t", err, err, tt.typ, tt.nonRetryable)
			}
		})
	}
	if importError(nil) != nil {
		t.Fatal("no error became one")
	}
}
