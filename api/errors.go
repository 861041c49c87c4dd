package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// apiError is an error with the HTTP status and Kubernetes reason it maps to.
type apiError struct {
	code    int
	reason  string
	msg     string
	details *model.StatusDetails
	cause   error // logged, never sent
}

func (e *apiError) Error() string { return e.msg }

func badRequestf(format string, args ...any) *apiError {
	return &apiError{code: http.StatusBadRequest, reason: "BadRequest", msg: fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) *apiError {
	return &apiError{code: http.StatusNotFound, reason: "NotFound", msg: fmt.Sprintf(format, args...)}
}

// invalid is the 422 for an object that failed validation, one cause per field.
func invalid(kind, name string, errs model.FieldErrors) *apiError {
	d := &model.StatusDetails{Kind: kind, Name: name}
	for _, e := range errs {
		d.Causes = append(d.Causes, model.StatusCause{Type: e.Type, Message: e.Detail, Field: e.Field})
	}
	return &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid",
		msg: fmt.Sprintf("%s %q is invalid: %s", kind, name, errs.Error()), details: d}
}

// fail writes err as a Status. Store errors map to their HTTP meaning;
// anything unexpected is logged and answered without internals.
func (s *Server) fail(c *gin.Context, err error) {
	if le := (*controlops.LifecycleError)(nil); errors.As(err, &le) {
		err = lifecycleError(le.Err)
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = s.classify(c, err)
	}
	if ae.cause != nil {
		s.log.Warn("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "status", ae.code, "err", ae.cause)
	}
	st := model.Status{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: "Status"},
		Status: "Failure", Message: ae.msg, Reason: ae.reason, Code: ae.code, Details: ae.details}
	c.JSON(ae.code, st)
}

func (s *Server) classify(c *gin.Context, err error) *apiError {
	var (
		tooBig *http.MaxBytesError
		capped *model.PodImageLimitError
	)
	switch {
	case errors.As(err, &tooBig):
		return &apiError{code: http.StatusRequestEntityTooLarge, reason: "RequestEntityTooLarge", msg: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)}
	case errors.Is(err, store.ErrNotFound):
		return &apiError{code: http.StatusNotFound, reason: "NotFound", msg: err.Error()}
	case errors.As(err, new(*model.QuotaError)), errors.As(err, new(*model.LimitError)):
		return &apiError{code: http.StatusForbidden, reason: "Forbidden", msg: err.Error()}
	case errors.As(err, &capped):
		return &apiError{code: http.StatusForbidden, reason: "Forbidden", msg: err.Error(),
			details: &model.StatusDetails{Causes: []model.StatusCause{{Type: model.FieldForbidden, Field: capped.Field, Message: "Forbidden: " + capped.Detail()}}}}
	case errors.Is(err, store.ErrAlreadyExists) && fromDatabase(err):
		return &apiError{code: http.StatusConflict, reason: "AlreadyExists", msg: "the object already exists", cause: err}
	case errors.Is(err, store.ErrAlreadyExists):
		return &apiError{code: http.StatusConflict, reason: "AlreadyExists", msg: err.Error()}
	case errors.Is(err, store.ErrConflict) && fromDatabase(err):
		return &apiError{code: http.StatusConflict, reason: "Conflict", msg: "the object refers to one that is gone, or is still referred to", cause: err}
	case errors.Is(err, store.ErrConflict):
		return &apiError{code: http.StatusConflict, reason: "Conflict", msg: err.Error()}
	case errors.Is(err, store.ErrExpired):
		return &apiError{code: http.StatusGone, reason: "Expired", msg: err.Error()}
	case errors.Is(err, store.ErrInvalid):
		return &apiError{code: http.StatusBadRequest, reason: "BadRequest", msg: err.Error()}
	case errors.Is(err, store.ErrUnavailable):
		s.log.Warn("database unavailable", "path", c.Request.URL.Path, "err", err)
		return &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: "the database is unavailable; nothing was changed, retry shortly"}
	}
	s.log.Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	return &apiError{code: http.StatusInternalServerError, reason: "InternalError", msg: "an internal error occurred; it has been logged"}
}

// fromDatabase reports an error that carries the database's own words
// (constraint names, keys, SQL): its message is for the log only.
func fromDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}
