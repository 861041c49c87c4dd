package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
)

// kindInfo describes how one kind is stored. Table and column names are
// constants from this file, never user input.
type kindInfo struct {
	kind       string
	table      string
	namespaced bool
	// apiVersion is the kind's group version; empty: model.APIVersion.
	apiVersion string
	// fields maps a field selector to the SQL expression that reads it.
	fields map[string]string
	// derived names status fields kept in tables of their own: never
	// stored in the status column, put back by statusRead on every read.
	derived    []string
	statusRead string
}

// statusColumn is the SQL expression reading the kind's status.
func (k *kindInfo) statusColumn() string {
	if k.statusRead != "" {
		return k.statusRead
	}
	return "status"
}

// returnDerived is what a write returns besides its own columns: the
// status as read, for a kind with derived fields (scanDerived scans it).
func (k *kindInfo) returnDerived() string {
	if len(k.derived) == 0 {
		return ""
	}
	return ", " + k.statusColumn()
}

func (k *kindInfo) scanDerived(status *[]byte, dest ...any) []any {
	if len(k.derived) == 0 {
		return dest
	}
	return append(dest, status)
}

// storedStatus is the SQL expression storing the status in param: the
// derived fields are left out.
func (k *kindInfo) storedStatus(param string) string {
	expr := param + "::jsonb"
	for _, f := range k.derived {
		expr = "(" + expr + " - '" + f + "')"
	}
	return expr
}

func (k *kindInfo) version() string {
	if k.apiVersion != "" {
		return k.apiVersion
	}
	return model.APIVersion
}

func (k *kindInfo) nsExpr() string {
	if k.namespaced {
		return "namespace"
	}
	return "''"
}

var (
	namespaceKind = &kindInfo{kind: model.KindNamespace, table: "namespaces",
		fields: map[string]string{"metadata.name": "name", "status.phase": "status ->> 'phase'"}}
	nodeKind = &kindInfo{kind: model.KindNode, table: "nodes",
		fields: map[string]string{"metadata.name": "name", "spec.unschedulable": "spec ->> 'unschedulable'"}}
	podKind = &kindInfo{kind: model.KindPod, table: "pods", namespaced: true,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace",
			"spec.nodeName": "node_name", "status.phase": "phase"}}
	serviceKind = &kindInfo{kind: model.KindService, table: "services", namespaced: true,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace", "spec.clusterIP": "spec ->> 'clusterIP'"}}
	endpointsKind = &kindInfo{kind: model.KindEndpoints, table: "endpoints", namespaced: true,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}}
	claimKind = &kindInfo{kind: model.KindPersistentVolumeClaim, table: "persistentvolumeclaims", namespaced: true,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace",
			"status.phase": "status ->> 'phase'", "status.nodeName": "status ->> 'nodeName'"}}
	snapshotKind = &kindInfo{kind: model.KindVolumeSnapshot, table: "volumesnapshots", namespaced: true, apiVersion: model.APIVersionSnapshot,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace",
			"spec.source.persistentVolumeClaimName": "spec -> 'source' ->> 'persistentVolumeClaimName'"}}
	imageKind = &kindInfo{kind: model.KindImage, table: "images",
		fields:  map[string]string{"metadata.name": "name", "spec.kind": "spec ->> 'kind'", "status.phase": "status ->> 'phase'"},
		derived: []string{"nodes"}, statusRead: "status || " + imageNodesJSON}
	deploymentKind = &kindInfo{kind: model.KindDeployment, table: "deployments", namespaced: true, apiVersion: model.APIVersionApps,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}}
	revisionKind = &kindInfo{kind: model.KindControllerRevision, table: "controllerrevisions", namespaced: true, apiVersion: model.APIVersionApps,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}}
	jobKind = &kindInfo{kind: model.KindJob, table: "jobs", namespaced: true, apiVersion: model.APIVersionBatch,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}}
	eventKind = &kindInfo{kind: model.KindEvent, table: "events", namespaced: true,
		fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace",
			"involvedObject.kind": "spec -> 'involvedObject' ->> 'kind'",
			"involvedObject.name": "spec -> 'involvedObject' ->> 'name'",
			"involvedObject.uid":  "spec -> 'involvedObject' ->> 'uid'",
			"reason":              "spec ->> 'reason'", "type": "spec ->> 'type'"}}
)

