package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/model"
)

// EnsureNamespace creates the namespace if it does not exist yet.
func (s *Store) EnsureNamespace(ctx context.Context, name string) error {
	ns := &model.Namespace{Metadata: model.ObjectMeta{Name: name}}
	model.DefaultNamespaceObject(ns)
	err := s.Namespaces().Create(ctx, ns)
	if err != nil && !isAlreadyExists(err) {
		return err
	}
	return nil
}

func isAlreadyExists(err error) bool { return err != nil && errors.Is(err, ErrAlreadyExists) }

// CreatePod stores a new pod in an existing namespace.
func (s *Store) CreatePod(ctx context.Context, p *model.Pod) error {
	return s.Pods().CreateWith(ctx, p, func(tx pgx.Tx) error {
		// FOR SHARE keeps a concurrent namespace deletion from slipping in.
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM namespaces WHERE name = $1 FOR SHARE", p.Metadata.Namespace).Scan(&one)
		if classify(err) == ErrNotFound {
			return fmt.Errorf("%w: namespace %q", ErrNotFound, p.Metadata.Namespace)
		}
		return err
	})
}

// CreateService stores a new service in an existing namespace, with its
// cluster IP allocated from ips in the same transaction (unless it is
// headless): a requested address that is taken or outside the range is a
// model.FieldErrors.
func (s *Store) CreateService(ctx context.Context, svc *model.Service, ips *clusterip.Range) error {
	return s.Services().CreateWith(ctx, svc, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM namespaces WHERE name = $1 FOR SHARE", svc.Metadata.Namespace).Scan(&one)
		if classify(err) == ErrNotFound {
			return fmt.Errorf("%w: namespace %q", ErrNotFound, svc.Metadata.Namespace)
		}
		if err != nil || svc.Headless() {
			return err
		}
		// A duplicate name must say so, not that its address is taken.
		err = tx.QueryRow(ctx, "SELECT 1 FROM services WHERE namespace = $1 AND name = $2", svc.Metadata.Namespace, svc.Metadata.Name).Scan(&one)
		if err == nil {
			return fmt.Errorf("%w: service %q", ErrAlreadyExists, svc.Metadata.Name)
		} else if classify(err) != ErrNotFound {
			return err
		}
		ip, err := ips.Allocate(ctx, tx, clusterip.Service{UID: svc.Metadata.UID, Namespace: svc.Metadata.Namespace, Name: svc.Metadata.Name}, svc.Spec.ClusterIP)
		if err != nil {
			return err
		}
		svc.Spec.ClusterIP = ip.String()
		return nil
	})
}

// DeleteService removes a service and releases its cluster IP in the same
// transaction. Its Endpoints go with the endpoints controller.
func (s *Store) DeleteService(ctx context.Context, ns, name, resourceVersion string) (*model.Service, error) {
	return s.Services().DeleteWith(ctx, ns, name, resourceVersion, func(tx pgx.Tx, svc *model.Service) error {
		return clusterip.Release(ctx, tx, svc.Metadata.UID)
	})
}

// ServiceNetwork reads every service and every Endpoints object in one
// snapshot, with the resource version of that snapshot: the state of the
// service network exactly as of that version.
func (s *Store) ServiceNetwork(ctx context.Context) (int64, []model.Service, []model.Endpoints, error) {
	var (
		rv   int64
		svcs []model.Service
		eps  []model.Endpoints
	)
	err := s.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(resource_version), 0) FROM changes").Scan(&rv); err != nil {
			return err
		}
		var err error
		if svcs, err = s.Services().all(ctx, tx); err != nil {
			return err
		}
		eps, err = s.Endpoints().all(ctx, tx)
		return err
	})
	return rv, svcs, eps, err
}

// DeleteNamespace removes an empty namespace and its events; one that
// still holds pods or services is ErrConflict. Endpoints left by its last
// services are the endpoints controller's to delete, so that watchers see
// them go.
func (s *Store) DeleteNamespace(ctx context.Context, name, resourceVersion string) (*model.Namespace, error) {
	return s.Namespaces().DeleteWith(ctx, "", name, resourceVersion, func(tx pgx.Tx, _ *model.Namespace) error {
		var pods int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pods WHERE namespace = $1", name).Scan(&pods); err != nil {
			return err
		}
		if pods > 0 {
			return fmt.Errorf("%w: namespace %q still holds %d pod(s); delete them first", ErrConflict, name, pods)
		}
		var services int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM services WHERE namespace = $1", name).Scan(&services); err != nil {
			return err
		}
		if services > 0 {
			return fmt.Errorf("%w: namespace %q still holds %d service(s); delete them first", ErrConflict, name, services)
		}
		_, err := tx.Exec(ctx, "DELETE FROM events WHERE namespace = $1", name)
		return err
	})
}

