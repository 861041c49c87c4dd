package model

import "testing"

func TestParseQuantity(t *testing.T) {
	for _, tc := range []struct {
		in    string
		milli int64
		ok    bool
	}{
		{"500m", 500, true},
		{"1", 1000, true},
		{"1.5", 1500, true},
		{"2Gi", 2 << 30 * 1000, true},
		{"128Mi", 128 << 20 * 1000, true},
		{"1k", 1_000_000, true},
		{"1e3", 1_000_000, true},
		{"0.1m", 1, true}, // rounded up, never understated
		{".5", 500, true},
		{"-1", -1000, true},
		{"lots", 0, false},
		{"1.2.3", 0, false},
		{"5 Gi", 0, false},
		{"1Xi", 0, false},
		{"", 0, false},
		{"9Ei", 0, false}, // too large once in thousandths
	} {
		got, err := ParseQuantity(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.milli) {
			t.Errorf("ParseQuantity(%q) = %d, %v; want %d ok=%t", tc.in, got, err, tc.milli, tc.ok)
		}
	}
	if b, _ := Bytes("1Ki"); b != 1024 {
		t.Errorf("Bytes(1Ki) = %d", b)
	}
	if m, _ := MilliCPU("250m"); m != 250 {
		t.Errorf("MilliCPU(250m) = %d", m)
	}
}

func TestValidatePodCollectsEveryFieldError(t *testing.T) {
	p := &Pod{Metadata: ObjectMeta{Name: "Bad_Name", Namespace: "default"},
		Spec: PodSpec{Containers: []Container{
			{Name: "a", Image: "", Command: []string{"x"}, Resources: ResourceRequirements{Limits: ResourceList{"cpu": "lots"}}},
			{Name: "a", Image: "i", Command: []string{"x"}, Ports: []ContainerPort{{ContainerPort: 70000}}},
		}}}
	DefaultPod(p)
	errs := ValidatePod(p)
	want := map[string]bool{"metadata.name": false, "spec.containers[0].image": false,
		"spec.containers[0].resources.limits.cpu": false, "spec.containers[1].name": false, "spec.containers[1].ports[0].containerPort": false}
	for _, e := range errs {
		if _, ok := want[e.Field]; ok {
			want[e.Field] = true
		}
	}
	for f, seen := range want {
		if !seen {
			t.Errorf("no error for %s in %v", f, errs)
		}
	}
}
