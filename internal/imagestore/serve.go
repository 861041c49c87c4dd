package imagestore

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/zonewright/zonewright/internal/model"
)

// ServeArtefact answers a node's download of image name's artefact. It
// wants "Authorization: Bearer <token>" from Token for that image: none is
// 401, a wrong, forged or expired one 403, a missing artefact 404. It
// supports HEAD and Range (with If-Range against its ETag), so a node can
// resume. Errors are Kubernetes Status bodies like the rest of the API.
func (s *Store) ServeArtefact(w http.ResponseWriter, r *http.Request, name string) {
	if validName(name) != nil {
		model.WriteFailure(w, http.StatusNotFound, "NotFound", fmt.Sprintf("image %q not found", name))
		return
	}
	f, err := os.Open(s.artefactPath(name))
	if errors.Is(err, os.ErrNotExist) {
		model.WriteFailure(w, http.StatusNotFound, "NotFound", fmt.Sprintf("image %s has no artefact in the store", name))
		return
	}
	if err != nil {
		slog.ErrorContext(r.Context(), "open image artefact", "image", name, "err", err)
		model.WriteFailure(w, http.StatusInternalServerError, "InternalError", fmt.Sprintf("image %s: the artefact cannot be read", name))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		slog.ErrorContext(r.Context(), "stat image artefact", "image", name, "err", err)
		model.WriteFailure(w, http.StatusInternalServerError, "InternalError", fmt.Sprintf("image %s: the artefact cannot be read", name))
		return
	}
	// The ETag changes when the artefact is rebuilt, so a node's If-Range
	// never splices two versions.
	w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, fi.Size(), fi.ModTime().UnixNano()))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}
