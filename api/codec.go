package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"sigs.k8s.io/yaml"
)

// decode reads a JSON or YAML body (by Content-Type) into dst, refusing
// unknown fields, keys that match a field only without regard to case
// (typos are reported instead of silently dropped or guessed), and text
// the store cannot hold. With ?fieldValidation=Warn or Ignore, unknown
// fields are dropped instead (applyFieldValidation).
func decode(c *gin.Context, dst any) error {
	body, err := requestBody(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequestf("request body is empty; send a JSON or YAML object")
	}
	if err := validUTF8(body); err != nil {
		return err
	}
	if isYAML(c.GetHeader("Content-Type")) {
		if body, err = yaml.YAMLToJSON(body); err != nil {
			return badRequestf("malformed YAML: %v", err)
		}
	}
	mode, err := fieldValidation(c)
	if err != nil {
		return err
	}
	if body, err = applyFieldValidation(c, body, reflect.TypeOf(dst), mode); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return badRequestf("malformed body: %s", describeJSONError(err))
	}
	if dec.More() {
		return badRequestf("malformed body: more than one object")
	}
	return checkBody(body, reflect.TypeOf(dst))
}

// requestBody reads the request's body: a body over the limit is the
// MaxBytesError limitBody answers with 413, any other failure a 400.
func requestBody(c *gin.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request.Body)
	var tooBig *http.MaxBytesError
	if err != nil && !errors.As(err, &tooBig) {
		return nil, &apiError{code: http.StatusBadRequest, reason: "BadRequest", msg: "the request body could not be read", cause: err}
	}
	return body, err
}

func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %s: cannot use a JSON %s as %s", typeErr.Field, typeErr.Value, typeErr.Type)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return "strict decoding error: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	return err.Error()
}

func isYAML(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml"
}

// respond writes v as YAML when the client asks for it, JSON otherwise.
func respond(c *gin.Context, code int, v any) {
	if res := c.GetString(tableResourceKey); res != "" && code == http.StatusOK && wantsTable(c.GetHeader("Accept")) {
		if t, ok := asTable(res, v, c.Query("includeObject"), time.Now()); ok {
			c.JSON(code, t)
			return
		}
	}
	if isYAML(c.GetHeader("Accept")) {
		b, err := json.Marshal(v)
		if err == nil {
			b, err = yaml.JSONToYAML(b)
		}
		if err == nil {
			c.Data(code, "application/yaml", b)
			return
		}
	}
	c.JSON(code, v)
}

// DeleteOptions is the body a Kubernetes client may send with a DELETE
// (kubectl does): a grace period and preconditions. The query parameter
// of the same name wins over the body's grace period.
type DeleteOptions struct {
	Kind               string               `json:"kind,omitempty"`
	APIVersion         string               `json:"apiVersion,omitempty"`
	GracePeriodSeconds *int64               `json:"gracePeriodSeconds,omitempty"`
	Preconditions      *DeletePreconditions `json:"preconditions,omitempty"`
	PropagationPolicy  string               `json:"propagationPolicy,omitempty"`
	OrphanDependents   *bool                `json:"orphanDependents,omitempty"`
	DryRun             []string             `json:"dryRun,omitempty"`
}

// DeletePreconditions must hold of the object for the delete to proceed.
type DeletePreconditions struct {
	UID             *string `json:"uid,omitempty"`
	ResourceVersion *string `json:"resourceVersion,omitempty"`
}

// deleteOptions reads a DELETE's body, if it has one.
func deleteOptions(c *gin.Context) (DeleteOptions, error) {
	var o DeleteOptions
	if c.Request.ContentLength == 0 {
		return o, nil
	}
	body, err := requestBody(c)
	if err != nil {
		return o, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return o, nil
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	if err := decode(c, &o); err != nil {
		return o, err
	}
	if len(o.DryRun) > 0 {
		return o, badRequestf("dryRun is not supported")
	}
	return o, nil
}
