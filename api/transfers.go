package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/store"
)

// transfersPath prefixes the volume transfer endpoints.
const transfersPath = "/api/v1/volumetransfers/"

// TransferServer relays claims' streams between nodes (transfer.Relay);
// the API has authorised the node by its certificate (transferNodes).
type TransferServer interface {
	ServeUpload(w http.ResponseWriter, r *http.Request, id string)
	ServeDownload(w http.ResponseWriter, r *http.Request, id string)
}

// uploadTransfer is the source node's upload of a stream of a moving
// claim. Whoever uploads (a cluster-admin too), the stream must be one of
// a move under way, which removes its streams when it ends: nothing is
// kept under an ID no move has.
func (s *Server) uploadTransfer(c *gin.Context) {
	if s.transfers == nil {
		s.fail(c, notFoundf("this server relays no volume transfers"))
		return
	}
	id := c.Param("name")
	if _, _, err := s.transferNodes(c.Request.Context(), id); errors.Is(err, auth.ErrTransferNotFound) {
		s.fail(c, notFoundf("volume transfer %q is no step of a claim's move under way", id))
		return
	} else if err != nil {
		s.fail(c, err)
		return
	}
	s.transfers.ServeUpload(c.Writer, c.Request, id)
}

// downloadTransfer is the destination node's download of that stream.
func (s *Server) downloadTransfer(c *gin.Context) {
	if s.transfers == nil {
		s.fail(c, notFoundf("this server relays no volume transfers"))
		return
	}
	s.transfers.ServeDownload(c.Writer, c.Request, c.Param("name"))
}

// transferNodes says which nodes a volume transfer is between: the ID is
// <claim uid>-move-<move id>-<step> of a claim moving now, whose move says
// where from and where to.
func (s *Server) transferNodes(ctx context.Context, id string) (from, to string, err error) {
	const uidLen = 36
	if len(id) <= uidLen || id[uidLen] != '-' {
		return "", "", auth.ErrTransferNotFound
	}
	c, err := s.store.Claims().GetByUID(ctx, id[:uidLen])
	if errors.Is(err, store.ErrNotFound) {
		return "", "", auth.ErrTransferNotFound
	}
	if err != nil {
		return "", "", err
	}
	m := c.Status.Move
	if m == nil {
		return "", "", auth.ErrTransferNotFound
	}
	for step := 1; step <= 2; step++ {
		if controlops.TransferID(c.Metadata.UID, m.ID, step) == id {
			return m.From, m.To, nil
		}
	}
	return "", "", auth.ErrTransferNotFound
}
