package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
)

// expireBatch bounds the events one expiry transaction deletes.
const expireBatch = 500

// Similar events, the same but for their messages, are combined as
// Kubernetes' event aggregator does: once an object has had
// similarEventsMax different messages for one reason within
// similarEventsWindow, further ones count on one event whose message is
// the latest with combinedPrefix, until the window passes without one.
const (
	similarEventsMax    = 10
	similarEventsWindow = 10 * time.Minute
	combinedPrefix      = "(combined from similar events): "
)

// RecordEvent records an event about obj in its namespace's event log. An
// event that repeats one already there (same object, type, reason, source
// and message) is counted on that event, as Kubernetes' event correlator
// does: its count and lastTimestamp go up, firstTimestamp stays, and
// watchers see it MODIFIED. The event's name is derived from what it
// repeats, so recorders racing on the same event, or an activity retried
// after it recorded one, count on one row.
func (s *Store) RecordEvent(ctx context.Context, obj model.ObjectReference, typ, reason, message, source string) error {
	// PostgreSQL keeps microseconds; lastTimestamp and last_seen agree.
	now := time.Now().UTC().Truncate(time.Microsecond)
	ns := obj.Namespace
	if ns == "" {
		ns = model.DefaultNamespace
	}
	data := model.EventData{InvolvedObject: obj, Type: typ, Reason: model.ShortMessage(reason, model.MaxReasonBytes),
		Message: model.ShortMessage(message, model.MaxMessageBytes), Count: 1, FirstTimestamp: &now, LastTimestamp: &now, Source: source}
	name, similar := eventNames(data)
	combine, err := s.combineSimilar(ctx, ns, data, name, similar, now)
	if err != nil {
		return err
	}
	if combine {
		name, data.Message = similar, model.ShortMessage(combinedPrefix+data.Message, model.MaxMessageBytes)
	}
	for {
		err := s.Events().Create(ctx, &model.Event{Metadata: model.ObjectMeta{Name: name, Namespace: ns}, EventData: data})
		if !errors.Is(err, ErrAlreadyExists) {
			return err
		}
		if err = s.countEvent(ctx, ns, name, data.Message, now); !errors.Is(err, ErrNotFound) {
			return err
		}
		// It expired between the two: record it anew.
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// eventNames are the involved object's name and a hash of what makes two
// events the same one, and of what makes them similar (all but the
// message): the names of the event and of its combination.
func eventNames(e model.EventData) (exact, similar string) {
	h := sha256.New()
	for _, field := range []string{e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.InvolvedObject.UID,
		e.Type, e.Reason, e.Source} {
		writeField(h, field)
	}
	similar = fmt.Sprintf("%s.%x", e.InvolvedObject.Name, h.Sum(nil)[:8])
	writeField(h, e.Message)
	return fmt.Sprintf("%s.%x", e.InvolvedObject.Name, h.Sum(nil)[:8]), similar
}

// writeField writes s length-prefixed, so that no two lists of fields
// hash the same text.
func writeField(h hash.Hash, s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }

// combineSimilar says whether the event e, to be named exact, is to count
// on the combination of similar events: one is already under way, or e
// makes similarEventsMax different ones within the window. Racing
// recorders may each see one fewer; the next event combines.
func (s *Store) combineSimilar(ctx context.Context, ns string, e model.EventData, exact, similar string, now time.Time) (bool, error) {
	involved, err := json.Marshal(e.InvolvedObject)
	if err != nil {
		return false, err
	}
	var others int
	var combining bool
	err = s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE name <> $6 AND name <> $7), coalesce(bool_or(name = $7), false) FROM events
		WHERE namespace = $1 AND spec -> 'involvedObject' ->> 'name' = $2 AND spec ->> 'reason' = $3 AND last_seen > $4
		AND spec -> 'involvedObject' = $5::jsonb AND spec ->> 'type' = $8 AND coalesce(spec ->> 'source', '') = $9`,
		ns, e.InvolvedObject.Name, e.Reason, now.Add(-similarEventsWindow), string(involved), exact, similar, e.Type, e.Source).Scan(&others, &combining)
	if err != nil {
		return false, classify(err)
	}
	return combining || others+1 >= similarEventsMax, nil
}

// countEvent counts one more occurrence of a stored event, seen at seen
// with message, in one statement: concurrent recorders never conflict.
func (s *Store) countEvent(ctx context.Context, ns, name, message string, seen time.Time) error {
	r := s.Events()
	return s.write(ctx, func(tx pgx.Tx) (pending, error) {
		q := fmt.Sprintf(`UPDATE events SET generation = generation + 1,
			last_seen = greatest(last_seen, $1),
			spec = spec || jsonb_build_object('count', coalesce((spec ->> 'count')::bigint, 0) + 1,
				'lastTimestamp', CASE WHEN $1 > last_seen THEN to_jsonb($2::text) ELSE spec -> 'lastTimestamp' END,
				'message', CASE WHEN $1 > last_seen THEN to_jsonb($5::text) ELSE spec -> 'message' END)
			WHERE namespace = $3 AND name = $4 RETURNING %s`, r.columns())
		ev, err := r.scan(tx.QueryRow(ctx, q, seen, seen.Format(time.RFC3339Nano), ns, name, message))
		if err != nil {
			return pending{}, r.notFound(classify(err), ns, name)
		}
		return r.finish(ev, "MODIFIED"), nil
	})
}

// ExpireEvents deletes the events last seen longer ago than retention, up
// to expireBatch in each transaction, each with a DELETED change so that
// watchers stay consistent.
func (s *Store) ExpireEvents(ctx context.Context, retention time.Duration) (int64, error) {
	cutoff := time.Now().Add(-retention)
	var n int64
	for {
		deleted, err := s.expireEvents(ctx, cutoff, expireBatch)
		n += int64(deleted)
		if err != nil || deleted < expireBatch {
			return n, err
		}
	}
}

// expireEvents deletes up to limit events last seen before cutoff, oldest
// first, in one statement.
func (s *Store) expireEvents(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	r := s.Events()
	var deleted int
	err := s.writeMany(ctx, func(tx pgx.Tx, versions func(int) ([]int64, error)) ([]change, error) {
		// The outer condition is checked again on a row a concurrent
		// recorder has just counted, which is then kept.
		rows, err := tx.Query(ctx, fmt.Sprintf(`DELETE FROM events WHERE last_seen < $1 AND uid IN
			(SELECT uid FROM events WHERE last_seen < $1 ORDER BY last_seen LIMIT $2) RETURNING %s`, r.columns()), cutoff, limit)
		if err != nil {
			return nil, err
		}
		gone, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*model.Event, error) { return r.scan(row) })
		if err != nil || len(gone) == 0 {
			return nil, err
		}
		slices.SortFunc(gone, func(a, b *model.Event) int {
			return cmp.Or(cmp.Compare(a.Metadata.Namespace, b.Metadata.Namespace), cmp.Compare(a.Metadata.Name, b.Metadata.Name))
		})
		rvs, err := versions(len(gone))
		if err != nil {
			return nil, err
		}
		changes := make([]change, len(gone))
		for i, ev := range gone {
			if changes[i], err = r.finish(ev, "DELETED").at(rvs[i]); err != nil {
				return nil, err
			}
		}
		deleted = len(gone)
		return changes, nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}
