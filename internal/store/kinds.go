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
	return s.Pods().CreateWith(ctx, p, namespaceExists(ctx, p.Metadata.Namespace))
}

// CreateDeployment stores a new deployment in an existing namespace,
// adding the images made for its template's pods (see
// writeWithPodImages); it returns those it added.
func (s *Store) CreateDeployment(ctx context.Context, d *model.Deployment, add PodImages) ([]*model.Image, error) {
	return createWithPodImages(ctx, s, s.Deployments(), d, add)
}

// UpdateDeployment is Deployments().Update adding the images made for its
// template's pods (see writeWithPodImages); it returns those it added.
func (s *Store) UpdateDeployment(ctx context.Context, d *model.Deployment, add PodImages) ([]*model.Image, error) {
	r := s.Deployments()
	return s.writeWithPodImages(ctx, objectName(r.info.kind, d.Metadata.Name), add, func(tx pgx.Tx) (pending, error) {
		return r.updateTx(ctx, tx, d)
	})
}

// CreateJob stores a new job in an existing namespace, adding the images
// made for its template's pods (see writeWithPodImages); it returns those
// it added.
func (s *Store) CreateJob(ctx context.Context, j *model.Job, add PodImages) ([]*model.Image, error) {
	return createWithPodImages(ctx, s, s.Jobs(), j, add)
}

// createWithPodImages stores a new object in an existing namespace,
// adding the images made for its pods (see writeWithPodImages); it
// returns those it added.
func createWithPodImages[T any, PT ObjectPtr[T]](ctx context.Context, s *Store, r Resource[T, PT], obj PT, add PodImages) ([]*model.Image, error) {
	m := obj.GetMeta()
	if m.UID == "" {
		m.UID = newUID()
	}
	return s.writeWithPodImages(ctx, objectName(r.info.kind, m.Name), add, func(tx pgx.Tx) (pending, error) {
		return r.createRows(ctx, tx, obj, namespaceExists(ctx, m.Namespace))
	})
}

