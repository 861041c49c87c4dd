package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// checkRequestText refuses a request whose path or query carries text
// that PostgreSQL cannot hold (NUL, invalid UTF-8): every path parameter,
// selector and token reaches the store from here, and the database would
// answer it with an error, not a miss. Bodies are checked as they are
// decoded (checkBodyText).
func (s *Server) checkRequestText(c *gin.Context) {
	if !store.StorableText(c.Request.URL.Path) {
		s.fail(c, badRequestf("the request path must be UTF-8 text without NUL characters"))
		c.Abort()
		return
	}
	for name, values := range c.Request.URL.Query() {
		if !store.StorableText(name) {
			s.fail(c, badRequestf("query parameter names must be UTF-8 text without NUL characters"))
			c.Abort()
			return
		}
		for _, v := range values {
			if !store.StorableText(v) {
				s.fail(c, badRequestf("query parameter %s must be UTF-8 text without NUL characters", name))
				c.Abort()
				return
			}
		}
	}
	c.Next()
}

// checkBody checks a JSON body, already decoded into a value of type t,
// for what encoding/json lets through: a key that differs from a field's
// JSON name only by case (Kubernetes' decoder is case-sensitive, so such a
// key is an unknown field, 400), and a string that PostgreSQL cannot hold
// (422 naming the field).
func checkBody(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return badRequestf("malformed body: %s", describeJSONError(err))
	}
	return checkValue(doc, t, "")
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkValue checks v, found at path, against t (nil: any shape).
func checkValue(v any, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		t = nil // its own decoder decides its shape
	}
	switch v := v.(type) {
	case string:
		if !store.StorableText(v) {
			return badText(path)
		}
	case []any:
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i, e := range v {
			if err := checkValue(e, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		var fields map[string]reflect.Type
		var elem reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			fields = map[string]reflect.Type{}
			jsonFields(t, fields)
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		for key, e := range v {
			if !store.StorableText(key) {
				return badText(path)
			}
			// Paths are written as validation writes them:
			// spec.containers[0].name, metadata.labels[app].
			sub := key
			switch {
			case elem != nil:
				sub = path + "[" + key + "]"
			case path != "":
				sub = path + "." + key
			}
			ft := elem
			if fields != nil {
				var known bool
				if ft, known = fields[key]; !known {
					for name := range fields {
						if strings.EqualFold(name, key) {
							return badRequestf("malformed body: strict decoding error: unknown field %q (field names are case-sensitive: did you mean %q?)", sub, name)
						}
					}
				}
			}
			if err := checkValue(e, ft, sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields adds the JSON names of t's fields to fields, with those of
// embedded structs as encoding/json promotes them.
func jsonFields(t reflect.Type, fields map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				jsonFields(ft, fields)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
}

// badText is the 422 for a string PostgreSQL cannot hold.
func badText(path string) error {
	if path == "" {
		path = "<body>"
	}
	return &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid",
		msg: fmt.Sprintf("%s: text must be UTF-8 without NUL characters", path),
		details: &model.StatusDetails{Causes: []model.StatusCause{{Type: "FieldValueInvalid",
			Message: "text must be UTF-8 without NUL characters", Field: path}}}}
}

// validUTF8 refuses a body that is not UTF-8: encoding/json would replace
// its bad bytes with U+FFFD and store something the client never sent.
func validUTF8(body []byte) error {
	if !utf8.Valid(body) {
		return badRequestf("malformed body: not valid UTF-8")
	}
	return nil
}
