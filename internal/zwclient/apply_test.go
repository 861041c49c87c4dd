package zwclient

import (
	"encoding/json"
	"testing"
)

func decode(t *testing.T, s string) Object {
	t.Helper()
	var o Object
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

const onServer = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","uid":"u1","resourceVersion":"7",
	"generation":1,"creationTimestamp":"2026-01-01T00:00:00Z","labels":{"app":"web"}},
	"spec":{"containers":[{"name":"web","image":"base","resources":{"requests":{"cpu":"500m"}}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30},
	"status":{"phase":"Running"}}`

func TestUnchanged(t *testing.T) {
	have := decode(t, onServer)
	for _, c := range []struct {
		name, want string
		same       bool
	}{
		{"the object as get -o yaml shows it", onServer, true},
		{"a file that leaves defaults out", `{"kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"base"}]}}`, true},
		{"a file that sets a default to its value", `{"kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"restartPolicy":"Always","containers":[{"name":"web","image":"base"}]}}`, true},
		{"another image", `{"kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"other"}]}}`, false},
		{"another label", `{"kind":"Pod","metadata":{"name":"web","labels":{"app":"api"}},"spec":{"containers":[{"name":"web","image":"base"}]}}`, false},
		{"a label removed", `{"kind":"Pod","metadata":{"name":"web","labels":{}},"spec":{"containers":[{"name":"web","image":"base"}]}}`, false},
		{"one more container", `{"kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"web","image":"base"},{"name":"b","image":"base"}]}}`, false},
		{"another grace period", `{"kind":"Pod","metadata":{"name":"web"},"spec":{"terminationGracePeriodSeconds":5,"containers":[{"name":"web","image":"base"}]}}`, false},
		{"a field the server does not have", `{"kind":"Pod","metadata":{"name":"web"},"spec":{"nodeSelector":{"a":"b"},"containers":[{"name":"web","image":"base"}]}}`, false},
		{"an empty field the server leaves out", `{"kind":"Pod","metadata":{"name":"web"},"spec":{"nodeName":"","tolerations":[],"containers":[{"name":"web","image":"base"}]}}`, true},
	} {
		if got := Unchanged(Desired(decode(t, c.want)), have); got != c.same {
			t.Errorf("%s: unchanged %v, want %v", c.name, got, c.same)
		}
	}
}

func TestDesiredDropsStatusAndServerMetadata(t *testing.T) {
	d := Desired(decode(t, onServer))
	if d["status"] != nil {
		t.Error("status kept")
	}
	md := NestedMap(d, "metadata")
	for _, k := range serverMetadata {
		if md[k] != nil {
			t.Errorf("metadata.%s kept", k)
		}
	}
	if md["name"] != "web" || md["namespace"] != "default" || NestedString(d, "metadata", "labels", "app") != "web" {
		t.Errorf("the user's metadata went: %v", md)
	}
	if NestedString(decode(t, onServer), "metadata", "uid") != "u1" {
		t.Error("Desired changed its argument")
	}
}

func TestASecretWrittenWithStringDataComparesWithItsData(t *testing.T) {
	have := decode(t, `{"kind":"Secret","metadata":{"name":"a"},"type":"Opaque","data":{"k":"dg=="}}`)
	if !Unchanged(decode(t, `{"kind":"Secret","metadata":{"name":"a"},"stringData":{"k":"v"}}`), have) {
		t.Error("the same value in stringData is a change")
	}
	if Unchanged(decode(t, `{"kind":"Secret","metadata":{"name":"a"},"stringData":{"k":"w"}}`), have) {
		t.Error("another value in stringData is no change")
	}
}

func TestMergedKeepsWhatTheFileLeavesOut(t *testing.T) {
	have := decode(t, onServer)
	got := Merged(have, Desired(decode(t, `{"kind":"Pod","metadata":{"name":"web","labels":{"tier":"db"}},
		"spec":{"containers":[{"name":"web","image":"other"}]}}`)))
	if NestedString(got, "metadata", "resourceVersion") != "7" || NestedString(got, "metadata", "uid") != "u1" {
		t.Errorf("the server's version went: %v", got["metadata"])
	}
	if l := NestedMap(got, "metadata", "labels"); len(l) != 1 || l["tier"] != "db" {
		t.Errorf("labels %v, want the file's alone", l)
	}
	c := NestedSlice(got, "spec", "containers")
	if len(c) != 1 || NestedString(c[0], "image") != "other" || NestedString(c[0], "resources", "requests", "cpu") != "500m" {
		t.Errorf("containers %v", c)
	}
	if NestedString(got, "spec", "restartPolicy") != "Always" || got["status"] != nil {
		t.Errorf("defaults lost or status kept: %v", got)
	}
}
