package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// A held answer's headers reach the client only when it is released: a
// retried patch's first attempt leaves no Warning behind. (Let Header
// return the real writer's, and release copy nothing, to see the dropped
// attempt's warning sent.)
func TestAHeldAnswerKeepsItsHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Writer.Header().Set("X-Before", "kept")
	attempt := func() *heldResponse {
		held := &heldResponse{ResponseWriter: c.Writer, header: c.Writer.Header().Clone()}
		held.Header().Add("Warning", `299 - "unknown field"`)
		held.WriteHeader(http.StatusConflict)
		return held
	}
	attempt() // dropped, as a conflict to retry is
	attempt().release()
	if w := rec.Header().Values("Warning"); len(w) != 1 || rec.Header().Get("X-Before") != "kept" || rec.Code != http.StatusConflict {
		t.Fatalf("after a dropped and a released attempt: warnings %q, headers %v, code %d", w, rec.Header(), rec.Code)
	}
}
