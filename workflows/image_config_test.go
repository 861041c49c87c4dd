package workflows

import (
	"reflect"
	"testing"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// A registry image's configuration fills in what the pod leaves out, by
// Kubernetes' rules, and only for the containers of that image.
func TestImageConfigFillsWhatThePodLeavesOut(t *testing.T) {
	cfg := &model.OCIConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"--cmd"}, Env: []string{"A=image", "B=image", "C=x=y"}, WorkingDir: "/srv", User: "app:web"}
	cases := []struct {
		name      string
		container model.Container
		argv      []string
		env       []model.EnvVar
	}{
		{"neither: entrypoint and cmd", model.Container{Image: "img"},
			[]string{"/entry", "--cmd"}, []model.EnvVar{{Name: "A", Value: "image"}, {Name: "B", Value: "image"}, {Name: "C", Value: "x=y"}}},
		{"args: entrypoint and args", model.Container{Image: "img", Args: []string{"--mine"}},
			[]string{"/entry", "--mine"}, nil},
		{"command: as given", model.Container{Image: "img", Command: []string{"/mine"}, Args: []string{"a"}},
			[]string{"/mine", "a"}, nil},
		{"the pod's variable wins", model.Container{Image: "img", Command: []string{"/mine"}, Env: []model.EnvVar{{Name: "B", Value: "pod"}}},
			[]string{"/mine"}, []model.EnvVar{{Name: "A", Value: "image"}, {Name: "C", Value: "x=y"}, {Name: "B", Value: "pod"}}},
		{"another image: untouched", model.Container{Image: "other", Command: []string{"/x"}},
			[]string{"/x"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := model.PodSpec{Containers: []model.Container{{Name: "first", Image: "img", Command: []string{"/first"}}, tc.container}}
			spec.Containers[1].Name = "app"
			sb := hostapi.PodSandbox{Image: "img", Containers: []hostapi.ContainerSpec{
				{Name: "first", Argv: []string{"/first"}},
				{Name: "app", Argv: append(append([]string{}, tc.container.Command...), tc.container.Args...), Env: tc.container.Env}}}
			withImageConfig(&sb, spec, cfg, true)
			got := sb.Containers[1]
			if wantUser := map[bool]string{true: "app:web"}[tc.container.Image == "img"]; got.User != wantUser {
				t.Errorf("user %q, want %q", got.User, wantUser)
			}
			before := hostapi.PodSandbox{Image: "img", Containers: []hostapi.ContainerSpec{{Name: "first"}, {Name: "app"}}}
			if withImageConfig(&before, spec, cfg, false); before.Containers[1].User != "" {
				t.Errorf("a lifecycle from before image-user runs the container as %q, want the zone's root", before.Containers[1].User)
			}
			wantEnv := tc.env
			if wantEnv == nil && tc.container.Image == "img" {
				wantEnv = []model.EnvVar{{Name: "A", Value: "image"}, {Name: "B", Value: "image"}, {Name: "C", Value: "x=y"}}
			}
			if wantDir := map[bool]string{true: "/srv"}[tc.container.Image == "img"]; got.WorkingDir != wantDir {
				t.Errorf("working directory %q, want %q", got.WorkingDir, wantDir)
			}
			if !reflect.DeepEqual(got.Argv, tc.argv) || !reflect.DeepEqual(got.Env, wantEnv) {
				t.Errorf("argv %q env %v, want %q %v", got.Argv, got.Env, tc.argv, wantEnv)
			}
			if !reflect.DeepEqual(sb.Containers[0].Argv, []string{"/first"}) {
				t.Errorf("a container with a command keeps it: %q", sb.Containers[0].Argv)
			}
		})
	}
}
