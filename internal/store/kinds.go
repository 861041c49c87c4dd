package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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

// DeleteNamespace removes an empty namespace and its events; one that still
// holds pods is ErrConflict.
func (s *Store) DeleteNamespace(ctx context.Context, name, resourceVersion string) (*model.Namespace, error) {
	return s.Namespaces().DeleteWith(ctx, "", name, resourceVersion, func(tx pgx.Tx, _ *model.Namespace) error {
		var pods int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pods WHERE namespace = $1", name).Scan(&pods); err != nil {
			return err
		}
		if pods > 0 {
			return fmt.Errorf("%w: namespace %q still holds %d pod(s); delete them first", ErrConflict, name, pods)
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
