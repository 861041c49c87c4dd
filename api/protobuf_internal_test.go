package api

import (
	"bytes"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/zonewright/zonewright/internal/model"
)

type protoMarshaler interface{ Marshal() ([]byte, error) }

// protobufBody encodes obj as kubectl's typed clients do: the k8s\0
// magic, then a runtime.Unknown naming the kind around the object.
func protobufBody(t *testing.T, apiVersion, kind string, obj protoMarshaler, encoding string) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	env, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw, ContentEncoding: encoding}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte(nil), protobufMagic...), env...)
}

// Bodies in protobuf become the JSON of the same object, which the
// handlers decode strictly: a deployment as kubectl create deployment
// builds it (empty status, strategy and resources, a null timestamp)
// decodes into zonewright's model with no unknown field; an access
// review keeps its attributes. A body that is not one is an error.
func TestProtobufBodiesBecomeJSON(t *testing.T) {
	replicas := int32(2)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "base", Image: "base", Command: []string{"sleep", "600"}}}}}},
	}
	js, err := protobufToJSON(protobufBody(t, "apps/v1", "Deployment", d, ""), new(appsv1.Deployment))
	if err != nil {
		t.Fatal(err)
	}
	var got model.Deployment
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("the deployment's JSON %s: %v", js, err)
	}
	if got.Kind != "Deployment" || got.APIVersion != "apps/v1" || got.Metadata.Name != "web" || *got.Spec.Replicas != 2 ||
		got.Spec.Template.Spec.Containers[0].Command[1] != "600" || got.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("the deployment read from protobuf: %s", js)
	}

	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "create", Resource: "pods", Subresource: "exec", Name: "web"}}}
	js, err = protobufToJSON(protobufBody(t, "authorization.k8s.io/v1", "SelfSubjectAccessReview", review, ""), new(authorizationv1.SelfSubjectAccessReview))
	if err != nil {
		t.Fatal(err)
	}
	var r SelfSubjectAccessReview
	if err := json.Unmarshal(js, &r); err != nil {
		t.Fatal(err)
	}
	if a := r.Spec.ResourceAttributes; a == nil || *a != (ResourceAttributes{Namespace: "team", Verb: "create", Resource: "pods", Subresource: "exec", Name: "web"}) {
		t.Fatalf("resource attributes: %s", js)
	}

	good := protobufBody(t, "apps/v1", "Deployment", d, "")
	for name, bad := range map[string][]byte{
		"no magic":           bytes.TrimPrefix(good, protobufMagic),
		"a truncated object": good[:len(good)-5],
		"a gzipped envelope": protobufBody(t, "apps/v1", "Deployment", d, "gzip"),
	} {
		if _, err := protobufToJSON(bad, new(appsv1.Deployment)); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}