// DeleteNode removes a node that has no pods bound to it.
func (s *Store) DeleteNode(ctx context.Context, name, resourceVersion string) (*model.Node, error) {
	return s.Nodes().DeleteWith(ctx, "", name, resourceVersion, func(tx pgx.Tx, _ *model.Node) error {
		var pods int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pods WHERE node_name = $1", name).Scan(&pods); err != nil {
			return err
		}
		if pods > 0 {
			return fmt.Errorf("%w: node %q still has %d pod(s) bound to it", ErrConflict, name, pods)
		}
		return nil
	})
}

// RecordEvent appends an event about obj to its namespace's event log.
func (s *Store) RecordEvent(ctx context.Context, obj model.ObjectReference, typ, reason, message, source string) error {
	now := time.Now().UTC()
	ns := obj.Namespace
	if ns == "" {
		ns = model.DefaultNamespace
	}
	ev := &model.Event{
		Metadata: model.ObjectMeta{Name: fmt.Sprintf("%s.%x", obj.Name, now.UnixNano()), Namespace: ns},
		EventData: model.EventData{InvolvedObject: obj, Type: typ, Reason: reason, Message: message,
			Count: 1, FirstTimestamp: &now, LastTimestamp: &now, Source: source},
	}
	return s.Events().Create(ctx, ev)
}

// ExpireEvents deletes events last seen longer ago than retention, each
// with a DELETED change so watchers stay consistent.
func (s *Store) ExpireEvents(ctx context.Context, retention time.Duration) (int64, error) {
	cutoff := time.Now().Add(-retention)
	var n int64
	for {
		rows, err := s.pool.Query(ctx, "SELECT namespace, name FROM events WHERE created_at < $1 ORDER BY created_at LIMIT 200", cutoff)
		if err != nil {
			return n, classify(err)
		}
		keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ NS, Name string }])
		if err != nil {
			return n, classify(err)
		}
		for _, k := range keys {
			if _, err := s.Events().Delete(ctx, k.NS, k.Name, ""); err != nil && !errors.Is(err, ErrNotFound) {
				return n, err
			}
			n++
		}
		if len(keys) < 200 {
			return n, nil
		}
	}
}

