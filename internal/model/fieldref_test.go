package model

import (
	"strings"
	"testing"
)

// An environment variable reads one field of the pod that a node knows;
// any other path, another apiVersion, or two sources at once is a 422 at
// the field's path.
func TestValidateEnvFieldRefs(t *testing.T) {
	pod := func(src *EnvVarSource) *Pod {
		p := &Pod{Metadata: ObjectMeta{Name: "web", Namespace: "default"}, Spec: PodSpec{Containers: []Container{{
			Name: "app", Image: "base", Command: []string{"/bin/sleep"},
			Env: []EnvVar{{Name: "X", ValueFrom: src}},
		}}}}
		DefaultPod(p)
		return p
	}
	for _, path := range FieldPaths {
		if errs := ValidatePod(pod(&EnvVarSource{FieldRef: &ObjectFieldSelector{APIVersion: "v1", FieldPath: path}})); len(errs) > 0 {
			t.Errorf("fieldRef %s refused: %v", path, errs)
		}
	}
	const f = "spec.containers[0].env[0].valueFrom"
	for _, tc := range []struct {
		src         *EnvVarSource
		field, want string
	}{
		{&EnvVarSource{FieldRef: &ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}, f + ".fieldRef.fieldPath", `Unsupported value: "metadata.labels['app']"`},
		{&EnvVarSource{FieldRef: &ObjectFieldSelector{}}, f + ".fieldRef.fieldPath", "Required value"},
		{&EnvVarSource{FieldRef: &ObjectFieldSelector{APIVersion: "v2", FieldPath: FieldPodName}}, f + ".fieldRef.apiVersion", `Unsupported value: "v2"`},
		{&EnvVarSource{FieldRef: &ObjectFieldSelector{FieldPath: FieldPodName}, SecretKeyRef: &SecretKeySelector{Name: "db", Key: "k"}}, f, "more than one field"},
		{&EnvVarSource{}, f, "must specify one of: `fieldRef` or `secretKeyRef`"},
	} {
		errs := ValidatePod(pod(tc.src))
		if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Detail, tc.want) {
			t.Errorf("%+v: %v, want one error at %s saying %q", tc.src, errs, tc.field, tc.want)
		}
	}
}
