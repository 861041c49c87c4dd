package zwprint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	zw "github.com/zonewright/zonewright/internal/zwclient"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }

func obj(t *testing.T, s string) zw.Object {
	t.Helper()
	var o zw.Object
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return o
}

func resource(t *testing.T, name string) zw.Resource {
	t.Helper()
	r, err := zw.LookupResource(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func print(t *testing.T, format, res string, o TableOptions, objs ...zw.Object) string {
	t.Helper()
	var b bytes.Buffer
	p, err := New(format, resource(t, res), &b, o, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Print(objs, len(objs) == 1); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestAgeIsShortLikeKubectls(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 42 * time.Second: "42s", 5 * time.Minute: "5m", 59*time.Minute + 59*time.Second: "59m",
		3 * time.Hour: "3h", 2 * 24 * time.Hour: "2d", 400 * 24 * time.Hour: "1y",
	} {
		if got := Age(d); got != want {
			t.Errorf("Age(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestBytesUseBinaryUnits(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1536: "1.5KiB", 40 << 20: "40.0MiB", 3 << 30: "3.0GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// Every resource's table, the way a user reads it.
func TestEveryResourceHasItsTable(t *testing.T) {
	created := `"creationTimestamp":"` + ago(5*time.Minute) + `"`
	cases := []struct {
		res, object string
		wide        bool
		want        string
	}{
		{"pods", `{"metadata":{"name":"web",` + created + `},"spec":{"containers":[{"name":"a"},{"name":"b"}],"nodeName":"n1"},
			"status":{"phase":"Running","podIP":"127.10.0.2","containerStatuses":[{"ready":true,"restartCount":2},{"ready":false,"restartCount":1}]}}`, false,
			"NAME   READY   STATUS    RESTARTS   AGE\nweb    1/2     Running   3          5m\n"},
		{"pods", `{"metadata":{"name":"web",` + created + `},"spec":{"containers":[{"name":"a"}],"nodeName":"n1"},"status":{"phase":"Running","podIP":"127.10.0.2"}}`, true,
			"NAME   READY   STATUS    RESTARTS   AGE   IP           NODE\nweb    0/1     Running   0          5m    127.10.0.2   n1\n"},
		{"pods", `{"metadata":{"name":"web",` + created + `,"deletionTimestamp":"` + ago(time.Second) + `"},"spec":{"containers":[{}]},"status":{"phase":"Running"}}`, false,
			"NAME   READY   STATUS        RESTARTS   AGE\nweb    0/1     Terminating   0          5m\n"},
		{"pods", `{"metadata":{"name":"web",` + created + `},"spec":{"containers":[{}]},"status":{"phase":"Pending","containerStatuses":[{"state":{"waiting":{"reason":"ImagePulling"}}}]}}`, false,
			"NAME   READY   STATUS         RESTARTS   AGE\nweb    0/1     ImagePulling   0          5m\n"},
		{"nodes", `{"metadata":{"name":"n1",` + created + `},"spec":{"unschedulable":true,"podCIDR":"127.10.0.0/24"},
			"status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"agentVersion":"v1.2","osRelease":"omnios","kernelVersion":"SunOS 5.11"},
			"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}`, true,
			"NAME   STATUS                     AGE   VERSION   INTERNAL-IP   OS-IMAGE   KERNEL-VERSION   POD-CIDR\nn1     Ready,SchedulingDisabled   5m    v1.2      10.0.0.1      omnios     SunOS 5.11       127.10.0.0/24\n"},
		{"nodes", `{"metadata":{"name":"n2",` + created + `},"status":{"conditions":[{"type":"Ready","status":"False"}]}}`, false,
			"NAME   STATUS     AGE   VERSION\nn2     NotReady   5m    <none>\n"},
		{"namespaces", `{"metadata":{"name":"team",` + created + `},"status":{"phase":"Active"}}`, false,
			"NAME   STATUS   AGE\nteam   Active   5m\n"},
		{"images", `{"metadata":{"name":"alpine",` + created + `},"spec":{"kind":"lx-tarball","source":"https://x/a.tgz"},
			"status":{"phase":"Importing","bytesDone":512,"bytesTotal":2048,"nodes":[{"node":"n1","phase":"Ready"}]}}`, true,
			"NAME     KIND         PHASE       PROGRESS   AGE   SIZE   NODES      SOURCE\nalpine   lx-tarball   Importing   25%        5m    0B     n1:Ready   https://x/a.tgz\n"},
		{"images", `{"metadata":{"name":"alpine",` + created + `},"spec":{"kind":"lx-tarball","source":"https://x/a.tgz"},
			"status":{"phase":"Ready","artefactSize":2048,"nodes":[{"node":"n1","phase":"Ready","bytesDone":2048,"bytesTotal":2048},
			{"node":"n2","phase":"Pulling","bytesDone":768,"bytesTotal":2048}]}}`, true,
			"NAME     KIND         PHASE   PROGRESS   AGE   SIZE     NODES                      SOURCE\nalpine   lx-tarball   Ready   -          5m    2.0KiB   n1:Ready,n2:Pulling(37%)   https://x/a.tgz\n"},
		{"services", `{"metadata":{"name":"web",` + created + `},"spec":{"clusterIP":"127.96.0.5","ports":[{"port":80},{"port":53,"protocol":"UDP"}],"selector":{"app":"web"}}}`, true,
			"NAME   TYPE        CLUSTER-IP   PORT(S)         AGE   SELECTOR\nweb    ClusterIP   127.96.0.5   80/TCP,53/UDP   5m    app=web\n"},
		{"secrets", `{"metadata":{"name":"db",` + created + `},"data":{"a":"eA==","b":"eQ=="},"stringData":{"b":"y","c":"z"}}`, false,
			"NAME   TYPE     DATA   AGE\ndb     Opaque   3      5m\n"},
		{"persistentvolumeclaims", `{"metadata":{"name":"data",` + created + `},"spec":{"accessModes":["ReadWriteOnce"]},
			"status":{"phase":"Bound","capacity":{"storage":"1Gi"},"nodeName":"n1"}}`, false,
			"NAME   STATUS   CAPACITY   ACCESS MODES   NODE   AGE\ndata   Bound    1Gi        RWO            n1     5m\n"},
		{"endpoints", `{"metadata":{"name":"web",` + created + `},"subsets":[{"addresses":[{"ip":"127.10.0.2"},{"ip":"127.10.0.3"}],"ports":[{"port":8080}]}]}`, false,
			"NAME   ENDPOINTS                         AGE\nweb    127.10.0.2:8080,127.10.0.3:8080   5m\n"},
		{"tokens", `{"id":"abc","role":"cluster-admin","createdAt":"` + ago(2*time.Hour) + `","expiresAt":"` + now.Add(48*time.Hour).Format(time.RFC3339) + `"}`, false,
			"ID    ROLE            NAMESPACE   EXPIRES   REVOKED   AGE\nabc   cluster-admin   <none>      in 2d     <none>    2h\n"},
		{"deployments", `{"metadata":{"name":"web",` + created + `},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},
			"template":{"spec":{"containers":[{"name":"web","image":"alpine"}]}}},"status":{"readyReplicas":2,"updatedReplicas":3,"availableReplicas":2}}`, true,
			"NAME   READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES   SELECTOR\nweb    2/3     3            2           5m    web          alpine   app=web\n"},
		{"controllerrevisions", `{"metadata":{"name":"web-1",` + created + `,"ownerReferences":[{"kind":"Deployment","name":"web"}]},"revision":4}`, false,
			"NAME    CONTROLLER            REVISION   AGE\nweb-1   deployment.apps/web   4          5m\n"},
		{"jobs", `{"metadata":{"name":"once",` + created + `},"spec":{"completions":2},"status":{"succeeded":2,"startTime":"` + ago(4*time.Minute) +
			`","completionTime":"` + ago(time.Minute) + `","conditions":[{"type":"Complete","status":"True"}]}}`, false,
			"NAME   STATUS     COMPLETIONS   DURATION   AGE\nonce   Complete   2/2           3m         5m\n"},
		{"events", `{"metadata":{"name":"e1",` + created + `},"involvedObject":{"kind":"Pod","name":"web"},"type":"Normal","reason":"Started",
			"message":"Zone running","lastTimestamp":"` + ago(30*time.Second) + `"}`, false,
			"LAST SEEN   TYPE     REASON    OBJECT    MESSAGE\n30s         Normal   Started   pod/web   Zone running\n"},
		{"events", `{"metadata":{"name":"web.1f2e",` + created + `},"involvedObject":{"kind":"Pod","name":"web"},"type":"Warning","reason":"BackOff",
			"message":"restarting","count":5,"firstTimestamp":"` + ago(10*time.Minute) + `","lastTimestamp":"` + ago(3*time.Minute) + `","source":"zonewright-lifecycle"}`, false,
			"LAST SEEN          TYPE      REASON    OBJECT    MESSAGE\n3m (x5 over 10m)   Warning   BackOff   pod/web   restarting\n"},
		{"events", `{"metadata":{"name":"web.1f2e",` + created + `},"involvedObject":{"kind":"Pod","name":"web"},"type":"Warning","reason":"BackOff",
			"message":"restarting","count":5,"firstTimestamp":"` + ago(10*time.Minute) + `","lastTimestamp":"` + ago(3*time.Minute) + `","source":"zonewright-lifecycle"}`, true,
			"LAST SEEN          TYPE      REASON    OBJECT    MESSAGE      SOURCE                 FIRST SEEN   COUNT   NAME\n" +
				"3m (x5 over 10m)   Warning   BackOff   pod/web   restarting   zonewright-lifecycle   10m          5       web.1f2e\n"},
		{"volumesnapshots", `{"metadata":{"name":"snap",` + created + `},"spec":{"source":{"persistentVolumeClaimName":"data"}},"status":{"readyToUse":true,"restoreSize":"1Gi"}}`, false,
			"NAME   READYTOUSE   SOURCEPVC   RESTORESIZE   AGE\nsnap   true         data        1Gi           5m\n"},
	}
	for _, c := range cases {
		format := ""
		if c.wide {
			format = "wide"
		}
		if got := print(t, format, c.res, TableOptions{}, obj(t, c.object)); got != c.want {
			t.Errorf("%s table (wide %v):\n%s\nwant\n%s", c.res, c.wide, got, c.want)
		}
	}
}

func TestAllNamespacesPutsTheNamespaceFirst(t *testing.T) {
	got := print(t, "", "services", TableOptions{WithNamespace: true, ShowLabels: true},
		obj(t, `{"metadata":{"name":"a","namespace":"team","labels":{"x":"1"}},"spec":{}}`),
		obj(t, `{"metadata":{"name":"b","namespace":"default"},"spec":{"clusterIP":"127.96.0.9"}}`))
	want := "NAMESPACE   NAME   TYPE        CLUSTER-IP   PORT(S)   AGE         LABELS\n" +
		"team        a      ClusterIP   <none>       <none>    <unknown>   x=1\n" +
		"default     b      ClusterIP   127.96.0.9   <none>    <unknown>   <none>\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A watch prints one row at a time: the header once, columns that keep
// the width the list gave them.
func TestTableKeepsItsHeaderAndWidthsAcrossCalls(t *testing.T) {
	var b bytes.Buffer
	p, _ := New("", resource(t, "namespaces"), &b, TableOptions{}, func() time.Time { return now })
	_ = p.Print([]zw.Object{obj(t, `{"metadata":{"name":"a-long-name"},"status":{"phase":"Active"}}`)}, false)
	_ = p.Print([]zw.Object{obj(t, `{"metadata":{"name":"b"},"status":{"phase":"Terminating"}}`)}, true)
	want := "NAME          STATUS   AGE\na-long-name   Active   <unknown>\nb             Terminating   <unknown>\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestNoHeaders(t *testing.T) {
	if got := print(t, "", "namespaces", TableOptions{NoHeaders: true}, obj(t, `{"metadata":{"name":"a"}}`)); got != "a      <unknown>\n" {
		t.Errorf("got %q", got)
	}
}

func TestJSONAndYAMLPrintOneObjectBareAndSeveralAsAList(t *testing.T) {
	a, b := obj(t, `{"kind":"Pod","metadata":{"name":"a"}}`), obj(t, `{"kind":"Pod","metadata":{"name":"b"}}`)
	if got := print(t, "json", "pods", TableOptions{}, a); got != "{\n    \"kind\": \"Pod\",\n    \"metadata\": {\n        \"name\": \"a\"\n    }\n}\n" {
		t.Errorf("json of one: %q", got)
	}
	var list zw.Object
	if err := json.Unmarshal([]byte(print(t, "json", "pods", TableOptions{}, a, b)), &list); err != nil || list["kind"] != "List" || len(zw.NestedSlice(list, "items")) != 2 {
		t.Errorf("json of two: %v %v", list, err)
	}
	if got := print(t, "yaml", "pods", TableOptions{}, a); got != "kind: Pod\nmetadata:\n  name: a\n" {
		t.Errorf("yaml of one: %q", got)
	}
	if got := print(t, "yaml", "pods", TableOptions{}, a, b); !strings.HasPrefix(got, "apiVersion: v1\nitems:\n- kind: Pod\n") || !strings.HasSuffix(got, "kind: List\n") {
		t.Errorf("yaml of two: %q", got)
	}
}

func TestNamePrinterSaysTypeSlashName(t *testing.T) {
	if got := print(t, "name", "deploy", TableOptions{}, obj(t, `{"metadata":{"name":"a"}}`), obj(t, `{"metadata":{"name":"b"}}`)); got != "deployment/a\ndeployment/b\n" {
		t.Errorf("got %q", got)
	}
	if got := print(t, "name", "tokens", TableOptions{}, obj(t, `{"id":"x1"}`)); got != "token/x1\n" {
		t.Errorf("tokens are named by id: %q", got)
	}
}

func TestJSONPath(t *testing.T) {
	a := obj(t, `{"metadata":{"name":"a","labels":{"app.kubernetes.io/name":"web"}},"status":{"podIP":"127.10.0.2",
		"conditions":[{"type":"PodScheduled","status":"True"},{"type":"Ready","status":"False"}]}}`)
	b := obj(t, `{"metadata":{"name":"b"},"status":{"podIP":"127.10.0.3","conditions":[{"type":"Ready","status":"True"}]}}`)
	for _, c := range []struct {
		tmpl string
		objs []zw.Object
		want string
	}{
		{"{.metadata.name}", []zw.Object{a}, "a"},
		{"{.items[*].metadata.name}", []zw.Object{a, b}, "a b"},
		{"{.items[1].status.podIP}", []zw.Object{a, b}, "127.10.0.3"},
		{"{.items[-1].metadata.name}", []zw.Object{a, b}, "b"},
		{`{range .items[*]}{.metadata.name}{"\t"}{.status.podIP}{"\n"}{end}`, []zw.Object{a, b}, "a\t127.10.0.2\nb\t127.10.0.3\n"},
		{`{.status.conditions[?(@.type=="Ready")].status}`, []zw.Object{a}, "False"},
		{`{.status.conditions[?(@.type!="Ready")].type}`, []zw.Object{a}, "PodScheduled"},
		{`{.metadata.labels['app.kubernetes.io/name']}`, []zw.Object{a}, "web"},
		{"name={.metadata.name} missing={.spec.nothing}", []zw.Object{a}, "name=a missing="},
		{"{.status.conditions[0]}", []zw.Object{a}, `{"status":"True","type":"PodScheduled"}`},
	} {
		if got := print(t, "jsonpath="+c.tmpl, "pods", TableOptions{}, c.objs...); got != c.want {
			t.Errorf("jsonpath %s = %q, want %q", c.tmpl, got, c.want)
		}
	}
	for _, bad := range []string{"{.a", "{range .items[*]}{.x}", "{end}", "{.a[x]}", "{a.b}"} {
		if _, err := ParseJSONPath(bad); err == nil {
			t.Errorf("jsonpath %q parsed", bad)
		}
	}
}

func TestUnknownOutputFormatIsAnError(t *testing.T) {
	if _, err := New("toml", resource(t, "pods"), &bytes.Buffer{}, TableOptions{}, time.Now); err == nil || !strings.Contains(err.Error(), "toml") {
		t.Errorf("got %v", err)
	}
}
