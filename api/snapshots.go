package api

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

func (s *Server) listSnapshots(c *gin.Context) { listOrWatch(s, c, s.store.Snapshots(), c.Param("ns")) }
func (s *Server) getSnapshot(c *gin.Context) {
	getOne(s, c, s.store.Snapshots(), c.Param("ns"), c.Param("name"))
}

// createSnapshot records a snapshot of a claim; the claim's node takes it
// (status.readyToUse once it has). A claim that holds no data yet (no pod
// used it) cannot be snapshotted: 409.
func (s *Server) createSnapshot(c *gin.Context) {
	ns := c.Param("ns")
	var snap model.VolumeSnapshot
	if err := decode(c, &snap); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkGroupTypeMeta(&snap.TypeMeta, model.KindVolumeSnapshot, model.APIVersionSnapshot); err != nil {
		s.fail(c, err)
		return
	}
	if snap.Metadata.Namespace != "" && snap.Metadata.Namespace != ns {
		s.fail(c, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", snap.Metadata.Namespace, ns))
		return
	}
	snap.Metadata.Namespace = ns
	model.DefaultVolumeSnapshot(&snap)
	systemMeta(&snap.Metadata)
	snap.Status = model.VolumeSnapshotStatus{}
	if errs := model.ValidateVolumeSnapshot(&snap); len(errs) > 0 {
		s.fail(c, invalid(model.KindVolumeSnapshot, snap.Metadata.Name, errs))
		return
	}
	claim := *snap.Spec.Source.PersistentVolumeClaimName
	pvc, err := s.store.Claims().Get(c.Request.Context(), ns, claim)
	if err != nil {
		s.fail(c, err)
		return
	}
	if pvc.Status.NodeName == "" {
		s.fail(c, fmt.Errorf("%w: persistentvolumeclaim %q holds no data yet (no pod has used it): there is nothing to snapshot", store.ErrConflict, claim))
		return
	}
	if err := s.store.CreateSnapshot(c.Request.Context(), &snap); err != nil {
		s.fail(c, err)
		return
	}
	if err := s.volumes.SyncSnapshot(c.Request.Context(), ns, snap.Metadata.Name); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, &snap)
}

// deleteSnapshot removes a snapshot not taken yet at once; a taken one is
// marked and destroyed on its node once no claim cloned from it is left.
func (s *Server) deleteSnapshot(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	snap, deleted, err := s.store.DeleteSnapshot(c.Request.Context(), ns, name, c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if !deleted {
		if err := s.volumes.SyncSnapshot(c.Request.Context(), ns, name); err != nil {
			s.fail(c, err)
			return
		}
	}
	respond(c, http.StatusOK, snap)
}
