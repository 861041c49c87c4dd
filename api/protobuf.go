package api

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// mediaProtobuf is Kubernetes' protobuf encoding, which kubectl's typed
// clients send for built-in kinds. zonewright reads it where kubectl
// sends it for a kind it serves (protobufBodies) and answers JSON, which
// those clients accept too.
const mediaProtobuf = "application/vnd.kubernetes.protobuf"

// protobufBodies are the paths whose bodies may be protobuf.
var protobufBodies = map[string]bool{"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews": true}

// protobufMagic begins every Kubernetes protobuf body: a runtime.Unknown
// (1 typeMeta, 2 raw, 3 contentEncoding, 4 contentType) follows.
var protobufMagic = []byte("k8s\x00")

// protoFields reads one message's fields: for each number, the bytes of
// its last length-delimited value (strings and messages). Other wire
// types are skipped.
func protoFields(b []byte) (map[protowire.Number][]byte, error) {
	out := map[protowire.Number][]byte{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			out[num], b = v, b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return out, nil
}

// decodeAccessReviewProtobuf reads a SelfSubjectAccessReview sent as
// Kubernetes protobuf (authorization/v1 generated.proto: 2 spec; spec's
// 1 resourceAttributes, 2 nonResourceAttributes).
func decodeAccessReviewProtobuf(body []byte) (SelfSubjectAccessReview, error) {
	var r SelfSubjectAccessReview
	rest, ok := bytes.CutPrefix(body, protobufMagic)
	if !ok {
		return r, errors.New("not a Kubernetes protobuf body (no k8s\\0 prefix)")
	}
	unknown, err := protoFields(rest)
	if err != nil {
		return r, fmt.Errorf("the envelope: %w", err)
	}
	if enc := string(unknown[3]); enc != "" {
		return r, fmt.Errorf("content encoding %q is not supported", enc)
	}
	review, err := protoFields(unknown[2])
	if err != nil {
		return r, fmt.Errorf("the review: %w", err)
	}
	spec, err := protoFields(review[2])
	if err != nil {
		return r, fmt.Errorf("spec: %w", err)
	}
	if b, ok := spec[1]; ok {
		f, err := protoFields(b)
		if err != nil {
			return r, fmt.Errorf("spec.resourceAttributes: %w", err)
		}
		r.Spec.ResourceAttributes = &ResourceAttributes{Namespace: string(f[1]), Verb: string(f[2]), Group: string(f[3]),
			Version: string(f[4]), Resource: string(f[5]), Subresource: string(f[6]), Name: string(f[7])}
	}
	if b, ok := spec[2]; ok {
		f, err := protoFields(b)
		if err != nil {
			return r, fmt.Errorf("spec.nonResourceAttributes: %w", err)
		}
		r.Spec.NonResourceAttributes = &NonResourceAttributes{Path: string(f[1]), Verb: string(f[2])}
	}
	return r, nil
}