// ObjectPtr is a pointer to a model type that the store can persist.
type ObjectPtr[T any] interface {
	*T
	model.Object
}

// Resource is typed access to one kind.
type Resource[T any, PT ObjectPtr[T]] struct {
	s    *Store
	info *kindInfo
}

// Namespaces, Nodes, Pods, Services, Endpoints, Claims, Images,
// Deployments, ControllerRevisions, Jobs and Events give typed access to
// each kind.
func (s *Store) Namespaces() Resource[model.Namespace, *model.Namespace] {
	return Resource[model.Namespace, *model.Namespace]{s, namespaceKind}
}
func (s *Store) Nodes() Resource[model.Node, *model.Node] {
	return Resource[model.Node, *model.Node]{s, nodeKind}
}
func (s *Store) Pods() Resource[model.Pod, *model.Pod] {
	return Resource[model.Pod, *model.Pod]{s, podKind}
}
func (s *Store) Services() Resource[model.Service, *model.Service] {
	return Resource[model.Service, *model.Service]{s, serviceKind}
}
func (s *Store) Endpoints() Resource[model.Endpoints, *model.Endpoints] {
	return Resource[model.Endpoints, *model.Endpoints]{s, endpointsKind}
}
func (s *Store) Claims() Resource[model.PersistentVolumeClaim, *model.PersistentVolumeClaim] {
	return Resource[model.PersistentVolumeClaim, *model.PersistentVolumeClaim]{s, claimKind}
}
func (s *Store) Snapshots() Resource[model.VolumeSnapshot, *model.VolumeSnapshot] {
	return Resource[model.VolumeSnapshot, *model.VolumeSnapshot]{s, snapshotKind}
}
func (s *Store) Images() Resource[model.Image, *model.Image] {
	return Resource[model.Image, *model.Image]{s, imageKind}
}
func (s *Store) Deployments() Resource[model.Deployment, *model.Deployment] {
	return Resource[model.Deployment, *model.Deployment]{s, deploymentKind}
}
func (s *Store) ControllerRevisions() Resource[model.ControllerRevision, *model.ControllerRevision] {
	return Resource[model.ControllerRevision, *model.ControllerRevision]{s, revisionKind}
}
func (s *Store) Jobs() Resource[model.Job, *model.Job] {
	return Resource[model.Job, *model.Job]{s, jobKind}
}
func (s *Store) Events() Resource[model.Event, *model.Event] {
	return Resource[model.Event, *model.Event]{s, eventKind}
}

// FieldSelectors lists the field selectors this kind supports.
func (r Resource[T, PT]) FieldSelectors() map[string]string { return r.info.fields }

// Kind is the kind's name ("Pod").
func (r Resource[T, PT]) Kind() string { return r.info.kind }

const selectColumns = "uid, %s, name, resource_version, labels, annotations, spec, %s, created_at, deleted_at, deletion_grace_seconds, generation, owner_references, managed_fields"

func (r Resource[T, PT]) columns() string {
	return fmt.Sprintf(selectColumns, r.info.nsExpr(), r.info.statusColumn())
}

func (r Resource[T, PT]) scan(row pgx.Row) (PT, error) {
	obj := PT(new(T))
	m := obj.GetMeta()
	var (
		rv                         int64
		labels, annots, spec, stat []byte
		owners, managed            []byte
		created                    time.Time
		deleted                    *time.Time
	)
	if err := row.Scan(&m.UID, &m.Namespace, &m.Name, &rv, &labels, &annots, &spec, &stat, &created, &deleted, &m.DeletionGracePeriodSeconds, &m.Generation, &owners, &managed); err != nil {
		return nil, err
	}
	sp, st := obj.Parts()
	for _, part := range []struct {
		raw []byte
		dst any
	}{{labels, &m.Labels}, {annots, &m.Annotations}, {spec, sp}, {stat, st}, {owners, &m.OwnerReferences}, {managed, &m.ManagedFields}} {
		if err := json.Unmarshal(part.raw, part.dst); err != nil {
			return nil, fmt.Errorf("decode stored %s %s: %w", r.info.kind, m.Name, err)
		}
	}
	m.ResourceVersion = strconv.FormatInt(rv, 10)
	created = created.UTC()
	m.CreationTimestamp = &created
	if deleted != nil {
		d := deleted.UTC()
		m.DeletionTimestamp = &d
	}
	tm := obj.GetTypeMeta()
	tm.APIVersion, tm.Kind = r.info.version(), r.info.kind
	return obj, nil
}

