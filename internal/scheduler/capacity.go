package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
)

// ReasonCapacityExceeded is the reason of a pending pod that waits for a
// slot of the cluster-wide capacity map.
const ReasonCapacityExceeded = "CapacityExceeded"

// CapacityLimit bounds how many pods carrying a label, or naming an
// image, run at once across the cluster (the seed CI orchestrator's
// per-label capacity).
type CapacityLimit struct {
	// Key is a label key, or "image" for a container's image.
	Key, Value string
	Max        int
}

func (l CapacityLimit) String() string { return fmt.Sprintf("%s=%s:%d", l.Key, l.Value, l.Max) }

// Capacity is the cluster-wide capacity map.
type Capacity []CapacityLimit

// ParseCapacity reads a capacity map: comma-separated key=value:max, where
// key "image" means a container's image (its catalog name) and any other
// key a pod label; e.g. image=omnios-r151054:4,size=large:2.
func ParseCapacity(s string) (Capacity, error) {
	var out Capacity
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndex(part, ":")
		if i < 0 {
			return nil, fmt.Errorf("capacity %q: want key=value:max (e.g. size=large:2)", part)
		}
		key, value, hasValue := strings.Cut(part[:i], "=")
		n, err := strconv.Atoi(part[i+1:])
		if !hasValue || key == "" || value == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("capacity %q: want key=value:max (e.g. size=large:2)", part)
		}
		out = append(out, CapacityLimit{Key: key, Value: value, Max: n})
	}
	return out, nil
}

// limits reports whether a limit of the map applies to pod.
func (c Capacity) limits(p *model.Pod) bool {
	return slices.ContainsFunc(c, func(l CapacityLimit) bool { return l.matches(p) })
}

// matches reports whether pod carries the limit's label or image.
func (l CapacityLimit) matches(p *model.Pod) bool {
	if l.Key == "image" {
		return slices.ContainsFunc(p.Spec.Containers, func(c model.Container) bool { return c.Image == l.Value })
	}
	return p.Metadata.Labels[l.Key] == l.Value
}

// sqlMatch is the limit as a condition on the pods table.
func (l CapacityLimit) sqlMatch(args *[]any) string {
	if l.Key == "image" {
		b, _ := json.Marshal([]map[string]string{{"image": l.Value}})
		*args = append(*args, string(b))
		return fmt.Sprintf("spec -> 'containers' @> $%d::jsonb", len(*args))
	}
	b, _ := json.Marshal(map[string]string{l.Key: l.Value})
	*args = append(*args, string(b))
	return fmt.Sprintf("labels @> $%d::jsonb", len(*args))
}

// full says why pod must wait, or "" when every limit it falls under has
// a slot for it. A slot goes to the oldest waiting pod first: pods that
// wait for the same limit and were created before pod count as holding
// theirs, so a newer pod never overtakes them.
func (c Capacity) full(ctx context.Context, conn *pgx.Conn, p *model.Pod) (string, error) {
	created := time.Now()
	if t := p.Metadata.CreationTimestamp; t != nil {
		created = *t
	}
	for _, l := range c {
		if !l.matches(p) {
			continue
		}
		args := []any{p.Metadata.UID, created}
		match := l.sqlMatch(&args)
		var running, older int
		err := conn.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE node_name IS NOT NULL AND coalesce(phase, '') NOT IN ('Succeeded', 'Failed')),
			count(*) FILTER (WHERE node_name IS NULL AND deleted_at IS NULL AND created_at < $2 AND status ->> 'reason' = '`+ReasonCapacityExceeded+`')
			FROM pods WHERE uid <> $1 AND `+match, args...).Scan(&running, &older)
		if err != nil {
			return "", err
		}
		if running+older >= l.Max {
			return fmt.Sprintf("0/%d slots of capacity %s free (%d running, %d waiting before this pod)", l.Max-min(running, l.Max), l, running, older), nil
		}
	}
	return "", nil
}
