package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// The fieldValidation query parameter, as Kubernetes takes it: what to do
// with a field of a body that its type does not have.
const (
	fieldValidationStrict = "Strict"
	fieldValidationWarn   = "Warn"
	fieldValidationIgnore = "Ignore"
)

var fieldValidationModes = []string{fieldValidationStrict, fieldValidationWarn, fieldValidationIgnore}

// fieldValidation is the request's mode. Without the parameter it is
// Strict, not Kubernetes' Warn: zonewright has always refused unknown
// fields, and a client that relied on that (a typo refused rather than
// silently dropped) keeps it.
func fieldValidation(c *gin.Context) (string, error) {
	v, ok := c.GetQuery("fieldValidation")
	if !ok || v == "" {
		return fieldValidationStrict, nil
	}
	for _, m := range fieldValidationModes {
		if v == m {
			return m, nil
		}
	}
	return "", &apiError{code: http.StatusBadRequest, reason: "BadRequest",
		msg: fmt.Sprintf("fieldValidation: Unsupported value: %q: supported values: %q, %q, %q", v, fieldValidationIgnore, fieldValidationStrict, fieldValidationWarn)}
}

// applyFieldValidation finds the fields of body, JSON, that t does not
// have (named by their paths, spec.containers[0].imagePullPolicyy) and
// does with them what mode says: Strict refuses them all in one 400;
// Warn and Ignore answer body without them, Warn with a Warning header
// for each. Keys that match a field only without regard to case are
// unknown (Kubernetes' decoder is case-sensitive): they are dropped
// here, before encoding/json could match them.
func applyFieldValidation(c *gin.Context, body []byte, t reflect.Type, mode string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, badRequestf("malformed body: %s", describeJSONError(err))
	}
	var unknown []unknownField
	pruneUnknown(doc, t, "", &unknown)
	if len(unknown) == 0 {
		return body, nil
	}
	// A body of a thousand unknown keys names the first maxNamedFields,
	// then counts the rest: an error or a header block stays small.
	named, more := unknown[:min(len(unknown), maxNamedFields)], len(unknown)-maxNamedFields
	switch mode {
	case fieldValidationStrict:
		msgs := make([]string, len(named))
		for i, f := range named {
			msgs[i] = "unknown field " + strconv.Quote(f.path)
			if f.near != "" {
				msgs[i] += fmt.Sprintf(" (field names are case-sensitive: did you mean %q?)", f.near)
			}
		}
		if more > 0 {
			msgs = append(msgs, fmt.Sprintf("and %d more unknown fields", more))
		}
		return nil, badRequestf("strict decoding error: %s", strings.Join(msgs, ", "))
	case fieldValidationWarn:
		for _, f := range named {
			c.Writer.Header().Add("Warning", `299 - `+strconv.Quote("unknown field "+strconv.Quote(f.path)))
		}
		if more > 0 {
			c.Writer.Header().Add("Warning", `299 - `+strconv.Quote(fmt.Sprintf("and %d more unknown fields", more)))
		}
	}
	return json.Marshal(doc)
}

// maxNamedFields is how many unknown fields an answer names.
const maxNamedFields = 20

// unknownField is a key of a body its type has no field for: its path,
// and the field it matches without regard to case, if one does.
type unknownField struct{ path, near string }

// pruneUnknown removes from v, found at path, the object keys t has no
// field for, appending them to unknown.
func pruneUnknown(v any, t reflect.Type, path string, unknown *[]unknownField) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return // any shape, or its own decoder decides
	}
	switch v := v.(type) {
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return
		}
		for i, e := range v {
			pruneUnknown(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), unknown)
		}
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for key, e := range v {
				pruneUnknown(e, t.Elem(), path+"["+key+"]", unknown)
			}
		case reflect.Struct:
			fields := map[string]reflect.Type{}
			jsonFields(t, fields)
			for _, key := range slices.Sorted(maps.Keys(v)) {
				sub := key
				if path != "" {
					sub = path + "." + key
				}
				ft, known := fields[key]
				if !known {
					f := unknownField{path: sub}
					for name := range fields {
						if strings.EqualFold(name, key) {
							f.near = name
						}
					}
					*unknown = append(*unknown, f)
					delete(v, key)
					continue
				}
				pruneUnknown(v[key], ft, sub, unknown)
			}
		}
	}
}