func (r Resource[T, PT]) where(ns, name string, args *[]any) string {
	*args = append(*args, name)
	cond := fmt.Sprintf("name = $%d", len(*args))
	if r.info.namespaced {
		*args = append(*args, ns)
		cond += fmt.Sprintf(" AND namespace = $%d", len(*args))
	}
	return cond
}

// Get reads one object; ns is ignored for cluster-scoped kinds.
func (r Resource[T, PT]) Get(ctx context.Context, ns, name string) (PT, error) {
	var args []any
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s", r.columns(), r.info.table, r.where(ns, name, &args))
	obj, err := r.scan(r.s.pool.QueryRow(ctx, q, args...))
	if err != nil {
		return nil, r.notFound(classify(err), ns, name)
	}
	return obj, nil
}

// GetMany reads the objects named by namespaces[i]/names[i] in one
// query, by "namespace/name" (a cluster-scoped kind's namespaces are
// ignored); one that does not exist is absent.
func (r Resource[T, PT]) GetMany(ctx context.Context, namespaces, names []string) (map[string]PT, error) {
	if !r.info.namespaced {
		namespaces = make([]string, len(names))
	}
	q := fmt.Sprintf(`SELECT %s FROM %s WHERE (%s, name) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, r.columns(), r.info.table, r.info.nsExpr())
	rows, err := r.s.pool.Query(ctx, q, namespaces, names)
	if err != nil {
		return nil, classify(err)
	}
	objs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PT, error) { return r.scan(row) })
	if err != nil {
		return nil, classify(err)
	}
	out := make(map[string]PT, len(objs))
	for _, obj := range objs {
		m := obj.GetMeta()
		out[m.Namespace+"/"+m.Name] = obj
	}
	return out, nil
}

// GetByUID reads the object with uid, in whatever namespace it is.
func (r Resource[T, PT]) GetByUID(ctx context.Context, uid string) (PT, error) {
	if !validUID(uid) {
		return nil, fmt.Errorf("%w: %s with uid %q", ErrNotFound, strings.ToLower(r.info.kind), uid)
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE uid = $1", r.columns(), r.info.table)
	obj, err := r.scan(r.s.pool.QueryRow(ctx, q, uid))
	if err == nil {
		return obj, nil
	}
	if err = classify(err); err == ErrNotFound {
		return nil, fmt.Errorf("%w: %s with uid %q", ErrNotFound, strings.ToLower(r.info.kind), uid)
	}
	return nil, err
}

func (r Resource[T, PT]) notFound(err error, ns, name string) error {
	if err == ErrNotFound {
		if r.info.namespaced {
			return fmt.Errorf("%w: %s %q in namespace %q", ErrNotFound, strings.ToLower(r.info.kind), name, ns)
		}
		return fmt.Errorf("%w: %s %q", ErrNotFound, strings.ToLower(r.info.kind), name)
	}
	return err
}

// ListOptions narrow and page a list.
type ListOptions struct {
	Namespace     string // empty: all namespaces
	LabelSelector string
	FieldSelector string
	Limit         int
	Continue      string
	// AnyVersion serves a list at any version, as Kubernetes does for
	// resourceVersion=0: a reader that does not watch from the list (an
	// agent's periodic node list) need not hold every writer back for a
	// settled version. Its version is one the feed has delivered up to,
	// so a watch from it misses nothing, though it may deliver again a
	// change the rows already hold.
	AnyVersion bool
}

type continueToken struct {
	Namespace string `json:"ns"`
	Name      string `json:"n"`
}

// List returns one page of matching objects, in (namespace, name) order,
// and the resource version the page was read at.
func (r Resource[T, PT]) List(ctx context.Context, o ListOptions) (*model.List[T], error) {
	labels, err := ParseLabelSelector(o.LabelSelector)
	if err != nil {
		return nil, err
	}
	fields, err := ParseFieldSelector(o.FieldSelector, r.info.fields)
	if err != nil {
		return nil, err
	}
	var args []any
	conds := []string{"true"}
	if o.Namespace != "" && r.info.namespaced {
		args = append(args, o.Namespace)
		conds = append(conds, fmt.Sprintf("namespace = $%d", len(args)))
	}
	if c := labels.sql(&args); c != "" {
		conds = append(conds, c)
	}
	if c := fields.sql(r.info.fields, &args); c != "" {
		conds = append(conds, c)
	}
	if o.Continue != "" {
		tok, err := decodeContinue(o.Continue)
		if err != nil {
			return nil, err
		}
		args = append(args, tok.Namespace, tok.Name)
		conds = append(conds, fmt.Sprintf("(%s, name) > ($%d, $%d)", r.info.nsExpr(), len(args)-1, len(args)))
	}
	order := "name"
	if r.info.namespaced {
		order = "namespace, name"
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY %s", r.columns(), r.info.table, strings.Join(conds, " AND "), order)
	if o.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", o.Limit+1)
	}
	list := &model.List[T]{Items: []T{}}
	list.APIVersion, list.Kind = r.info.version(), r.info.kind+"List"
	// One snapshot for the rows and the version, so a watch started from
	// the list's version misses nothing and repeats nothing.
	read := r.s.readSettled
	if o.AnyVersion {
		read = r.s.readAnyVersion
	}
	err = read(ctx, func(tx pgx.Tx, rv int64) error {
		list.Metadata.ResourceVersion = strconv.FormatInt(rv, 10)
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			obj, err := r.scan(rows)
			if err != nil {
				return err
			}
			list.Items = append(list.Items, *obj)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if o.Limit > 0 && len(list.Items) > o.Limit {
		list.Items = list.Items[:o.Limit]
		last := PT(&list.Items[o.Limit-1]).GetMeta()
		list.Metadata.Continue = encodeContinue(continueToken{Namespace: last.Namespace, Name: last.Name})
	}
	return list, nil
}

// all reads every object of the kind in tx, in (namespace, name) order.
func (r Resource[T, PT]) all(ctx context.Context, tx pgx.Tx) ([]T, error) {
	order := "name"
	if r.info.namespaced {
		order = "namespace, name"
	}
	rows, err := tx.Query(ctx, fmt.Sprintf("SELECT %s FROM %s ORDER BY %s", r.columns(), r.info.table, order))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		obj, err := r.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *obj)
	}
	return out, rows.Err()
}

// ListAll is List through every page; o.Limit sizes the pages (0: 500).
func (r Resource[T, PT]) ListAll(ctx context.Context, o ListOptions) ([]T, error) {
	if o.Limit <= 0 {
		o.Limit = 500
	}
	var all []T
	for {
		page, err := r.List(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.Metadata.Continue == "" {
			return all, nil
		}
		o.Continue = page.Metadata.Continue
	}
}

// CheckListOptions refuses (ErrInvalid) the selectors and continue token
// of o that List or Watch would refuse, fields being the kind's field
// selectors, without reading anything: a request can be refused before
// it waits for a resource version.
func CheckListOptions(o ListOptions, fields map[string]string) error {
	if _, err := ParseLabelSelector(o.LabelSelector); err != nil {
		return err
	}
	if _, err := ParseFieldSelector(o.FieldSelector, fields); err != nil {
		return err
	}
	if o.Continue != "" {
		if _, err := decodeContinue(o.Continue); err != nil {
			return err
		}
	}
	return nil
}

func encodeContinue(t continueToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	// A token is the client's text: one that decodes to what PostgreSQL
	// cannot store, or that encoding/json had to repair, is none of ours.
	if err != nil || !StorableText(t.Namespace) || !StorableText(t.Name) || encodeContinue(t) != s {
		return t, fmt.Errorf("%w: continue token %q is not one this server issued", ErrInvalid, s)
	}
	return t, nil
}

// pending is a write whose rows are written, waiting for its resource
// version: the object to record in the change feed and, unless it was
// deleted, the row to stamp with the version.
type pending struct {
	kind, namespace, name, typ string
	obj                        model.Object
	// table and uid name the row that takes the version; table is empty
	// for a deletion.
	table, uid string
}

// stampSQL takes the next resource version under the change lock, held
// shared to commit, stamps the row with it (%s: the stamp, or nothing for
// a deletion), records the change with the version in its object, and
// notifies the feed: one round trip. The version is read from the lock's
// CTE, so the lock is held first: order.go says why every version is
// taken under it.
const stampSQL = `WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared($1)),
	v AS MATERIALIZED (SELECT nextval('resource_version_seq') AS rv FROM lock),%s
	recorded AS (INSERT INTO changes (resource_version, kind, namespace, name, type, object)
		SELECT v.rv, $2, $3, $4, $5, jsonb_set($6::jsonb, '{metadata,resourceVersion}', to_jsonb(v.rv::text)) FROM v)
	SELECT v.rv, pg_notify('` + notifyChannel + `', v.rv::text) FROM v`

// write runs fn, which writes the rows of one change without knowing its
// version, then gives the change the next resource version and records it
// for watchers, in one transaction. The version is taken last, after fn's
// row locks: a write that waits for another one's rows takes its version
// after that one committed, so one object's versions follow its writes.
//
// In a dry run (WithDryRun) fn runs, with every check and constraint, and
// its transaction is rolled back: the object is left as it would be
// stored, with no new version, and nothing is written or announced.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) (pending, error)) error {
	err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		p, err := fn(tx)
		if err != nil {
			return err
		}
		if IsDryRun(ctx) {
			return errDryRun
		}
		return s.stamp(ctx, tx, p)
	})
	if errors.Is(err, errDryRun) {
		return nil
	}
	return err
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run: rolled back")

type dryRunKey struct{}

// WithDryRun marks ctx's writes as a dry run (Kubernetes' dryRun=All): each
// is checked as it would be made, then rolled back.
func WithDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

// IsDryRun reports whether ctx's writes are a dry run.
func IsDryRun(ctx context.Context) bool {
	dry, _ := ctx.Value(dryRunKey{}).(bool)
	return dry
}

// at is p's change at version rv, for writeMany, whose versions are
// taken apart from the rows.
func (p pending) at(rv int64) (change, error) {
	p.obj.GetMeta().ResourceVersion = strconv.FormatInt(rv, 10)
	raw, err := json.Marshal(p.obj)
	return change{ResourceVersion: rv, Kind: p.kind, Namespace: p.namespace, Name: p.name, Type: p.typ, Object: raw}, err
}

// stamp gives p the next resource version in tx and records it; the
// transaction holds the change lock shared from here to its end.
func (s *Store) stamp(ctx context.Context, tx pgx.Tx, p pending) error {
	raw, err := json.Marshal(p.obj)
	if err != nil {
		return err
	}
	stamp, args := "", []any{pglock.Change, p.kind, p.namespace, p.name, p.typ, raw}
	if p.table != "" {
		stamp = fmt.Sprintf("\n\tstamped AS (UPDATE %s SET resource_version = v.rv FROM v WHERE uid = $7),", p.table)
		args = append(args, p.uid)
	}
	var rv int64
	if err := tx.QueryRow(ctx, fmt.Sprintf(stampSQL, stamp), args...).Scan(&rv, nil); err != nil {
		return err
	}
	p.obj.GetMeta().ResourceVersion = strconv.FormatInt(rv, 10)
	return nil
}

// writeMany is write for one statement that changes several objects (a
// bulk delete): fn takes one resource version per object it changed from
// versions, which hands them out fresh and in increasing order, and
// returns one change per version (pending.at), after its row writes. They
// are recorded in one transaction with one notification.
func (s *Store) writeMany(ctx context.Context, fn func(tx pgx.Tx, versions func(n int) ([]int64, error)) ([]change, error)) error {
	return s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// As in stampSQL, the versions are taken under the change lock held
		// shared to commit, after fn's row writes (order.go).
		versions := func(n int) ([]int64, error) {
			var rvs []int64
			err := tx.QueryRow(ctx, `WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared($2))
				SELECT array_agg(v ORDER BY v) FROM
				(SELECT nextval('resource_version_seq') AS v FROM lock, generate_series(1, $1)) taken`, n, pglock.Change).Scan(&rvs)
			if err == nil && len(rvs) != n {
				err = fmt.Errorf("took %d resource versions, want %d", len(rvs), n)
			}
			return rvs, err
		}
		cs, err := fn(tx, versions)
		if err != nil || len(cs) == 0 {
			return err
		}
		cols := struct {
			rv                          []int64
			kind, ns, name, typ, object []string
		}{}
		for _, c := range cs {
			cols.rv = append(cols.rv, c.ResourceVersion)
			cols.kind, cols.ns, cols.name = append(cols.kind, c.Kind), append(cols.ns, c.Namespace), append(cols.name, c.Name)
			cols.typ, cols.object = append(cols.typ, c.Type), append(cols.object, string(c.Object))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO changes (resource_version, kind, namespace, name, type, object)
			SELECT rv, kind, ns, name, typ, object::jsonb FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
			AS c (rv, kind, ns, name, typ, object)`, cols.rv, cols.kind, cols.ns, cols.name, cols.typ, cols.object); err != nil {
			return err
		}
		last := slices.Max(cols.rv)
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, strconv.FormatInt(last, 10))
		return err
	})
}

