package endpoints

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

func testPod(name, ip string, ready bool, mods ...func(*model.Pod)) *model.Pod {
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: "default", UID: "uid-" + name, Labels: map[string]string{"app": "web"}},
		Spec: model.PodSpec{NodeName: "n1", Containers: []model.Container{{Name: "c",
			Ports: []model.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: "TCP"}}}}},
		Status: model.PodStatus{Phase: model.PodRunning, PodIP: ip}}
	status := model.ConditionFalse
	if ready {
		status = model.ConditionTrue
	}
	p.Status.Conditions = []model.PodCondition{{Type: model.PodReady, Status: status}}
	for _, m := range mods {
		m(p)
	}
	return p
}

func terminating(p *model.Pod) { now := time.Now(); p.Metadata.DeletionTimestamp = &now }

func testService(mods ...func(*model.Service)) *model.Service {
	s := &model.Service{Metadata: model.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: model.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []model.ServicePort{{Name: "http", Port: 80, TargetPort: model.StrValue("http")}}}}
	model.DefaultService(s)
	for _, m := range mods {
		m(s)
	}
	return s
}

// summary renders subsets as "ports: ready | notReady; …" for comparison.
func summary(subsets []model.EndpointSubset) string {
	out := ""
	for _, s := range subsets {
		if out != "" {
			out += "; "
		}
		for _, p := range s.Ports {
			out += p.Name + ":" + itoa(p.Port) + "/" + p.Protocol + " "
		}
		out += "["
		for i, a := range s.Addresses {
			if i > 0 {
				out += ","
			}
			out += a.TargetRef.Name
		}
		out += "|"
		for i, a := range s.NotReadyAddresses {
			if i > 0 {
				out += ","
			}
			out += a.TargetRef.Name
		}
		out += "]"
	}
	return out
}

func itoa(n int32) string { b, _ := json.Marshal(n); return string(b) }

func TestComputeFollowsReadinessAndResolvesPorts(t *testing.T) {
	otherPort := func(p *model.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 9090 }
	for _, tc := range []struct {
		name string
		svc  *model.Service
		pods []*model.Pod
		want string
	}{
		{"ready pods are addresses, not-ready ones notReadyAddresses",
			testService(), []*model.Pod{testPod("a", "10.0.0.2", true), testPod("b", "10.0.0.3", false)},
			"http:8080/TCP [a|b]"},
		{"pods without an address, finished, or not selected are left out",
			testService(), []*model.Pod{testPod("a", "", true), testPod("b", "10.0.0.3", true, func(p *model.Pod) { p.Status.Phase = model.PodSucceeded }),
				testPod("c", "10.0.0.4", true, func(p *model.Pod) { p.Metadata.Labels = map[string]string{"app": "db"} }),
				testPod("d", "10.0.0.5", true, func(p *model.Pod) { p.Metadata.Namespace = "other" })},
			""},
		{"a terminating pod gives way to a ready one",
			testService(), []*model.Pod{testPod("a", "10.0.0.2", true, terminating), testPod("b", "10.0.0.3", true)},
			"http:8080/TCP [b|]"},
		{"a terminating pod that still passes readiness is used when nothing else is ready",
			testService(), []*model.Pod{testPod("a", "10.0.0.2", true, terminating), testPod("b", "10.0.0.3", false), testPod("c", "10.0.0.4", false, terminating)},
			"http:8080/TCP [a|b]"},
		{"publishNotReadyAddresses lists every candidate as an address",
			testService(func(s *model.Service) { s.Spec.PublishNotReadyAddresses = true }),
			[]*model.Pod{testPod("a", "10.0.0.2", false), testPod("b", "10.0.0.3", true, terminating)},
			"http:8080/TCP [a,b|]"},
		{"a named targetPort resolves per pod, grouping addresses by port",
			testService(), []*model.Pod{testPod("a", "10.0.0.10", true), testPod("b", "10.0.0.9", true, otherPort), testPod("c", "10.0.0.2", true)},
			"http:8080/TCP [c,a|]; http:9090/TCP [b|]"},
		{"a pod lacking the named port is left out",
			testService(), []*model.Pod{testPod("a", "10.0.0.2", true, func(p *model.Pod) { p.Spec.Containers[0].Ports = nil })},
			""},
		{"numeric targetPorts need no declared port",
			testService(func(s *model.Service) {
				s.Spec.Ports = []model.ServicePort{{Name: "dns", Port: 53, Protocol: "UDP", TargetPort: model.IntValue(5353)}, {Name: "x", Port: 81, Protocol: "TCP", TargetPort: model.IntValue(81)}}
			}),
			[]*model.Pod{testPod("a", "10.0.0.2", true, func(p *model.Pod) { p.Spec.Containers[0].Ports = nil })},
			"dns:5353/UDP x:81/TCP [a|]"},
		{"a service without a selector selects nothing",
			testService(func(s *model.Service) { s.Spec.Selector = nil }), []*model.Pod{testPod("a", "10.0.0.2", true)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(tc.svc, tc.pods)
			if s := summary(got); s != tc.want {
				t.Fatalf("got %q, want %q", s, tc.want)
			}
			if len(got) > 0 && len(got[0].Addresses) > 0 {
				a := got[0].Addresses[0]
				if a.NodeName != "n1" || a.TargetRef.Kind != "Pod" || a.TargetRef.UID == "" || a.IP == "" {
					t.Fatalf("address lacks its node or pod: %+v", a)
				}
			}
		})
	}
}

// A pod's hostname is its address's only where its subdomain is the
// service: another service selecting it lists it unnamed.
func TestHostnameOnlyUnderTheSubdomainService(t *testing.T) {
	named := func(p *model.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web-0", "web" }
	pods := []*model.Pod{testPod("a", "10.0.0.1", true, named), testPod("b", "10.0.0.2", true, func(p *model.Pod) { p.Spec.Hostname = "lonely" })}
	hostnames := func(svcName string) map[string]string {
		out := map[string]string{}
		for _, s := range Compute(testService(func(s *model.Service) { s.Metadata.Name = svcName }), pods) {
			for _, a := range s.Addresses {
				out[a.TargetRef.Name] = a.Hostname
			}
		}
		return out
	}
	if got := hostnames("web"); got["a"] != "web-0" || got["b"] != "" || len(got) != 2 {
		t.Errorf("under its subdomain's service: %v; want a named web-0, b unnamed", got)
	}
	if got := hostnames("other"); got["a"] != "" || got["b"] != "" || len(got) != 2 {
		t.Errorf("under another service: %v; want both unnamed", got)
	}
}
