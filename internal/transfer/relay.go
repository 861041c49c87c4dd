// Package transfer relays a claim's ZFS send streams from the node that
// holds its data to the node it moves to, through the control plane: the
// source uploads a stream (PUT), the destination downloads it (GET).
// Nodes never talk to each other, so they need no route, credentials or
// listener beyond what they already have to reach the API.
//
// A stream is a file in the relay's directory, written as it arrives and
// made visible (renamed) only once the upload is complete, so a download
// never sees half a stream. The API authorises each request by the
// node's certificate: only the node a claim moves from uploads its
// streams, only the node it moves to downloads them (no token travels in
// the move's workflow history). Streams are never held in memory.
package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"

	"github.com/zonewright/zonewright/internal/model"
)

// Relay keeps the streams in Dir.
type Relay struct {
	Dir string
}

var idRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,126}[a-z0-9])?$`)

// ValidID checks a transfer ID: lower-case letters, digits and dashes,
// which are safe as a file name.
func ValidID(id string) error {
	if !idRe.MatchString(id) {
		return fmt.Errorf("transfer ID %q must be lower-case letters, digits and '-', at most 128", id)
	}
	return nil
}

func (r *Relay) path(id string) string { return filepath.Join(r.Dir, id+".zstream") }

// known answers 404 itself for an ID no transfer can have.
func (r *Relay) known(w http.ResponseWriter, id string) bool {
	if ValidID(id) != nil {
		model.WriteFailure(w, http.StatusNotFound, "NotFound", fmt.Sprintf("volume transfer %q not found", id))
		return false
	}
	return true
}

// ServeUpload stores the request's body as transfer id's stream. The
// body goes to a file of its own and replaces the stream only once it
// was read to its end (and to its Content-Length, when given), so an
// upload cut short (the source node died) leaves the last complete one,
// or none; a retry simply uploads again. A stream longer than limit
// bytes is refused (413) and nothing of it kept: the relay's disk holds
// what moves, not what a caller sends.
func (r *Relay) ServeUpload(w http.ResponseWriter, req *http.Request, id string, limit int64) {
	if !r.known(w, id) {
		return
	}
	tooLarge := func() {
		model.WriteFailure(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
			fmt.Sprintf("volume transfer %s: a stream of more than %d bytes is more than its claim can hold", id, limit))
	}
	if req.ContentLength > limit {
		tooLarge()
		return
	}
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		r.internal(w, req, id, "create the transfer directory", err)
		return
	}
	f, err := os.CreateTemp(r.Dir, id+".part-")
	if err != nil {
		r.internal(w, req, id, "create the stream file", err)
		return
	}
	tmp := f.Name()
	n, err := io.Copy(f, io.LimitReader(req.Body, limit+1))
	if err == nil && n > limit {
		f.Close()
		os.Remove(tmp)
		tooLarge()
		return
	}
	if err == nil && req.ContentLength >= 0 && n != req.ContentLength {
		err = fmt.Errorf("%d of %d bytes", n, req.ContentLength)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		model.WriteFailure(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("volume transfer %s: the upload ended early after %d bytes", id, n))
		return
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		r.internal(w, req, id, "write the stream", err)
		return
	}
	f.Close()
	if err := os.Rename(tmp, r.path(id)); err != nil {
		os.Remove(tmp)
		r.internal(w, req, id, "keep the stream", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(Uploaded{ID: id, Bytes: n})
}

// Uploaded is the answer to a complete upload.
type Uploaded struct {
	ID    string `json:"id"`
	Bytes int64  `json:"bytes"`
}

// ServeDownload answers with transfer id's complete stream (404 until
// it was uploaded), with Range support so a download can resume.
func (r *Relay) ServeDownload(w http.ResponseWriter, req *http.Request, id string) {
	if !r.known(w, id) {
		return
	}
	f, err := os.Open(r.path(id))
	if errors.Is(err, os.ErrNotExist) {
		model.WriteFailure(w, http.StatusNotFound, "NotFound", fmt.Sprintf("volume transfer %s has no complete stream (yet)", id))
		return
	}
	if err != nil {
		r.internal(w, req, id, "open the stream", err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		r.internal(w, req, id, "stat the stream", err)
		return
	}
	w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, fi.Size(), fi.ModTime().UnixNano()))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, req, "", fi.ModTime(), f)
}

// Remove deletes transfer id's stream and any upload in progress;
// removing nothing succeeds.
func (r *Relay) Remove(id string) error {
	if err := ValidID(id); err != nil {
		return err
	}
	parts, _ := filepath.Glob(filepath.Join(r.Dir, id+".part-*"))
	for _, p := range append(parts, r.path(id)) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (r *Relay) internal(w http.ResponseWriter, req *http.Request, id, what string, err error) {
	slog.ErrorContext(req.Context(), "volume transfer: "+what, "transfer", id, "err", err)
	model.WriteFailure(w, http.StatusInternalServerError, "InternalError", fmt.Sprintf("volume transfer %s: could not %s", id, what))
}
