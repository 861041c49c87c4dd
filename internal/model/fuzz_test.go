package model

import (
	"encoding/json"
	"fmt"
	"testing"
)

// A quantity that parses reads back the same from its value in
// thousandths.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"500m", "2Gi", "1.5", "1e3", "0", "-1", "+7Ki", "1E-3", "0.0001", "9223372036854775807", "1e30", "1Ei", ".5", "1.2.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		milli, err := ParseQuantity(s)
		if err != nil {
			return
		}
		again, err := ParseQuantity(fmt.Sprintf("%dm", milli))
		if err != nil || again != milli {
			t.Fatalf("%q is %d thousandths, but %dm reads %d, %v", s, milli, milli, again, err)
		}
	})
}

// Validation never panics on a decoded pod, and a pod it accepts is
// accepted again after a round trip through JSON.
func FuzzValidatePod(f *testing.F) {
	for _, s := range []string{
		`{"metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"]}]}}`,
		`{"metadata":{"name":"p","namespace":"default","labels":{"app":"web"}},"spec":{"restartPolicy":"Never","terminationGracePeriodSeconds":30,` +
			`"containers":[{"name":"app","image":"base","env":[{"name":"A","value":"b"}],"resources":{"requests":{"cpu":"500m","memory":"1Gi"}},` +
			`"readinessProbe":{"exec":{"command":["true"]},"periodSeconds":1},"livenessProbe":{"httpGet":{"path":"/","port":8080}},"ports":[{"name":"http","containerPort":8080}]}]}}`,
		`{"metadata":{"name":"v","namespace":"default"},"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"c"}}],` +
			`"containers":[{"name":"app","image":"base","volumeMounts":[{"name":"d","mountPath":"/data"}]}]}}`,
		`{"metadata":{"name":""},"spec":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Pod
		if json.Unmarshal(b, &p) != nil {
			return
		}
		if errs := ValidatePod(&p); len(errs) > 0 {
			return
		}
		again, err := json.Marshal(&p)
		if err != nil {
			t.Fatalf("a valid pod does not encode: %v", err)
		}
		var q Pod
		if err := json.Unmarshal(again, &q); err != nil {
			t.Fatalf("a valid pod's JSON does not decode: %v\n%s", err, again)
		}
		if errs := ValidatePod(&q); len(errs) > 0 {
			t.Fatalf("a valid pod is refused after a round trip: %v\n%s", errs, again)
		}
	})
}
