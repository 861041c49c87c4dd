package zwclient

import (
	"encoding/base64"
	"reflect"
)

// serverMetadata are the fields of metadata only the server sets.
var serverMetadata = []string{"uid", "resourceVersion", "generation", "creationTimestamp",
	"deletionTimestamp", "deletionGracePeriodSeconds"}

// Desired is what an applied object asks for: the object without its
// status and without the metadata the server sets, so the output of
// `get -o yaml` applies cleanly.
func Desired(o Object) Object {
	out := make(Object, len(o))
	for k, v := range o {
		if k != "status" {
			out[k] = v
		}
	}
	if md, ok := o["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			m[k] = v
		}
		for _, k := range serverMetadata {
			delete(m, k)
		}
		out["metadata"] = m
	}
	return out
}

// Unchanged says whether applying want to have writes nothing: every field
// want sets has the same value in have. Fields want leaves out are the
// server's defaults and do not count; labels and annotations must match
// exactly, so removing one is a change.
func Unchanged(want, have Object) bool {
	for _, k := range []string{"labels", "annotations"} {
		w, h := NestedMap(want, "metadata", k), NestedMap(have, "metadata", k)
		if len(w) == 0 && len(h) == 0 {
			continue
		}
		if Nested(want, "metadata", k) != nil && !reflect.DeepEqual(w, h) {
			return false
		}
	}
	return subset(secretData(want), have)
}

// secretData turns a secret's stringData into the data the server keeps
// (base64), so a secret written with stringData compares with itself.
func secretData(o Object) Object {
	sd, ok := o["stringData"].(map[string]any)
	if !ok || o["kind"] != "Secret" {
		return o
	}
	out := make(Object, len(o))
	for k, v := range o {
		if k != "stringData" {
			out[k] = v
		}
	}
	data := map[string]any{}
	for k, v := range NestedMap(o, "data") {
		data[k] = v
	}
	for k, v := range sd {
		s, _ := v.(string)
		data[k] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	out["data"] = data
	return out
}

func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, wv := range w {
			if !subset(wv, h[k]) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		if len(w) != len(h) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	case string:
		// An empty string is how YAML says "the default" as often as not.
		h, _ := have.(string)
		return w == h || (w == "" && have == nil)
	case bool:
		h, _ := have.(bool)
		return w == h
	case float64:
		h, _ := have.(float64)
		return w == h
	default:
		return reflect.DeepEqual(want, have)
	}
}

// Merged is what apply writes: the server's object with every field the
// file sets put over it, so the fields the file leaves out (defaults, the
// node a pod was scheduled to) keep the server's values. Lists of the
// same length merge item by item; others are replaced. Labels and
// annotations the file gives replace the server's, so removing one works.
func Merged(have, want Object) Object {
	out, _ := merge(have, secretData(want)).(map[string]any)
	md, _ := out["metadata"].(map[string]any)
	for _, k := range []string{"labels", "annotations"} {
		if v := Nested(want, "metadata", k); v != nil && md != nil {
			md[k] = v
		}
	}
	delete(out, "status")
	return out
}

func merge(have, want any) any {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return w
		}
		out := make(map[string]any, len(h))
		for k, v := range h {
			out[k] = v
		}
		for k, v := range w {
			out[k] = merge(h[k], v)
		}
		return out
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return w
		}
		out := make([]any, len(w))
		for i := range w {
			out[i] = merge(h[i], w[i])
		}
		return out
	case nil:
		return have
	}
	return want
}
