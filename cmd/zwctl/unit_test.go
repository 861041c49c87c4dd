package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	zw "github.com/zonewright/zonewright/internal/zwclient"
)

func TestProgressLineShowsBytesDoneOfTotalAndTheRate(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		elapsed     time.Duration
		phase, want string
	}{
		{0, 0, 0, "", "[--------------------]  0B  -  Pending"},
		{10 << 20, 40 << 20, 2 * time.Second, "Importing", "[#####---------------]  10.0MiB/40.0MiB  5.0MiB/s  Importing"},
		{40 << 20, 40 << 20, 4 * time.Second, "Ready", "[####################]  40.0MiB/40.0MiB  10.0MiB/s  Ready"},
		{3 << 10, 0, time.Second, "Importing", "[--------------------]  3.0KiB  3.0KiB/s  Importing"},
	} {
		if got := progressLine(c.done, c.total, c.elapsed, c.phase); got != c.want {
			t.Errorf("progressLine(%d, %d) = %q, want %q", c.done, c.total, got, c.want)
		}
	}
}

func deployment(t *testing.T, s string) zw.Object {
	t.Helper()
	var o zw.Object
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestRolloutStatusReadsADeploymentAsKubectlDoes(t *testing.T) {
	for _, c := range []struct {
		d, msg string
		done   bool
		code   int
	}{
		{`{"metadata":{"name":"w","generation":2},"spec":{"replicas":2},"status":{"observedGeneration":1}}`, "Waiting for deployment spec update to be observed...", false, 0},
		{`{"metadata":{"name":"w","generation":1},"spec":{"replicas":3},"status":{"observedGeneration":1,"updatedReplicas":1,"replicas":3}}`,
			`Waiting for deployment "w" rollout to finish: 1 out of 3 new replicas have been updated...`, false, 0},
		{`{"metadata":{"name":"w","generation":1},"spec":{"replicas":2},"status":{"observedGeneration":1,"updatedReplicas":2,"replicas":3,"availableReplicas":2}}`,
			`Waiting for deployment "w" rollout to finish: 1 old replicas are pending termination...`, false, 0},
		{`{"metadata":{"name":"w","generation":1},"spec":{"replicas":2},"status":{"observedGeneration":1,"updatedReplicas":2,"replicas":2,"availableReplicas":1}}`,
			`Waiting for deployment "w" rollout to finish: 1 of 2 updated replicas are available...`, false, 0},
		{`{"metadata":{"name":"w","generation":1},"spec":{},"status":{"observedGeneration":1,"updatedReplicas":1,"replicas":1,"availableReplicas":1}}`,
			`deployment "w" successfully rolled out`, true, 0},
		{`{"metadata":{"name":"w","generation":1},"spec":{"replicas":1},"status":{"observedGeneration":1,
			"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded"}]}}`, `deployment "w" exceeded its progress deadline`, false, 1},
		// autoRevert put the last available revision back: all replicas
		// are up, but not those of the rollout that was watched.
		{`{"metadata":{"name":"w","generation":3},"spec":{"replicas":1},"status":{"observedGeneration":3,"updatedReplicas":1,"replicas":1,"availableReplicas":1,
			"conditions":[{"type":"Progressing","status":"False","reason":"DeploymentRolledBack","message":"pod failed; reverted to revision 1"}]}}`,
			`deployment "w" rolled back: pod failed; reverted to revision 1`, false, 1},
	} {
		msg, done, err := rolloutStatus(deployment(t, c.d))
		code := 0
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if msg != c.msg || done != c.done || code != c.code {
			t.Errorf("%s: %q %v %v; want %q %v exit %d", c.d, msg, done, err, c.msg, c.done, c.code)
		}
	}
}

func TestWaitConditions(t *testing.T) {
	ready := deployment(t, `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
	notReady := deployment(t, `{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`)
	gone := &zw.APIError{Code: 404, Reason: "NotFound", Message: "gone"}
	for _, c := range []struct {
		spec string
		obj  zw.Object
		err  error
		want bool
	}{
		{"condition=Ready", ready, nil, true},
		{"condition=ready", notReady, nil, false},
		{"condition=Ready=False", notReady, nil, true},
		{"condition=Ready", nil, gone, false},
		{"delete", ready, nil, false},
		{"delete", nil, gone, true},
	} {
		check, _, err := waitCondition(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := check(c.obj, c.err); got != c.want || err != nil {
			t.Errorf("--for=%s on %v/%v: %v %v, want %v", c.spec, c.obj, c.err, got, err, c.want)
		}
	}
	for _, bad := range []string{"Ready", "condition=", "jsonpath={.x}"} {
		if _, _, err := waitCondition(bad); err == nil {
			t.Errorf("--for=%s accepted", bad)
		}
	}
}

func TestTypeAndNames(t *testing.T) {
	for _, c := range []struct {
		args  []string
		res   string
		names string
		err   string
	}{
		{[]string{"po"}, "pods", "", ""},
		{[]string{"deploy", "a", "b"}, "deployments", "a,b", ""},
		{[]string{"pod/a", "po/b"}, "pods", "a,b", ""},
		{[]string{"pod/a", "svc/b"}, "", "", "one resource type at a time"},
		{[]string{"pod/a", "b"}, "", "", "mix TYPE/NAME"},
		{[]string{"widgets"}, "", "", `resource type "widgets"`},
		{nil, "", "", "you must say a resource type"},
	} {
		r, names, err := typeAndNames(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want an error with %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || r.Name != c.res || strings.Join(names, ",") != c.names {
			t.Errorf("%v: %s %v %v", c.args, r.Name, names, err)
		}
	}
}

func TestManifestsSplitDocumentsAndUnpackLists(t *testing.T) {
	objs, err := decodeManifests([]byte(`---
kind: Namespace
metadata: {name: a}
---
# only a comment
---
kind: List
items:
- {kind: Pod, metadata: {name: p}}
- {kind: Service, metadata: {name: s}}
`))
	if err != nil || len(objs) != 3 || objs[0]["kind"] != "Namespace" || objs[2]["kind"] != "Service" {
		t.Fatalf("%v %v", objs, err)
	}
	if _, err := decodeManifests([]byte("kind: Pod\nmetadata: {}\n")); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("a nameless object: %v", err)
	}
	if _, err := decodeManifests([]byte("metadata: {name: x}\n")); err == nil || !strings.Contains(err.Error(), "no kind") {
		t.Errorf("a kindless object: %v", err)
	}
	if _, err := decodeManifests([]byte("kind: [\n")); err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Errorf("bad YAML: %v", err)
	}
}

func TestDescribeShowsAnEventSeenSeveralTimesAsKubectlDoes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339) }
	pod := deployment(t, `{"kind":"Pod","metadata":{"name":"web","namespace":"default"}}`)
	events := []zw.Object{
		deployment(t, `{"type":"Warning","reason":"BackOff","message":"restarting","count":5,"source":"zonewright-lifecycle",
			"firstTimestamp":"`+at(10*time.Minute)+`","lastTimestamp":"`+at(3*time.Minute)+`"}`),
		deployment(t, `{"type":"Normal","reason":"Scheduled","message":"assigned","count":1,"source":"zonewright-lifecycle",
			"firstTimestamp":"`+at(12*time.Minute)+`","lastTimestamp":"`+at(12*time.Minute)+`"}`),
	}
	var b strings.Builder
	if err := describe(&b, pod, events, now); err != nil {
		t.Fatal(err)
	}
	want := "Events:\n" +
		"  Type      Reason      Age                From                   Message\n" +
		"  Normal    Scheduled   12m                zonewright-lifecycle   assigned\n" +
		"  Warning   BackOff     3m (x5 over 10m)   zonewright-lifecycle   restarting\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("describe ends:\n%s\nwant the events, oldest first:\n%s", b.String(), want)
	}
}
