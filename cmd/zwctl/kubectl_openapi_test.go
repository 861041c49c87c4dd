package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// kubectlIn runs kubectl with stdin as its standard input.
func kubectlIn(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := kubectlCmd(t, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// The machine's kubectl validates manifests through the server: it finds
// the fieldValidation parameter on the PATCH of the kind in the group
// version's OpenAPI document, so it sends its --validate as
// ?fieldValidation= instead of fetching /openapi/v2 to validate itself.
// A field the kind lacks is refused with its path (strict, the default),
// named in a warning (warn), or dropped (false). (Remove the append of
// fieldValidationParameter() in api/openapi.go addRoute and regenerate
// to see every apply fail with "error validating data: the server could
// not find the requested resource".)
func TestKubectlValidatesThroughTheServer(t *testing.T) {
	t.Parallel()
	namespace(t, "kvalid")
	pod := podYAML("valid", map[string]string{"app": "valid"}, "")
	if _, errOut, err := kubectlIn(t, pod, "apply", "-n", "kvalid", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply of a pod, validated: %v\n%s", err, errOut)
	}
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: valid\nspec:\n  selector: {app: valid}\n  ports:\n  - port: 80\n"
	if _, errOut, err := kubectlIn(t, svc, "apply", "-n", "kvalid", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply of a service, validated: %v\n%s", err, errOut)
	}

	typo := strings.Replace(podYAML("typo", nil, "\n  restartPolicyy: Never"), "    image: base\n", "    image: base\n    imagePullPolicyy: Always\n", 1)
	for _, validate := range []string{"", "--validate=strict"} {
		args := []string{"apply", "-n", "kvalid", "-f", "-"}
		if validate != "" {
			args = append(args, validate)
		}
		_, errOut, err := kubectlIn(t, typo, args...)
		if err == nil || !strings.Contains(errOut, `unknown field "spec.restartPolicyy"`) ||
			!strings.Contains(errOut, `unknown field "spec.containers[0].imagePullPolicyy"`) || strings.Contains(errOut, "error validating data") {
			t.Errorf("kubectl apply %s of a manifest with unknown fields: %v\n%s\nwant the server's refusal naming both", validate, err, errOut)
		}
	}
	if out, errOut, _ := kubectl(t, "get", "pod", "typo", "-n", "kvalid", "-o", "name", "--ignore-not-found"); out != "" {
		t.Errorf("the refused pod exists: %s %s", out, errOut)
	}

	// warn: created, each unknown field named.
	_, errOut, err := kubectlIn(t, strings.Replace(typo, "name: typo", "name: warned", 1), "apply", "-n", "kvalid", "-f", "-", "--validate=warn")
	if err != nil || !strings.Contains(errOut, `Warning: unknown field "spec.restartPolicyy"`) {
		t.Errorf("kubectl apply --validate=warn: %v\n%s\nwant it created with a warning naming the field", err, errOut)
	}
	// false: created, the fields dropped silently.
	_, errOut, err = kubectlIn(t, strings.Replace(typo, "name: typo", "name: ignored", 1), "apply", "-n", "kvalid", "-f", "-", "--validate=false")
	if err != nil || strings.Contains(errOut, "unknown field") {
		t.Errorf("kubectl apply --validate=false: %v\n%s\nwant it created without a word", err, errOut)
	}
	out, errOut, err := kubectl(t, "get", "pod", "ignored", "-n", "kvalid", "-o", "json")
	if err != nil {
		t.Fatalf("get the pod applied with --validate=false: %v\n%s", err, errOut)
	}
	var stored map[string]any
	if err := json.Unmarshal([]byte(out), &stored); err != nil {
		t.Fatal(err)
	}
	if spec, _ := stored["spec"].(map[string]any); spec == nil || spec["restartPolicyy"] != nil {
		t.Errorf("the stored pod has the unknown field: %s", out)
	}

	// replace -f: a PUT, validated the same way.
	out, errOut, err = kubectl(t, "get", "service", "valid", "-n", "kvalid", "-o", "json")
	if err != nil {
		t.Fatalf("get the service: %v\n%s", err, errOut)
	}
	var service map[string]any
	if err := json.Unmarshal([]byte(out), &service); err != nil {
		t.Fatal(err)
	}
	service["spec"].(map[string]any)["colour"] = "blue"
	replaced, _ := json.Marshal(service)
	if _, errOut, err := kubectlIn(t, string(replaced), "replace", "-f", "-"); err == nil || !strings.Contains(errOut, `unknown field "spec.colour"`) {
		t.Errorf("kubectl replace -f with an unknown field: %v\n%s\nwant the server's refusal naming it", err, errOut)
	}
	if _, errOut, err := kubectlIn(t, string(replaced), "replace", "-f", "-", "--validate=false"); err != nil {
		t.Errorf("kubectl replace -f --validate=false: %v\n%s", err, errOut)
	}

	// A deployment through create -f (a POST to apps/v1), fields dropped.
	dep := strings.Replace(deploymentYAML("kvalid", 1, "", ""), "  replicas: 1", "  replicas: 1\n  replicaz: 2", 1)
	if _, errOut, err := kubectlIn(t, dep, "create", "-n", "kvalid", "-f", "-", "--validate=false"); err != nil {
		t.Errorf("kubectl create -f of a deployment with --validate=false: %v\n%s", err, errOut)
	}
	// Validated, kubectl needs the PATCH of the kind in the document: it
	// is listed where the route exists.
	raw, errOut, err := kubectl(t, "get", "--raw", "/openapi/v3/apis/apps/v1")
	if err != nil {
		t.Fatalf("get the apps/v1 document: %v\n%s", err, errOut)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Paths["/apis/apps/v1/namespaces/{ns}/deployments/{name}"]["patch"] == nil {
		t.Log("apps/v1 has no PATCH of deployments yet: kubectl validates a deployment only with --validate=false")
		return
	}
	if _, errOut, err := kubectlIn(t, strings.Replace(deploymentYAML("kvalid2", 1, "", ""), "  replicas: 1", "  replicas: 1\n  replicaz: 2", 1),
		"create", "-n", "kvalid", "-f", "-"); err == nil || !strings.Contains(errOut, `unknown field "spec.replicaz"`) {
		t.Errorf("kubectl create -f of a deployment with an unknown field: %v\n%s", err, errOut)
	}
}

// kubectl explain reads the group version's OpenAPI document: the kind
// from the operations on the resource's path, its fields from the kind's
// schema, their descriptions from the Go doc comments. (Remove markKinds' call in api/openapi.go and regenerate to
// see "GVK ... not found in OpenAPI schema".)
func TestKubectlExplain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"pods"}, []string{"KIND:       Pod", "VERSION:    v1", "FIELDS:", "metadata\t<ObjectMeta>", "spec\t<PodSpec>", "status\t<PodStatus>"}},
		// The descriptions are the Go doc comments.
		{[]string{"pod.spec"}, []string{"PodSpec is the desired state of a pod.", "runtimeClassName\t<string>", "RuntimeClassName selects the zone brand"}},
		{[]string{"pod.spec.containers"}, []string{"FIELD: containers <[]Container>", "image\t<string>", "command\t<[]string>", "readinessProbe\t<Probe>"}},
		{[]string{"deploy.spec.template.spec.containers"}, []string{"GROUP:      apps", "KIND:       Deployment", "FIELD: containers <[]Container>", "name\t<string>"}},
		{[]string{"jobs.spec"}, []string{"GROUP:      batch", "KIND:       Job", "FIELD: spec <JobSpec>", "template\t<PodTemplate>"}},
		{[]string{"volumesnapshots"}, []string{"GROUP:      snapshot.storage.k8s.io", "KIND:       VolumeSnapshot"}},
		{[]string{"svc.spec.ports"}, []string{"FIELD: ports <[]ServicePort>", "port\t<integer>"}},
	} {
		out, errOut, err := kubectl(t, append([]string{"explain"}, c.args...)...)
		if err != nil {
			t.Errorf("kubectl explain %v: %v\n%s", c.args, err, errOut)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl explain %v lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	// A field the kind lacks is named.
	if _, errOut, err := kubectl(t, "explain", "pod.spec.colour"); err == nil || !strings.Contains(errOut, `field "colour" does not exist`) {
		t.Errorf("kubectl explain pod.spec.colour: %v\n%s", err, errOut)
	}
}