func (r Resource[T, PT]) docs(obj PT) (labels, annots, spec, status, owners, managed []byte, err error) {
	m := obj.GetMeta()
	fields := m.ManagedFields
	if fields == nil {
		fields = []model.ManagedFieldsEntry{}
	}
	if managed, err = json.Marshal(fields); err != nil {
		return
	}
	sp, st := obj.Parts()
	refs := m.OwnerReferences
	if refs == nil {
		refs = []model.OwnerReference{}
	}
	if owners, err = json.Marshal(refs); err != nil {
		return
	}
	if labels, err = json.Marshal(nonNil(m.Labels)); err != nil {
		return
	}
	if annots, err = json.Marshal(nonNil(m.Annotations)); err != nil {
		return
	}
	if spec, err = json.Marshal(sp); err != nil {
		return
	}
	status, err = json.Marshal(st)
	return
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// finish describes the change fn wrote to obj, for write to version.
func (r Resource[T, PT]) finish(obj PT, typ string) pending {
	m := obj.GetMeta()
	tm := obj.GetTypeMeta()
	tm.APIVersion, tm.Kind = r.info.version(), r.info.kind
	p := pending{kind: r.info.kind, namespace: m.Namespace, name: m.Name, typ: typ, obj: obj}
	if typ != "DELETED" {
		p.table, p.uid = r.info.table, m.UID
	}
	return p
}

// Create stores a new object, filling in its uid, resource version and
// creation time. A name already taken is ErrAlreadyExists.
func (r Resource[T, PT]) Create(ctx context.Context, obj PT) error {
	return r.CreateWith(ctx, obj, nil)
}

// CreateWith is Create with a check run first in the same transaction
// (for example: the namespace exists and is not terminating). The check
// may complete obj (a service's allocated address): it is stored as the
// check leaves it.
func (r Resource[T, PT]) CreateWith(ctx context.Context, obj PT, check func(pgx.Tx) error) error {
	m := obj.GetMeta()
	if !r.info.namespaced {
		m.Namespace = ""
	}
	if m.UID == "" {
		m.UID = newUID()
	}
	return r.s.write(ctx, func(tx pgx.Tx) (pending, error) {
		return r.createRows(ctx, tx, obj, check)
	})
}

// createRows is CreateWith's check and row insert, inside a write.
func (r Resource[T, PT]) createRows(ctx context.Context, tx pgx.Tx, obj PT, check func(pgx.Tx) error) (pending, error) {
	m := obj.GetMeta()
	if check != nil {
		if err := check(tx); err != nil {
			return pending{}, err
		}
	}
	labels, annots, spec, status, owners, managed, err := r.docs(obj)
	if err != nil {
		return pending{}, err
	}
	// The row's version is 0 until write stamps it, in this transaction.
	cols, vals := "uid, name, resource_version, labels, annotations, spec, status, owner_references, managed_fields, generation", "$1, $2, 0, $3, $4, $5, "+r.info.storedStatus("$6")+", $7, $8, 1"
	args := []any{m.UID, m.Name, labels, annots, spec, status, owners, managed}
	if r.info.namespaced {
		cols, vals = cols+", namespace", vals+", $9"
		args = append(args, m.Namespace)
	}
	var (
		created time.Time
		stored  []byte
	)
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT DO NOTHING RETURNING created_at%s", r.info.table, cols, vals, r.info.returnDerived())
	if err := tx.QueryRow(ctx, q, args...).Scan(r.info.scanDerived(&stored, &created)...); err != nil {
		if classify(err) == ErrNotFound {
			return pending{}, fmt.Errorf("%w: %s %q", ErrAlreadyExists, strings.ToLower(r.info.kind), m.Name)
		}
		return pending{}, err
	}
	if err := r.readDerived(obj, stored); err != nil {
		return pending{}, err
	}
	created = created.UTC()
	m.CreationTimestamp = &created
	m.Generation = 1
	return r.finish(obj, "ADDED"), nil
}

// Update replaces the object's labels, annotations, owners, spec and
// status if its resourceVersion is still the stored one; otherwise
// ErrConflict. A changed spec counts one more generation.
func (r Resource[T, PT]) Update(ctx context.Context, obj PT) error {
	return r.s.write(ctx, func(tx pgx.Tx) (pending, error) {
		return r.updateTx(ctx, tx, obj)
	})
}

// UpdateMany is Update for several objects in one transaction, their
// versions taken together: one hold of the change lock for them all
// instead of one each, which under many writers is most of a write's
// wait. An object whose precondition fails, or that is gone, is left
// out, with its error at its index in failed; the others are written.
func (r Resource[T, PT]) UpdateMany(ctx context.Context, objs []PT) (failed []error, err error) {
	failed = make([]error, len(objs))
	err = r.s.writeMany(ctx, func(tx pgx.Tx, versions func(int) ([]int64, error)) ([]change, error) {
		var written []pending
		for i, obj := range objs {
			p, err := r.updateTx(ctx, tx, obj)
			if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
				failed[i] = err // a statement that found no row: the transaction goes on
				continue
			}
			if err != nil {
				return nil, err
			}
			written = append(written, p)
		}
		if len(written) == 0 {
			return nil, nil
		}
		rvs, err := versions(len(written))
		if err != nil {
			return nil, err
		}
		uids := make([]string, len(written))
		changes := make([]change, len(written))
		for i, p := range written {
			uids[i] = p.uid
			if changes[i], err = p.at(rvs[i]); err != nil {
				return nil, err
			}
		}
		_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s t SET resource_version = u.rv FROM unnest($1::uuid[], $2::bigint[]) AS u (uid, rv)
			WHERE t.uid = u.uid`, r.info.table), uids, rvs)
		return changes, err
	})
	return failed, err
}

// updateTx is Update's row write inside a write's transaction. The
// resourceVersion precondition is part of the UPDATE: it holds on the row
// as written, whatever committed since obj was read.
func (r Resource[T, PT]) updateTx(ctx context.Context, tx pgx.Tx, obj PT) (pending, error) {
	m := obj.GetMeta()
	expected, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
	if err != nil {
		return pending{}, fmt.Errorf("%w: metadata.resourceVersion %q is not a resource version", ErrConflict, m.ResourceVersion)
	}
	labels, annots, spec, status, owners, managed, err := r.docs(obj)
	if err != nil {
		return pending{}, err
	}
	args := []any{labels, annots, spec, status, m.DeletionTimestamp, m.DeletionGracePeriodSeconds, expected, owners, managed}
	q := fmt.Sprintf(`UPDATE %s SET labels = $1, annotations = $2, spec = $3, status = %s,
		deleted_at = $5, deletion_grace_seconds = $6, owner_references = $8, managed_fields = $9,
		generation = CASE WHEN spec IS DISTINCT FROM $3::jsonb THEN generation + 1 ELSE generation END
		WHERE %s AND resource_version = $7 RETURNING uid, created_at, generation%s`,
		r.info.table, r.info.storedStatus("$4"), r.where(m.Namespace, m.Name, &args), r.info.returnDerived())
	var (
		created time.Time
		stored  []byte
	)
	if err := tx.QueryRow(ctx, q, args...).Scan(r.info.scanDerived(&stored, &m.UID, &created, &m.Generation)...); err != nil {
		if classify(err) != ErrNotFound {
			return pending{}, err
		}
		// Gone or changed? Asked in this transaction, on the
		// connection it already holds.
		var exists []any
		var one int
		q := fmt.Sprintf("SELECT 1 FROM %s WHERE %s", r.info.table, r.where(m.Namespace, m.Name, &exists))
		if err := tx.QueryRow(ctx, q, exists...).Scan(&one); err != nil {
			return pending{}, r.notFound(classify(err), m.Namespace, m.Name)
		}
		return pending{}, fmt.Errorf("%w: the object has been modified; resourceVersion %s is stale, read it again and retry", ErrConflict, m.ResourceVersion)
	}
	if err := r.readDerived(obj, stored); err != nil {
		return pending{}, err
	}
	created = created.UTC()
	m.CreationTimestamp = &created
	return r.finish(obj, "MODIFIED"), nil
}

// readDerived replaces obj's status with the one written, derived fields
// read from their tables, so the change feed carries the object as a read
// would return it. Kinds without derived fields keep obj as it is.
func (r Resource[T, PT]) readDerived(obj PT, stored []byte) error {
	if len(r.info.derived) == 0 {
		return nil
	}
	_, st := obj.Parts()
	reflect.ValueOf(st).Elem().SetZero()
	if err := json.Unmarshal(stored, st); err != nil {
		return fmt.Errorf("decode stored %s %s: %w", r.info.kind, obj.GetMeta().Name, err)
	}
	return nil
}

// Modify reads an object, lets change edit it and writes it back, reading
// it again when another write got there first. change returns false to
// leave the object as it is. It returns the object as last read or
// written; ErrNotFound when it does not exist (any more).
func (r Resource[T, PT]) Modify(ctx context.Context, ns, name string, change func(PT) bool) (PT, error) {
	for {
		obj, err := r.Get(ctx, ns, name)
		if err != nil || !change(obj) {
			return obj, err
		}
		if err = r.Update(ctx, obj); !errors.Is(err, ErrConflict) {
			return obj, err
		}
		if err := ctx.Err(); err != nil {
			return obj, err
		}
	}
}

// Delete removes an object. A non-empty resourceVersion is a precondition.
// It returns the object as it was, with the version of its deletion.
func (r Resource[T, PT]) Delete(ctx context.Context, ns, name, resourceVersion string) (PT, error) {
	return r.DeleteWith(ctx, ns, name, resourceVersion, nil)
}

// DeleteWith is Delete with a check of the object, run in the same
// transaction with the row locked (for example: a namespace without pods).
func (r Resource[T, PT]) DeleteWith(ctx context.Context, ns, name, resourceVersion string, check func(pgx.Tx, PT) error) (PT, error) {
	var gone PT
	err := r.s.write(ctx, func(tx pgx.Tx) (p pending, err error) {
		gone, p, err = r.deleteRows(ctx, tx, ns, name, resourceVersion, check)
		return p, err
	})
	if err != nil {
		return nil, err
	}
	return gone, nil
}

// deleteRows is DeleteWith's check and row delete, inside a write.
func (r Resource[T, PT]) deleteRows(ctx context.Context, tx pgx.Tx, ns, name, resourceVersion string, check func(pgx.Tx, PT) error) (PT, pending, error) {
	var args []any
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s FOR UPDATE", r.columns(), r.info.table, r.where(ns, name, &args))
	obj, err := r.scan(tx.QueryRow(ctx, q, args...))
	if err != nil {
		return nil, pending{}, r.notFound(classify(err), ns, name)
	}
	if resourceVersion != "" && resourceVersion != obj.GetMeta().ResourceVersion {
		return nil, pending{}, fmt.Errorf("%w: precondition failed: resourceVersion %s is stale (now %s)", ErrConflict, resourceVersion, obj.GetMeta().ResourceVersion)
	}
	if check != nil {
		if err := check(tx, obj); err != nil {
			return nil, pending{}, err
		}
	}
	args = nil
	if _, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", r.info.table, r.where(ns, name, &args)), args...); err != nil {
		return nil, pending{}, err
	}
	return obj, r.finish(obj, "DELETED"), nil
}
