package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// transfersPath prefixes the volume transfer endpoints.
const transfersPath = "/api/v1/volumetransfers/"

// TransferServer relays claims' streams between nodes, checking their
// bearer tokens (transfer.Relay).
type TransferServer interface {
	ServeUpload(w http.ResponseWriter, r *http.Request, id string)
	ServeDownload(w http.ResponseWriter, r *http.Request, id string)
}

// uploadTransfer is the source node's upload of a stream of a moving claim.
func (s *Server) uploadTransfer(c *gin.Context) {
	if s.transfers == nil {
		s.fail(c, notFoundf("this server relays no volume transfers"))
		return
	}
	s.transfers.ServeUpload(c.Writer, c.Request, c.Param("id"))
}

// downloadTransfer is the destination node's download of that stream.
func (s *Server) downloadTransfer(c *gin.Context) {
	if s.transfers == nil {
		s.fail(c, notFoundf("this server relays no volume transfers"))
		return
	}
	s.transfers.ServeDownload(c.Writer, c.Request, c.Param("id"))
}
