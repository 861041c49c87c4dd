package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// transfersPath prefixes the volume transfer endpoints.
const transfersPath = "/api/v1/volumetransfers/"

// TransferServer relays claims' streams between nodes (transfer.Relay);
// the API has authorised the node by its certificate (transferNodes).
type TransferServer interface {
	ServeUpload(w http.ResponseWriter, r *http.Request, id string, limit int64)
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
	claim, err := s.transferClaim(c.Request.Context(), id)
	if errors.Is(err, auth.ErrTransferNotFound) {
		s.fail(c, notFoundf("volume transfer %q is no step of a claim's move under way", id))
		return
	} else if err != nil {
		s.fail(c, err)
		return
	}
	s.transfers.ServeUpload(c.Writer, c.Request, id, transferLimit(model.ClaimBytes(claim)))
}

// transferLimit bounds a stream of a claim of size bytes. The nodes send
// compressed streams (zfs send -c: blocks as stored), which the claim's
// quota bounds; the stream's own records are the rest, at most about as
// much again for a dataset of tiny files.
func transferLimit(size int64) int64 { return 2*size + 64<<20 }

// downloadTransfer is the destination node's download of that stream.
func (s *Server) downloadTransfer(c *gin.Context) {
	if s.transfers == nil {
		s.fail(c, notFoundf("this server relays no volume transfers"))
		return
	}
	s.transfers.ServeDownload(c.Writer, c.Request, c.Param("name"))
}

// transferNodes says which nodes a volume transfer is between: its
// claim's move says where from and where to.
func (s *Server) transferNodes(ctx context.Context, id string) (from, to string, err error) {
	c, err := s.transferClaim(ctx, id)
	if err != nil {
		return "", "", err
	}
	return c.Status.Move.From, c.Status.Move.To, nil
}

// transferClaim is the claim a volume transfer moves: the ID is
// <claim uid>-move-<move id>-<step> of a claim moving now.
func (s *Server) transferClaim(ctx context.Context, id string) (*model.PersistentVolumeClaim, error) {
	const uidLen = 36
	if len(id) <= uidLen || id[uidLen] != '-' {
		return nil, auth.ErrTransferNotFound
	}
	c, err := s.store.Claims().GetByUID(ctx, id[:uidLen])
	if errors.Is(err, store.ErrNotFound) {
		return nil, auth.ErrTransferNotFound
	}
	if err != nil {
		return nil, err
	}
	m := c.Status.Move
	if m == nil {
		return nil, auth.ErrTransferNotFound
	}
	for step := 1; step <= 2; step++ {
		if controlops.TransferID(c.Metadata.UID, m.ID, step) == id {
			return c, nil
		}
	}
	return nil, auth.ErrTransferNotFound
}
