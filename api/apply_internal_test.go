package api

import (
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
)

// What recording the managers of a pod's update costs the API (two
// typed conversions of the pod, one merge), beside the ~0.7 ms p50 of a
// whole pod create (docs/access.md).
func BenchmarkWriteManagersOfAPodUpdate(b *testing.B) {
	s := &Server{}
	gin.SetMode(gin.ReleaseMode)
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("PUT", "/?fieldManager=bench", nil)
	pod := func(label string) *model.Pod {
		p := &model.Pod{TypeMeta: model.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			Metadata: model.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": label}},
			Spec: model.PodSpec{Containers: []model.Container{{Name: "app", Image: "base", Command: []string{"sleep", "3600"},
				Ports:     []model.ContainerPort{{ContainerPort: 8080}},
				Env:       []model.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
				Resources: model.ResourceRequirements{Requests: model.ResourceList{"cpu": "500m", "memory": "256Mi"}}}}}}
		return p
	}
	live := pod("a")
	if _, err := s.writeManagers(c, live, pod("b")); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := s.writeManagers(c, live, pod("b")); err != nil {
			b.Fatal(err)
		}
	}
}