// PodsUsingImage lists the pods (any namespace, as "namespace/name") whose
// containers name image. Aliases are resolved when a pod is created, so the
// stored name is the catalog's.
func (s *Store) PodsUsingImage(ctx context.Context, image string) ([]string, error) {
	match, err := json.Marshal([]map[string]string{{"image": image}})
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT namespace || '/' || name FROM pods WHERE spec -> 'containers' @> $1::jsonb ORDER BY namespace, name", match)
	if err != nil {
		return nil, classify(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, classify(err)
}

// MarkImageDeleting stamps the image's deletion time unless a pod uses it
// (ErrConflict naming them). The check and the stamp share a transaction
// that locks the image row; a pod created meanwhile is refused at create
// time because the image is deleting.
func (s *Store) MarkImageDeleting(ctx context.Context, name, resourceVersion string) (*model.Image, error) {
	for {
		img, err := s.Images().Get(ctx, "", name)
		if err != nil {
			return nil, err
		}
		if resourceVersion != "" && resourceVersion != img.Metadata.ResourceVersion {
			return nil, fmt.Errorf("%w: precondition failed: resourceVersion %s is stale (now %s)", ErrConflict, resourceVersion, img.Metadata.ResourceVersion)
		}
		users, err := s.PodsUsingImage(ctx, name)
		if err != nil {
			return nil, err
		}
		if len(users) > 0 {
			return nil, fmt.Errorf("%w: image %q is used by pod(s) %s; delete them first", ErrConflict, name, strings.Join(users, ", "))
		}
		if img.Metadata.DeletionTimestamp != nil {
			return img, nil
		}
		now := time.Now().UTC()
		img.Metadata.DeletionTimestamp = &now
		if err := s.Images().Update(ctx, img); errors.Is(err, ErrConflict) && resourceVersion == "" {
			continue
		} else if err != nil {
			return nil, err
		}
		return img, nil
	}
}

// CreateClaim stores a new claim in an existing namespace.
func (s *Store) CreateClaim(ctx context.Context, c *model.PersistentVolumeClaim) error {
	return s.Claims().CreateWith(ctx, c, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM namespaces WHERE name = $1 FOR SHARE", c.Metadata.Namespace).Scan(&one)
		if classify(err) == ErrNotFound {
			return fmt.Errorf("%w: namespace %q", ErrNotFound, c.Metadata.Namespace)
		}
		return err
	})
}

var errClaimBound = errors.New("the claim is bound to a node")

// DeleteClaim deletes a claim that no node holds, checking in the
// deletion's transaction that it is still unbound; a bound claim is
// stamped deleting instead, for its node to release (deleted says which).
func (s *Store) DeleteClaim(ctx context.Context, ns, name, resourceVersion string) (pvc *model.PersistentVolumeClaim, deleted bool, err error) {
	for {
		pvc, err := s.Claims().DeleteWith(ctx, ns, name, resourceVersion, func(_ pgx.Tx, c *model.PersistentVolumeClaim) error {
			if c.Status.NodeName != "" {
				return errClaimBound
			}
			return nil
		})
		if !errors.Is(err, errClaimBound) {
			return pvc, err == nil, err
		}
		if pvc, err = s.Claims().Get(ctx, ns, name); err != nil {
			return nil, false, err
		}
		if pvc.Metadata.DeletionTimestamp != nil {
			return pvc, false, nil
		}
		now := time.Now().UTC()
		pvc.Metadata.DeletionTimestamp = &now
		if err := s.Claims().Update(ctx, pvc); errors.Is(err, ErrConflict) && resourceVersion == "" {
			continue
		} else if err != nil {
			return nil, false, err
		}
		return pvc, false, nil
	}
}

// PodsUsingClaim lists the pods of namespace ns (by name) whose volumes
// name the claim. A pod row lasts until its zone is gone, so while one is
// listed, a zone may mount the claim's dataset.
func (s *Store) PodsUsingClaim(ctx context.Context, ns, claim string) ([]string, error) {
	match, err := json.Marshal([]map[string]any{{"persistentVolumeClaim": map[string]string{"claimName": claim}}})
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT name FROM pods WHERE namespace = $1 AND spec -> 'volumes' @> $2::jsonb ORDER BY name", ns, match)
	if err != nil {
		return nil, classify(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, classify(err)
}

// SetClaimsPhase sets the phase of every claim bound to node (Lost while
// the node is unreachable or gone, Bound again when it is back) and
// returns the claims it changed.
func (s *Store) SetClaimsPhase(ctx context.Context, node, phase string) ([]string, error) {
	claims, err := s.Claims().ListAll(ctx, ListOptions{FieldSelector: "status.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, c := range claims {
		_, err := s.Claims().Modify(ctx, c.Metadata.Namespace, c.Metadata.Name, func(c *model.PersistentVolumeClaim) bool {
			if c.Status.NodeName != node || c.Status.Phase == phase {
				return false
			}
			c.Status.Phase = phase
			changed = append(changed, c.Metadata.Namespace+"/"+c.Metadata.Name)
			return true
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			return changed, err
		}
	}
	return changed, nil
}

// ClaimsFromSnapshot lists the claims of namespace ns restored from the
// snapshot (their spec.dataSource).
func (s *Store) ClaimsFromSnapshot(ctx context.Context, ns, snapshot string) ([]string, error) {
	match, err := json.Marshal(map[string]any{"dataSource": map[string]string{"kind": model.KindVolumeSnapshot, "name": snapshot}})
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT name FROM persistentvolumeclaims WHERE namespace = $1 AND spec @> $2::jsonb ORDER BY name", ns, match)
	if err != nil {
		return nil, classify(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, classify(err)
}

// CreateSnapshot stores a new snapshot in an existing namespace.
func (s *Store) CreateSnapshot(ctx context.Context, snap *model.VolumeSnapshot) error {
	return s.Snapshots().CreateWith(ctx, snap, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM namespaces WHERE name = $1 FOR SHARE", snap.Metadata.Namespace).Scan(&one)
		if classify(err) == ErrNotFound {
			return fmt.Errorf("%w: namespace %q", ErrNotFound, snap.Metadata.Namespace)
		}
		return err
	})
}

var errSnapshotTaken = errors.New("the snapshot is on a node")

// DeleteSnapshot deletes a snapshot no node holds at once; one taken is
// stamped deleting, for its node to destroy (deleted says which).
func (s *Store) DeleteSnapshot(ctx context.Context, ns, name, resourceVersion string) (snap *model.VolumeSnapshot, deleted bool, err error) {
	for {
		snap, err := s.Snapshots().DeleteWith(ctx, ns, name, resourceVersion, func(_ pgx.Tx, v *model.VolumeSnapshot) error {
			if v.Status.NodeName != "" {
				return errSnapshotTaken
			}
			return nil
		})
		if !errors.Is(err, errSnapshotTaken) {
			return snap, err == nil, err
		}
		if snap, err = s.Snapshots().Get(ctx, ns, name); err != nil {
			return nil, false, err
		}
		if snap.Metadata.DeletionTimestamp != nil {
			return snap, false, nil
		}
		now := time.Now().UTC()
		snap.Metadata.DeletionTimestamp = &now
		if err := s.Snapshots().Update(ctx, snap); errors.Is(err, ErrConflict) && resourceVersion == "" {
			continue
		} else if err != nil {
			return nil, false, err
		}
		return snap, false, nil
	}
}
