package zwclient

import "reflect"

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
	return subset(want, have)
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
