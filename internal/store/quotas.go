package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
)

var quotaKind = &kindInfo{kind: model.KindResourceQuota, table: "resourcequotas", namespaced: true,
	fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}}

// Quotas is typed access to resource quotas.
func (s *Store) Quotas() Resource[model.ResourceQuota, *model.ResourceQuota] {
	return Resource[model.ResourceQuota, *model.ResourceQuota]{s, quotaKind}
}

// admitQuota refuses, inside a create's transaction, an object that
// would take its namespace past one of its quotas (a *model.QuotaError
// naming object, as `pods "web"`); p is the pod created, if it is one. The namespace's quotas are locked
// FOR UPDATE first, so creates under a quota take turns and two cannot
// both pass its last unit. A namespace without quotas costs one query.
func admitQuota(ctx context.Context, tx pgx.Tx, ns, object string, add model.Usage, p *model.Pod) error {
	quotas, err := namespaceSpecs[model.ResourceQuota](ctx, tx, "resourcequotas", ns, "FOR UPDATE")
	if err != nil || len(quotas) == 0 {
		return err
	}
	used, err := namespaceUsage(ctx, tx, ns)
	if err != nil {
		return err
	}
	for i := range quotas {
		if e := model.CheckQuota(&quotas[i], used, add, p); e != nil {
			e.Object = object
			return e
		}
	}
	return nil
}

// QuotaUsage is what namespace ns holds now, as quotas count it.
func (s *Store) QuotaUsage(ctx context.Context, ns string) (model.Usage, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	return namespaceUsage(ctx, tx, ns)
}

// namespaceUsage sums what a namespace's pods, claims, services and
// secrets count against quotas, as of tx.
func namespaceUsage(ctx context.Context, tx pgx.Tx, ns string) (model.Usage, error) {
	u := model.Usage{}
	rows, err := tx.Query(ctx, "SELECT spec, status FROM pods WHERE namespace = $1 AND phase IS DISTINCT FROM $2 AND phase IS DISTINCT FROM $3", ns, model.PodSucceeded, model.PodFailed)
	if err != nil {
		return nil, err
	}
	if _, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var spec, status []byte
		var p model.Pod
		if err := row.Scan(&spec, &status); err != nil {
			return struct{}{}, err
		}
		if err := json.Unmarshal(spec, &p.Spec); err != nil {
			return struct{}{}, err
		}
		if err := json.Unmarshal(status, &p.Status); err != nil {
			return struct{}{}, err
		}
		u.Add(model.PodUsage(&p))
		return struct{}{}, nil
	}); err != nil {
		return nil, fmt.Errorf("sum the pods of namespace %s: %w", ns, err)
	}
	rows, err = tx.Query(ctx, "SELECT spec FROM persistentvolumeclaims WHERE namespace = $1", ns)
	if err != nil {
		return nil, err
	}
	if _, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var spec []byte
		var c model.PersistentVolumeClaim
		if err := row.Scan(&spec); err != nil {
			return struct{}{}, err
		}
		if err := json.Unmarshal(spec, &c.Spec); err != nil {
			return struct{}{}, err
		}
		u.Add(model.ClaimUsage(&c))
		return struct{}{}, nil
	}); err != nil {
		return nil, fmt.Errorf("sum the claims of namespace %s: %w", ns, err)
	}
	for res, table := range map[string]string{model.QuotaServices: "services", model.QuotaSecrets: "secrets"} {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE namespace = $1", ns).Scan(&n); err != nil {
			return nil, err
		}
		u[res] = n * 1000
	}
	return u, nil
}

// CreateQuota stores a new quota in an existing namespace.
func (s *Store) CreateQuota(ctx context.Context, q *model.ResourceQuota) error {
	return s.Quotas().CreateWith(ctx, q, namespaceExists(ctx, q.Metadata.Namespace))
}

var limitRangeKind = &kindInfo{kind: model.KindLimitRange, table: "limitranges", namespaced: true,
	fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}}

// LimitRanges is typed access to limit ranges.
func (s *Store) LimitRanges() Resource[model.LimitRange, *model.LimitRange] {
	return Resource[model.LimitRange, *model.LimitRange]{s, limitRangeKind}
}

// CreateLimitRange stores a new limit range in an existing namespace.
func (s *Store) CreateLimitRange(ctx context.Context, l *model.LimitRange) error {
	return s.LimitRanges().CreateWith(ctx, l, namespaceExists(ctx, l.Metadata.Namespace))
}

// admitLimits gives a new pod the defaults of its namespace's limit
// ranges and refuses, inside its create's transaction, a pod or a claim
// outside them (a *model.LimitError naming object). It runs before
// admitQuota, which counts the defaults, as Kubernetes' admission does.
func admitLimits(ctx context.Context, tx pgx.Tx, ns, object string, p *model.Pod, c *model.PersistentVolumeClaim) error {
	ranges, err := namespaceSpecs[model.LimitRange](ctx, tx, "limitranges", ns, "")
	if err != nil {
		return err
	}
	for i := range ranges {
		msg := ""
		if p != nil {
			msg = model.ApplyContainerLimits(&ranges[i], p)
		} else if c != nil {
			msg = model.ClaimLimits(&ranges[i], c)
		}
		if msg != "" {
			return &model.LimitError{Object: object, Message: msg}
		}
	}
	return nil
}

// namespaceSpecs reads the name and spec of every object of table in
// namespace ns, in name order, with lock ("FOR UPDATE" or "") appended.
func namespaceSpecs[T any, PT ObjectPtr[T]](ctx context.Context, tx pgx.Tx, table, ns, lock string) ([]T, error) {
	rows, err := tx.Query(ctx, "SELECT name, spec FROM "+table+" WHERE namespace = $1 AND deleted_at IS NULL ORDER BY name "+lock, ns)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) {
		var obj T
		var spec []byte
		if err := row.Scan(&PT(&obj).GetMeta().Name, &spec); err != nil {
			return obj, err
		}
		sp, _ := PT(&obj).Parts()
		return obj, json.Unmarshal(spec, sp)
	})
}
