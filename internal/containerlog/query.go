package containerlog

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Bounds of a log request's numbers.
const (
	MaxTailLines    = 10_000_000
	MaxSinceSeconds = 10 * 365 * 24 * 3600
)

// QueryError is a query parameter a log or exec request cannot take.
type QueryError struct {
	Param, Message string
}

func (e *QueryError) Error() string { return e.Param + ": " + e.Message }

// Query is a log request's parameters, as Kubernetes names them (plus
// smfLines): what the API and the node read from a request's query.
type Query struct {
	Container  string
	Follow     bool
	Previous   bool
	Timestamps bool
	SMFLines   bool
	// TailLines is negative for all.
	TailLines int64
	// SinceSeconds (0: none) or SinceTime (zero: none); not both.
	SinceSeconds int64
	SinceTime    time.Time
}

// ParseQuery reads a log request's query.
func ParseQuery(q url.Values) (Query, error) {
	out := Query{Container: q.Get("container"), TailLines: -1}
	for name, dst := range map[string]*bool{"follow": &out.Follow, "previous": &out.Previous, "timestamps": &out.Timestamps, "smfLines": &out.SMFLines} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Query{}, &QueryError{name, fmt.Sprintf("%q is not true or false", v)}
			}
			*dst = b
		}
	}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > MaxTailLines {
			return Query{}, &QueryError{"tailLines", fmt.Sprintf("%q is not a number of lines between 0 and %d", v, MaxTailLines)}
		}
		out.TailLines = n
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > MaxSinceSeconds {
			return Query{}, &QueryError{"sinceSeconds", fmt.Sprintf("%q is not a number of seconds between 1 and %d", v, MaxSinceSeconds)}
		}
		out.SinceSeconds = n
	}
	if v := q.Get("sinceTime"); v != "" {
		if out.SinceSeconds != 0 {
			return Query{}, &QueryError{"sinceTime", "at most one of sinceSeconds and sinceTime may be given"}
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return Query{}, &QueryError{"sinceTime", fmt.Sprintf("%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", v)}
		}
		out.SinceTime = t
	}
	return out, nil
}

// Values is the query that ParseQuery reads back as q.
func (q Query) Values() url.Values {
	v := url.Values{}
	if q.Container != "" {
		v.Set("container", q.Container)
	}
	for name, b := range map[string]bool{"follow": q.Follow, "previous": q.Previous, "timestamps": q.Timestamps, "smfLines": q.SMFLines} {
		if b {
			v.Set(name, "true")
		}
	}
	if q.TailLines >= 0 {
		v.Set("tailLines", strconv.FormatInt(q.TailLines, 10))
	}
	if q.SinceSeconds > 0 {
		v.Set("sinceSeconds", strconv.FormatInt(q.SinceSeconds, 10))
	}
	if !q.SinceTime.IsZero() {
		v.Set("sinceTime", q.SinceTime.UTC().Format(time.RFC3339))
	}
	return v
}

// Options are the reading options of q at now.
func (q Query) Options(now time.Time) Options {
	o := Options{Previous: q.Previous, TailLines: q.TailLines, Timestamps: q.Timestamps, SMFLines: q.SMFLines, Follow: q.Follow, SinceTime: q.SinceTime}
	if q.SinceSeconds > 0 {
		o.SinceTime = now.Add(-time.Duration(q.SinceSeconds) * time.Second)
	}
	return o
}
