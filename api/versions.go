package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
)

// tooLargeWait is how long a read from a resourceVersion the store has not
// reached waits for it, as Kubernetes does, before answering 504.
const tooLargeWait = 3 * time.Second

// parseResourceVersion reads a list's or watch's resourceVersion; "" and
// "0" mean "any" (0).
func parseResourceVersion(text string) (int64, error) {
	if text == "" || text == "0" {
		return 0, nil
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil || v < 0 {
		return 0, badRequestf("resourceVersion %q is not a resource version", text)
	}
	return v, nil
}

// awaitResourceVersion waits until the store has reached rv, as long as
// tooLargeWait: a client that read rv from another replica, or a moment
// ago, gets what it asked for; one that made rv up gets the 504 that
// Kubernetes answers ("Too large resource version") instead of a watch
// that silently skips every change up to rv.
func (s *Server) awaitResourceVersion(c *gin.Context, rv int64) error {
	if rv == 0 {
		return nil
	}
	ctx := c.Request.Context()
	deadline := time.Now().Add(tooLargeWait)
	for {
		current, err := s.store.ResourceVersion(ctx)
		if err != nil {
			return err
		}
		if rv <= current {
			return nil
		}
		if time.Now().After(deadline) {
			return &apiError{code: http.StatusGatewayTimeout, reason: "Timeout",
				msg: "Too large resource version: " + strconv.FormatInt(rv, 10) + ", current: " + strconv.FormatInt(current, 10),
				details: &model.StatusDetails{Causes: []model.StatusCause{{Type: "ResourceVersionTooLarge",
					Message: "Too large resource version"}}}}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