// CreateService stores a new service in an existing namespace, with its
// cluster IP allocated from ips in the same transaction (unless it is
// headless): a requested address that is taken or outside the range is a
// model.FieldErrors.
func (s *Store) CreateService(ctx context.Context, svc *model.Service, ips *clusterip.Range) error {
	return s.Services().CreateWith(ctx, svc, func(tx pgx.Tx) error {
		if err := namespaceExists(ctx, svc.Metadata.Namespace)(tx); err != nil {
			return err
		}
		if err := admitQuota(ctx, tx, svc.Metadata.Namespace, fmt.Sprintf("services %q", svc.Metadata.Name), model.Usage{model.QuotaServices: 1000}, nil); err != nil || svc.Headless() {
			return err
		}
		// A duplicate name must say so, not that its address is taken.
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM services WHERE namespace = $1 AND name = $2", svc.Metadata.Namespace, svc.Metadata.Name).Scan(&one)
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
	err := s.readSettled(ctx, func(tx pgx.Tx, settled int64) error {
		rv = settled
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
// still holds pods, deployments, jobs or services is ErrConflict.
// Endpoints left by its last services are the endpoints controller's to
// delete, so that watchers see them go.
func (s *Store) DeleteNamespace(ctx context.Context, name, resourceVersion string) (*model.Namespace, error) {
	return s.Namespaces().DeleteWith(ctx, "", name, resourceVersion, func(tx pgx.Tx, _ *model.Namespace) error {
		var pods int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pods WHERE namespace = $1", name).Scan(&pods); err != nil {
			return err
		}
		if pods > 0 {
			return fmt.Errorf("%w: namespace %q still holds %d pod(s); delete them first", ErrConflict, name, pods)
		}
		var deployments int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM deployments WHERE namespace = $1", name).Scan(&deployments); err != nil {
			return err
		}
		if deployments > 0 {
			return fmt.Errorf("%w: namespace %q still holds %d deployment(s); delete them first", ErrConflict, name, deployments)
		}
		var jobs int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE namespace = $1", name).Scan(&jobs); err != nil {
			return err
		}
		if jobs > 0 {
			return fmt.Errorf("%w: namespace %q still holds %d job(s); delete them first", ErrConflict, name, jobs)
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

// PodsUsingImage lists the pods (any namespace, as "namespace/name") whose
// containers name image. Aliases are resolved when a pod is created, so the
// stored name is the catalog's.
func (s *Store) PodsUsingImage(ctx context.Context, image string) ([]string, error) {
	return podsUsingImage(ctx, s.pool, image)
}

// podsUsingImageSQL is answered from the pods_containers index
// (migration 00012): its expression is the index's.
const podsUsingImageSQL = "SELECT namespace || '/' || name FROM pods WHERE spec -> 'containers' @> $1::jsonb ORDER BY namespace, name"

func podsUsingImage(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, image string) ([]string, error) {
	match, err := json.Marshal([]map[string]string{{"image": image}})
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, podsUsingImageSQL, match)
	if err != nil {
		return nil, classify(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, classify(err)
}

// MarkImageDeleting stamps the image's deletion time unless a pod uses it
// (ErrConflict naming them). The check and the stamp share one write,
// with the image row locked FOR UPDATE; CreatePodWithCatalogImages locks
// the rows of its images FOR SHARE, so a pod is either refused because
// the image is deleting or counted here.
func (s *Store) MarkImageDeleting(ctx context.Context, name, resourceVersion string) (*model.Image, error) {
	return s.markImageDeleting(ctx, name, resourceVersion, nil)
}

// markImageDeleting is MarkImageDeleting with a further check, run in
// its transaction once the row is locked.
func (s *Store) markImageDeleting(ctx context.Context, name, resourceVersion string, check func(pgx.Tx, *model.Image) error) (*model.Image, error) {
	r := s.Images()
	var marked *model.Image
	err := s.write(ctx, func(tx pgx.Tx) (pending, error) {
		var args []any
		q := fmt.Sprintf("SELECT %s FROM %s WHERE %s FOR UPDATE", r.columns(), r.info.table, r.where("", name, &args))
		img, err := r.scan(tx.QueryRow(ctx, q, args...))
		if err != nil {
			return pending{}, r.notFound(classify(err), "", name)
		}
		if resourceVersion != "" && resourceVersion != img.Metadata.ResourceVersion {
			return pending{}, fmt.Errorf("%w: precondition failed: resourceVersion %s is stale (now %s)", ErrConflict, resourceVersion, img.Metadata.ResourceVersion)
		}
		if check != nil {
			if err := check(tx, img); err != nil {
				return pending{}, err
			}
		}
		users, err := podsUsingImage(ctx, tx, name)
		if err != nil {
			return pending{}, err
		}
		if len(users) > 0 {
			return pending{}, fmt.Errorf("%w: image %q is used by pod(s) %s; delete them first", ErrConflict, name, strings.Join(users, ", "))
		}
		marked = img
		if img.Metadata.DeletionTimestamp != nil {
			return pending{}, errUnchanged
		}
		now := time.Now().UTC()
		img.Metadata.DeletionTimestamp = &now
		return r.updateTx(ctx, tx, img)
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return nil, err
	}
	return marked, nil
}

// CreatePodWithCatalogImages stores a new pod in an existing namespace,
// adding the images made for it (add; see writeWithPodImages), if every
// image it names is then in the catalog and not being deleted, checked in
// the creation's transaction with those image rows locked FOR SHARE (see
// MarkImageDeleting). An image missing or deleting is a model.FieldErrors
// on the container's image. It returns the images it added.
func (s *Store) CreatePodWithCatalogImages(ctx context.Context, p *model.Pod, add PodImages) ([]*model.Image, error) {
	r := s.Pods()
	if p.Metadata.UID == "" {
		p.Metadata.UID = newUID()
	}
	object := fmt.Sprintf("pods %q", p.Metadata.Name)
	return s.writeWithPodImages(ctx, object, add, func(tx pgx.Tx) (pending, error) {
		return r.createRows(ctx, tx, p, func(tx pgx.Tx) error {
			if err := namespaceExists(ctx, p.Metadata.Namespace)(tx); err != nil {
				return err
			}
			var errs model.FieldErrors
			for i, c := range p.Spec.Containers {
				// Before the row is locked FOR SHARE: two pods upgrading
				// their shared locks would deadlock.
				if err := imageUsedAgain(ctx, tx, c.Image); err != nil {
					return err
				}
				var deleting bool
				err := tx.QueryRow(ctx, "SELECT deleted_at IS NOT NULL FROM images WHERE name = $1 FOR SHARE", c.Image).Scan(&deleting)
				field := fmt.Sprintf("spec.containers[%d].image", i)
				switch {
				case classify(err) == ErrNotFound:
					errs = append(errs, model.FieldError{Field: field, Type: model.FieldNotFound,
						Detail: fmt.Sprintf("Not found: %q: no such image in the catalog (GET /api/v1/images)", c.Image)})
				case err != nil:
					return err
				case deleting:
					errs = append(errs, model.FieldError{Field: field, Type: model.FieldInvalid,
						Detail: fmt.Sprintf("Invalid value: %q: the image is being deleted", c.Image)})
				}
			}
			if len(errs) > 0 {
				return errs
			}
			if err := admitLimits(ctx, tx, p.Metadata.Namespace, object, p, nil); err != nil {
				return err
			}
			return admitQuota(ctx, tx, p.Metadata.Namespace, object, model.PodUsage(p), p)
		})
	})
}

// namespaceExists is a create's check that the object's namespace
// exists; FOR SHARE keeps a concurrent namespace deletion from slipping in.
func namespaceExists(ctx context.Context, ns string) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM namespaces WHERE name = $1 FOR SHARE", ns).Scan(&one)
		if classify(err) == ErrNotFound {
			return fmt.Errorf("%w: namespace %q", ErrNotFound, ns)
		}
		return err
	}
}

var errHeld = errors.New("a node holds it")

// errUnchanged rolls back a write that found nothing to change.
var errUnchanged = errors.New("nothing to change")

// deleteOrMark deletes an object no node holds (held false), checking
// that in the deletion's transaction; one a node holds is stamped
// deleting instead, for its workflow to release (deleted says which).
func deleteOrMark[T any, PT ObjectPtr[T]](ctx context.Context, r Resource[T, PT], ns, name, resourceVersion string, held func(PT) bool) (obj PT, deleted bool, err error) {
	obj, err = r.DeleteWith(ctx, ns, name, resourceVersion, func(_ pgx.Tx, o PT) error {
		if held(o) {
			return errHeld
		}
		return nil
	})
	if !errors.Is(err, errHeld) {
		return obj, err == nil, err
	}
	obj, err = MarkDeleting(ctx, r, ns, name, resourceVersion)
	return obj, false, err
}

// MarkDeleting stamps an object's deletion time (once), for the workflow
// that owns it to finish the deletion. A non-empty resourceVersion is a
// precondition.
func MarkDeleting[T any, PT ObjectPtr[T]](ctx context.Context, r Resource[T, PT], ns, name, resourceVersion string) (PT, error) {
	var stale error
	obj, err := r.Modify(ctx, ns, name, func(o PT) bool {
		m := o.GetMeta()
		if resourceVersion != "" && resourceVersion != m.ResourceVersion {
			stale = fmt.Errorf("%w: precondition failed: resourceVersion %s is stale (now %s)", ErrConflict, resourceVersion, m.ResourceVersion)
			return false
		}
		if m.DeletionTimestamp != nil {
			return false
		}
		now := time.Now().UTC()
		m.DeletionTimestamp = &now
		return true
	})
	if err == nil {
		err = stale
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}
