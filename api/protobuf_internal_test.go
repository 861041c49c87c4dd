package api

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func protoMessage(fields ...any) []byte {
	var b []byte
	for i := 0; i < len(fields); i += 2 {
		var v []byte
		switch x := fields[i+1].(type) {
		case string:
			v = []byte(x)
		case []byte:
			v = x
		}
		b = protowire.AppendTag(b, protowire.Number(fields[i].(int)), protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	return b
}

// A review as kubectl's typed client encodes it is read field by field;
// a body that is not one is an error, not a guess.
func TestAccessReviewFromProtobuf(t *testing.T) {
	attrs := protoMessage(1, "team", 2, "create", 5, "pods", 6, "exec", 7, "web")
	review := protoMessage(2, protoMessage(1, attrs))
	body := append([]byte("k8s\x00"), protoMessage(1, protoMessage(1, "authorization.k8s.io/v1", 2, "SelfSubjectAccessReview"), 2, review)...)
	r, err := decodeAccessReviewProtobuf(body)
	if err != nil {
		t.Fatal(err)
	}
	if a := r.Spec.ResourceAttributes; a == nil || *a != (ResourceAttributes{Namespace: "team", Verb: "create", Resource: "pods", Subresource: "exec", Name: "web"}) {
		t.Fatalf("resource attributes: %+v", a)
	}
	for name, bad := range map[string][]byte{
		"no magic":           review,
		"a truncated field":  append([]byte("k8s\x00"), 0x12, 0x40, 0x01),
		"a gzipped envelope": append([]byte("k8s\x00"), protoMessage(2, review, 3, "gzip")...),
	} {
		if _, err := decodeAccessReviewProtobuf(bad); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}
