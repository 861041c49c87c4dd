package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
)

// PodImages are the registry images a write adds to the catalog because
// pods name their references and the catalog has none yet (images made
// for pods, model.LabelMadeForPods), and the most such images the
// catalog may hold (Max; zero: no bound).
type PodImages struct {
	Add []PodImage
	Max int
}

// PodImage is an image to add and the field of the object that names it.
type PodImage struct {
	Image *model.Image
	Field string // spec.containers[0].image
}

// madeForPods is the labels' containment that selects images made for pods.
var madeForPods = fmt.Sprintf(`{%q: "true"}`, model.LabelMadeForPods)

// writeWithPodImages is write for a change (fn, naming object, as
// `pods "web"`) that adds images made for pods: they are inserted in the
// change's transaction, before its checks, so the change and its images
// commit or fail together (and a dry run's exist in its transaction
// alone). An image another write added meanwhile is used as it is. It
// returns the images this write added, for their imports to start after
// the commit (none in a dry run).
func (s *Store) writeWithPodImages(ctx context.Context, object string, add PodImages, fn func(tx pgx.Tx) (pending, error)) ([]*model.Image, error) {
	var made []*model.Image
	err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		made = nil
		var stamps []pending
		if len(add.Add) > 0 {
			// One writer of new images at a time: the count below and the
			// look for an image another write added are then exact.
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", pglock.PodImages); err != nil {
				return err
			}
		}
		for _, pi := range add.Add {
			p, err := s.addPodImage(ctx, tx, object, pi, add.Max)
			if err != nil {
				return err
			}
			if p.obj != nil {
				stamps = append(stamps, p)
				made = append(made, pi.Image)
			}
		}
		p, err := fn(tx)
		if err != nil {
			return err
		}
		if IsDryRun(ctx) {
			return errDryRun
		}
		// Versions last, after every row lock (order.go).
		for _, st := range append(stamps, p) {
			if err := s.stamp(ctx, tx, st); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return made, nil
}

// addPodImage inserts one image made for pods unless the catalog has an
// image of its name; a zero pending when it has. Past max images made
// for pods (not being deleted), it is a *model.PodImageLimitError.
func (s *Store) addPodImage(ctx context.Context, tx pgx.Tx, object string, pi PodImage, max int) (pending, error) {
	img := pi.Image
	var one int
	err := tx.QueryRow(ctx, "SELECT 1 FROM images WHERE name = $1", img.Metadata.Name).Scan(&one)
	if err == nil {
		return pending{}, nil
	}
	if classify(err) != ErrNotFound {
		return pending{}, err
	}
	if max > 0 {
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM images WHERE labels @> $1::jsonb AND deleted_at IS NULL", madeForPods).Scan(&n); err != nil {
			return pending{}, err
		}
		if n >= max {
			return pending{}, &model.PodImageLimitError{Object: object, Field: pi.Field, Image: img.Metadata.Name, Source: img.Spec.Source, Limit: max}
		}
	}
	if img.Metadata.Labels == nil {
		img.Metadata.Labels = map[string]string{}
	}
	img.Metadata.Labels[model.LabelMadeForPods] = "true"
	if img.Metadata.UID == "" {
		img.Metadata.UID = newUID()
	}
	return s.Images().createRows(ctx, tx, img, nil)
}

// imageUsersSQL (%s: the image's name as SQL) is true while a pod names
// the image, or the template of a deployment, a job or a deployment's
// revision does (a deployment scaled to zero, or rolled back, still
// needs its image). Pods are answered from the
// pods_containers index.
const imageUsersSQL = `(EXISTS (SELECT 1 FROM pods WHERE spec -> 'containers' @> jsonb_build_array(jsonb_build_object('image', %[1]s)))
	OR EXISTS (SELECT 1 FROM deployments WHERE spec -> 'template' -> 'spec' -> 'containers' @> jsonb_build_array(jsonb_build_object('image', %[1]s)))
	OR EXISTS (SELECT 1 FROM jobs WHERE spec -> 'template' -> 'spec' -> 'containers' @> jsonb_build_array(jsonb_build_object('image', %[1]s)))
	OR EXISTS (SELECT 1 FROM controllerrevisions WHERE spec -> 'data' -> 'spec' -> 'containers' @> jsonb_build_array(jsonb_build_object('image', %[1]s))))`

// SweepPodImages is the periodic look at the images made for pods: it
// records when each was first found unused (and forgets it when it is
// used again), marks deleting those unused for longer than ttl, and
// returns the names of those being deleted (just marked, or earlier), for
// their deletion workflows to be started or joined. An image is marked
// only if, in the marking's transaction, it is still unused and was for
// ttl; a pod create then either came first (and the image is kept) or is
// refused because the image is being deleted.
func (s *Store) SweepPodImages(ctx context.Context, ttl time.Duration) ([]string, error) {
	used := fmt.Sprintf(imageUsersSQL, "i.name")
	if _, err := s.pool.Exec(ctx, `UPDATE images i SET unused_since = CASE WHEN `+used+` THEN NULL ELSE now() END
		WHERE i.labels @> $1::jsonb AND i.deleted_at IS NULL AND (i.unused_since IS NULL) <> `+used, madeForPods); err != nil {
		return nil, classify(err)
	}
	rows, err := s.pool.Query(ctx, `SELECT name FROM images WHERE labels @> $1::jsonb
		AND (deleted_at IS NOT NULL OR unused_since < now() - make_interval(secs => $2)) ORDER BY name`, madeForPods, ttl.Seconds())
	if err != nil {
		return nil, classify(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(err)
	}
	var deleting []string
	for _, name := range names {
		_, err := s.markImageDeleting(ctx, name, "", func(tx pgx.Tx, img *model.Image) error {
			if img.Metadata.DeletionTimestamp != nil {
				return nil
			}
			var expired bool
			err := tx.QueryRow(ctx, "SELECT unused_since < now() - make_interval(secs => $2) AND NOT "+fmt.Sprintf(imageUsersSQL, "$1::text")+
				" FROM images WHERE name = $1", name, ttl.Seconds()).Scan(&expired)
			if err == nil && !expired {
				err = errStillUsed
			}
			return err
		})
		switch {
		case errors.Is(err, errStillUsed), errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict):
			continue // used again, or gone
		case err != nil:
			return deleting, err
		}
		deleting = append(deleting, name)
	}
	return deleting, nil
}

// errStillUsed: the sweep found an image it was to remove used again.
var errStillUsed = errors.New("the image is used again")

// imageUsedAgain forgets when an image was found unused, in the
// transaction of a pod that names it (a pod that comes and goes between
// two sweeps must still restart the image's time); a write only when it
// was set.
func imageUsedAgain(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, "UPDATE images SET unused_since = NULL WHERE name = $1 AND unused_since IS NOT NULL", name)
	return err
}

// objectName is how a refusal names an object: `pods "web"`.
func objectName(kind, name string) string {
	return fmt.Sprintf("%ss %q", strings.ToLower(kind), name)
}
