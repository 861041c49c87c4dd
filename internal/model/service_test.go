package model

import (
	"encoding/json"
	"testing"
)

func TestTargetPortIsANumberOrAName(t *testing.T) {
	var p ServicePort
	if err := json.Unmarshal([]byte(`{"port":80,"targetPort":"http"}`), &p); err != nil || p.TargetPort.StrVal != "http" {
		t.Fatalf("named targetPort: %+v %v", p, err)
	}
	if err := json.Unmarshal([]byte(`{"port":80,"targetPort":8080}`), &p); err != nil || p.TargetPort != IntValue(8080) {
		t.Fatalf("numeric targetPort: %+v %v", p, err)
	}
	if err := json.Unmarshal([]byte(`{"port":80,"targetPort":[1]}`), &p); err == nil {
		t.Fatal("a list was taken for a port")
	}
	for _, v := range []IntOrString{IntValue(8080), StrValue("http")} {
		b, _ := json.Marshal(v)
		var back IntOrString
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Fatalf("%v went to %s and came back as %v (%v)", v, b, back, err)
		}
	}
}

func TestPortNamesAreIANAServiceNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"http": true, "h2c": true, "metrics-9090": true, "a": true,
		"": false, "8080": false, "-http": false, "http-": false, "ht--tp": false, "HTTP": false,
		"sixteen-chars-xx": false, "under_score": false,
	} {
		if got := len(validatePortName("f", name)) == 0; got != ok {
			t.Errorf("port name %q accepted=%t, want %t", name, got, ok)
		}
	}
}

func TestDefaultServiceFillsWhatKubernetesDoes(t *testing.T) {
	s := &Service{Spec: ServiceSpec{SessionAffinity: AffinityClientIP, Ports: []ServicePort{{Port: 53}}}}
	DefaultService(s)
	if s.Kind != KindService || s.Spec.Type != ServiceTypeClusterIP || s.Spec.Ports[0].Protocol != "TCP" || s.Spec.Ports[0].TargetPort != IntValue(53) ||
		*s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != DefaultClientIPTimeout {
		t.Fatalf("defaults: %+v", s.Spec)
	}
}
