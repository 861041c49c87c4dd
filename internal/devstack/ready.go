package devstack

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/zonewright/zonewright/internal/retry"
)

// startRetry asks again until the start's context ends, each call bounded
// to a few seconds so a hung call does not eat the whole start budget.
var startRetry = retry.Policy{Pause: retryInterval, CallTimeout: 5 * time.Second}

// retryInterval paces the readiness polls; the server is usually ready at the
// first or second try.
const retryInterval = 100 * time.Millisecond

// namespaceCacheRefresh is the server's default
// system.namespaceCacheRefreshInterval: how long a service may keep using a
// namespace (and its search attributes) as it was before a change.
const namespaceCacheRefresh = 2 * time.Second

// NamespaceRetention is how long a namespace registered on PostgreSQL
// keeps a closed workflow's history: long enough to look at what
// happened over a weekend.
const NamespaceRetention = 72 * time.Hour

// waitReady returns once the frontend answers, the namespace is served and
// the search attributes are registered and accepted in list queries.
func (t *Temporal) waitReady(ctx context.Context, attrs map[string]enumspb.IndexedValueType, logger *slog.Logger) error {
	c, err := t.dial(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()

	if t.register {
		err = retry.Do(ctx, startRetry, func(ctx context.Context) error {
			_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
				Namespace: t.namespace, WorkflowExecutionRetentionPeriod: durationpb.New(NamespaceRetention)})
			if _, exists := err.(*serviceerror.NamespaceAlreadyExists); exists {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("register namespace %s: %w", t.namespace, err)
		}
	}
	err = retry.Do(ctx, startRetry, func(ctx context.Context) error {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: t.namespace})
		return err
	})
	if err != nil {
		return fmt.Errorf("wait for namespace %s: %w", t.namespace, err)
	}
	if len(attrs) == 0 {
		return nil
	}

	added, err := ensureSearchAttributes(ctx, c.OperatorService(), t.namespace, attrs)
	if err != nil {
		return err
	}
	// Queries are checked against the frontend's namespace cache; once it
	// accepts all attributes the database has them.
	query := probeQuery(attrs)
	err = retry.Do(ctx, startRetry, func(ctx context.Context) error {
		_, err := c.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: t.namespace,
			Query:     query,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("wait for search attributes of %s: %w", t.namespace, err)
	}
	if added {
		// History (which validates upserts) has its own namespace cache; give
		// it one refresh interval to see what the frontend sees.
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for search attributes of %s: %w", t.namespace, ctx.Err())
		case <-time.After(namespaceCacheRefresh + 500*time.Millisecond):
		}
	}
	return nil
}

func (t *Temporal) dial(ctx context.Context, logger *slog.Logger) (client.Client, error) {
	var c client.Client
	err := retry.Do(ctx, startRetry, func(ctx context.Context) error {
		var err error
		c, err = client.DialContext(ctx, systemClientOptions(t.address, t.namespace, t.systemTLS, logger))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial frontend: %w", err)
	}
	return c, nil
}

// systemClientOptions are those of the server's own admin client.
func systemClientOptions(address, namespace string, tlsConf *tls.Config, logger *slog.Logger) client.Options {
	return client.Options{
		HostPort:          address,
		Namespace:         namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: tlsConf},
		Logger:            sdklog.NewStructuredLogger(slog.New(levelHandler{Handler: logger.Handler(), level: slog.LevelWarn})),
	}
}

// ensureSearchAttributes registers the attributes of attrs that the namespace
// lacks and reports whether it added any. AddSearchAttributes is itself
// idempotent on SQL visibility, but it silently keeps an existing attribute
// of another type; that case is an error here.
func ensureSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, attrs map[string]enumspb.IndexedValueType) (bool, error) {
	var existing map[string]enumspb.IndexedValueType
	err := retry.Do(ctx, startRetry, func(ctx context.Context) error {
		resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if err != nil {
			return err
		}
		existing = resp.GetCustomAttributes()
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("list search attributes of %s: %w", namespace, err)
	}

	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		want := attrs[name]
		have, ok := existing[name]
		switch {
		case !ok:
			missing[name] = want
		case have != want:
			return false, fmt.Errorf("search attribute %s of %s is %s, want %s", name, namespace, have, want)
		}
	}
	if len(missing) == 0 {
		return false, nil
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	})
	if err != nil {
		return false, fmt.Errorf("add search attributes %v to %s: %w", slices.Sorted(maps.Keys(missing)), namespace, err)
	}
	return true, nil
}

// probeQuery is a list query that names every attribute, so the frontend
// rejects it until it knows them all.
func probeQuery(attrs map[string]enumspb.IndexedValueType) string {
	var terms []string
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		var literal string
		switch attrs[name] {
		case enumspb.INDEXED_VALUE_TYPE_INT, enumspb.INDEXED_VALUE_TYPE_DOUBLE:
			literal = "0"
		case enumspb.INDEXED_VALUE_TYPE_BOOL:
			literal = "false"
		case enumspb.INDEXED_VALUE_TYPE_DATETIME:
			literal = "'2000-01-01T00:00:00Z'"
		default:
			literal = "'devstack-probe'"
		}
		terms = append(terms, fmt.Sprintf("%s = %s", name, literal))
	}
	return strings.Join(terms, " AND ")
}
