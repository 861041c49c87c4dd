package control

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/imagestore"
)

var quiet = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))

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
		{"a digest mismatch is not retried and names neither digest",
			imp(&imagestore.DigestMismatchError{Name: "ubuntu", Want: "ff", Got: "00", WantSize: 10, GotSize: 12345}), controlapi.ErrTypeDigestMismatch, true,
			"image ubuntu: the download does not match the catalog's sha256 digest"},
		{"a source that says no for good is not retried",
			imp(fmt.Errorf("fetch: %w", imagestore.ErrCorrupt)), controlapi.ErrTypeSourceFailed, true, "image ubuntu: not an image"},
		{"a refused source is not retried",
			imp(&imagestore.RefusedSourceError{Reason: "credentials in the URL are not accepted"}), controlapi.ErrTypeSourceFailed, true, "image ubuntu: source refused: credentials"},
		{"a stall is retried", imp(imagestore.ErrStalled), controlapi.ErrTypeStalled, false, "image ubuntu: the source could not be fetched"},
		{"an image deleted meanwhile is not retried", &controlops.ImageGoneError{Image: "ubuntu"}, controlapi.ErrTypeImageGone, true,
			"image ubuntu is gone"},
		{"anything else is retried, as a class without the detail",
			imp(errors.New("malformed HTTP response \"\\x00\\x00\\x12\\x04\"")), controlapi.ErrTypeFetchFailed, false,
			"image ubuntu: the source could not be fetched: connection failed"},
		{"an error of the store itself is retried", errors.New("database unavailable"), "", false, "database unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := importError(quiet, tt.err)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("%v does not say %q", err, tt.says)
			}
			for _, leak := range []string{"00,", "12345", "malformed", "http://x"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("%v tells %q", err, leak)
				}
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
	if importError(quiet, nil) != nil {
		t.Fatal("no error became one")
	}
}
