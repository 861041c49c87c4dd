package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/syncbuf"
)

// Drain runs alone (not in parallel): it moves every pod off its node.
func TestDrainReturnsOnlyWhenTheNodeHasNoPods(t *testing.T) {
	namespace(t, "drain")
	apply(t, deploymentYAML("web", 3, "", ""), "-n", "drain")
	must(t, "rollout", "status", "deploy/web", "-n", "drain", "--timeout=60s")
	node := strings.TrimSpace(must(t, "get", "pods", "-n", "drain", "-o", "jsonpath={.items[0].spec.nodeName}"))
	if node == "" {
		t.Fatal("the pod has no node")
	}
	out := must(t, "drain", node, "--timeout=60s")
	if !strings.HasPrefix(out, "node/"+node+" cordoned\n") || !strings.Contains(out, "evicting pod drain/web-") || !strings.HasSuffix(out, "node/"+node+" drained\n") {
		t.Errorf("drain said:\n%s", out)
	}
	if left := must(t, "get", "pods", "-A", "--field-selector", "spec.nodeName="+node, "-o", "name"); left != "" {
		t.Errorf("pods left on %s after drain returned: %s", node, left)
	}
	if got := must(t, "get", "node", node); !strings.Contains(got, "Ready,SchedulingDisabled") {
		t.Errorf("drained node:\n%s", got)
	}
	if got := must(t, "uncordon", "node/"+node); got != "node/"+node+" uncordoned\n" {
		t.Errorf("uncordon said %q", got)
	}
	must(t, "cordon", node)
	if got := must(t, "get", "node", node, "-o", "jsonpath={.spec.unschedulable}"); got != "true" {
		t.Errorf("cordoned node: unschedulable %q", got)
	}
	must(t, "uncordon", node)
	must(t, "delete", "deploy", "web", "-n", "drain", "--wait=false")
}

func TestApplyTwiceIsUnchangedAndGetYAMLAppliesAsIs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"0-ns.yaml":     "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: roundtrip\n",
		"deploy.yaml":   strings.ReplaceAll(deploymentYAML("web", 2, "", ""), "name: web\n", "name: web\n  namespace: roundtrip\n"),
		"service.yaml":  "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: roundtrip\nspec:\n  selector: {app: web}\n  ports:\n  - port: 80\n",
		"two-docs.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n  namespace: roundtrip\nstringData: {k: v}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: roundtrip\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 1Gi}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first := must(t, "apply", "-f", dir)
	for _, want := range []string{"namespace/roundtrip created", "deployment/web created", "service/web created", "secret/a created", "persistentvolumeclaim/data created"} {
		if !strings.Contains(first, want+"\n") {
			t.Errorf("first apply did not say %q:\n%s", want, first)
		}
	}
	rollout := must(t, "rollout", "status", "deploy/web", "-n", "roundtrip", "--timeout=60s")
	if !strings.HasSuffix(rollout, "deployment \"web\" successfully rolled out\n") {
		t.Errorf("rollout status said:\n%s", rollout)
	}
	second := zwctl(t, "apply", "-f", dir)
	if second.code != 0 || strings.Count(second.out, " unchanged\n") != 5 || strings.Contains(second.out, "configured") {
		t.Errorf("second apply of the same directory: %s", second)
	}

	f := filepath.Join(t.TempDir(), "web.yaml")
	before := must(t, "get", "deploy", "web", "-n", "roundtrip", "-o", "yaml")
	if err := os.WriteFile(f, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := must(t, "apply", "-f", f); got != "deployment/web unchanged\n" {
		t.Errorf("applying get -o yaml said %q", got)
	}
	version := func() string {
		return must(t, "get", "deploy", "web", "-n", "roundtrip", "-o", "jsonpath={.metadata.generation} {.metadata.resourceVersion}")
	}
	v0 := version()
	must(t, "apply", "-f", f)
	if v1 := version(); v1 != v0 {
		t.Errorf("an unchanged apply wrote: generation and resourceVersion %s, then %s", v0, v1)
	}

	// A change is written, and said so.
	changed := strings.Replace(before, "replicas: 2", "replicas: 3", 1)
	if got := zwctlWith(t, changed, nil, "apply", "-f", "-"); got.code != 0 || got.out != "deployment/web configured\n" {
		t.Errorf("applying a change: %s", got)
	}
	if got := must(t, "get", "deploy", "web", "-n", "roundtrip", "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Errorf("replicas after apply: %s", got)
	}
	if got := must(t, "scale", "deploy/web", "--replicas=1", "-n", "roundtrip"); got != "deployment.apps/web scaled\n" {
		t.Errorf("scale said %q", got)
	}
	must(t, "rollout", "status", "deploy/web", "-n", "roundtrip", "--timeout=60s")
	eventually(t, "one pod after scale to 1", func() bool {
		return strings.Count(must(t, "get", "pods", "-n", "roundtrip", "-l", "app=web", "-o", "name"), "\n") == 1
	})
	must(t, "rollout", "restart", "deploy/web", "-n", "roundtrip")
	must(t, "rollout", "status", "deploy/web", "-n", "roundtrip", "--timeout=60s")
	history := must(t, "rollout", "history", "deploy/web", "-n", "roundtrip")
	if !regexp.MustCompile(`(?m)^REVISION +IMAGES +CHANGE-CAUSE\n1 +base +<none>\n2 +base +<none>\n$`).MatchString(strings.TrimPrefix(history, "deployment.apps/web\n")) {
		t.Errorf("history:\n%s", history)
	}
	if got := must(t, "rollout", "undo", "deploy/web", "-n", "roundtrip", "--to-revision=1"); got != "deployment.apps/web rolled back\n" {
		t.Errorf("undo said %q", got)
	}
	must(t, "rollout", "pause", "deploy/web", "-n", "roundtrip")
	if got := must(t, "get", "deploy", "web", "-n", "roundtrip", "-o", "jsonpath={.spec.paused}"); got != "true" {
		t.Errorf("paused: %q", got)
	}
	must(t, "rollout", "resume", "deploy/web", "-n", "roundtrip")
	must(t, "rollout", "status", "deploy/web", "-n", "roundtrip", "--timeout=60s")

	// Tables of what the directory made.
	if got := must(t, "get", "svc,deploy", "-n", "roundtrip"); !regexp.MustCompile(`(?s)NAME +TYPE +CLUSTER-IP +PORT\(S\) +AGE\nweb +ClusterIP +\d+\.\d+\.\d+\.\d+ +80/TCP .*\n\nNAME +READY +UP-TO-DATE +AVAILABLE +AGE\nweb +1/1 +1 +1 `).MatchString(got) {
		t.Errorf("get svc,deploy:\n%s", got)
	}
	eventually(t, "the service's endpoints", func() bool {
		return regexp.MustCompile(`\nweb +\d+\.\d+\.\d+\.\d+:80 `).MatchString(must(t, "get", "ep", "-n", "roundtrip"))
	})
	if got := must(t, "get", "pvc,secrets,controllerrevisions", "-n", "roundtrip"); !strings.Contains(got, "data ") || !regexp.MustCompile(`\na +Opaque +1 `).MatchString(got) ||
		!strings.Contains(got, "deployment.apps/web") {
		t.Errorf("get pvc,secrets,controllerrevisions:\n%s", got)
	}
}

// proxy forwards TCP connections to the API and can cut them all, and
// refuse new ones for a while: a dropped connection, seen from zwctl.
type proxy struct {
	l       net.Listener
	mu      sync.Mutex
	conns   []net.Conn
	refused bool
	// served counts the connections forwarded.
	served int
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l}
	t.Cleanup(func() { l.Close(); p.cut(false) })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			refused := p.refused
			p.mu.Unlock()
			if refused {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.served++
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// cut closes every open connection; refuse says whether new ones are
// turned away until the next cut(false).
func (p *proxy) cut(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.refused = nil, refuse
}

// Two watches of the same pods, one straight to the API and one through a
// proxy that cuts its connection three times, print the same lines: the
// cut one resumes from the last version it saw, neither losing nor
// repeating a change.
func TestGetWatchResumesAfterTheConnectionIsCut(t *testing.T) {
	t.Parallel()
	namespace(t, "watch")
	apply(t, podYAML("first", nil, ""), "-n", "watch")
	must(t, "wait", "pod/first", "-n", "watch", "--for=condition=Ready", "--timeout=60s")
	p := startProxy(t, stack.api)
	var direct, cut syncbuf.Buffer
	stopDirect := background(t, &direct, "get", "pods", "-n", "watch", "-w")
	stopCut := background(t, &cut, "get", "pods", "-n", "watch", "-w", "--server", "https://"+p.l.Addr().String())
	eventually(t, "both watches list the first pod", func() bool {
		return strings.Contains(direct.String(), "first") && strings.Contains(cut.String(), "first")
	})
	// The list comes first; a change of the pod meanwhile may follow it.
	if !regexp.MustCompile(`^NAME +READY +STATUS +RESTARTS +AGE\nfirst +1/1 +Running +0 +\S+\n`).MatchString(cut.String()) {
		t.Errorf("the watch's list:\n%s", cut.String())
	}

	// Cut, and make changes while the watch is away.
	p.cut(true)
	apply(t, podYAML("second", map[string]string{"app": "one"}, ""), "-n", "watch")
	must(t, "wait", "pod/second", "-n", "watch", "--for=condition=Ready", "--timeout=60s")
	p.cut(false)
	eventually(t, "the cut watch catches up", func() bool { return strings.Contains(cut.String(), "second") })
	p.cut(false)
	must(t, "delete", "pod", "first", "-n", "watch", "--grace-period=0")
	p.cut(false)
	apply(t, podYAML("second", map[string]string{"app": "two"}, ""), "-n", "watch")
	eventually(t, "both watches saw the same changes", func() bool {
		d := withoutAges(direct.String())
		return d == withoutAges(cut.String()) && regexp.MustCompile(`\nsecond +1/1 +Running .*\n$`).MatchString(d) && strings.Contains(d, "\nfirst ") &&
			strings.Count(d, "\nsecond ") > 3
	})
	time.Sleep(300 * time.Millisecond)
	stopDirect()
	stopCut()
	if d, c := withoutAges(direct.String()), withoutAges(cut.String()); d != c {
		t.Errorf("the cut watch differs from the direct one:\n%s\nvs\n%s", c, d)
	}
	p.mu.Lock()
	served := p.served
	p.mu.Unlock()
	if served < 4 {
		t.Errorf("the cut watch connected %d times; the cuts did not happen", served)
	}
	lines := strings.Split(strings.TrimSpace(cut.String()), "\n")
	if !strings.HasPrefix(lines[len(lines)-1], "second ") || !regexp.MustCompile(`(?m)^first +\S+ +Terminating `).MatchString(cut.String()) {
		t.Errorf("the watch missed changes:\n%s", cut.String())
	}

	// --watch-only leaves the list out.
	var only syncbuf.Buffer
	stopOnly := background(t, &only, "get", "pods", "-n", "watch", "--watch-only")
	time.Sleep(500 * time.Millisecond)
	if only.String() != "" {
		t.Errorf("--watch-only printed the list: %q", only.String())
	}
	must(t, "delete", "pod", "second", "-n", "watch", "--grace-period=0")
	eventually(t, "--watch-only prints the change", func() bool { return strings.Contains(only.String(), "second ") })
	stopOnly()
	if !strings.HasPrefix(only.String(), "NAME ") {
		t.Errorf("--watch-only without its header: %q", only.String())
	}
}

// withoutAges masks the ages in a watch's rows: a watch that reconnects
// prints the same change a second later, so its AGE may differ.
func withoutAges(s string) string { return ageColumn.ReplaceAllString(s, "<age>") }

var ageColumn = regexp.MustCompile(`\b(\d+[smhd])+\b`)

func TestRolloutStatusFailsOnTheProgressDeadline(t *testing.T) {
	t.Parallel()
	namespace(t, "deadline")
	never := `
        readinessProbe:
          exec:
            command: ["/bin/false"]
          periodSeconds: 1`
	apply(t, deploymentYAML("stuck", 1, "\n  progressDeadlineSeconds: 2", never), "-n", "deadline")
	r := zwctl(t, "rollout", "status", "deploy/stuck", "-n", "deadline", "--timeout=60s")
	if r.code != 1 || !strings.Contains(r.err, `error: deployment "stuck" exceeded its progress deadline`) ||
		!strings.Contains(r.out, `Waiting for deployment "stuck" rollout to finish: 0 of 1 updated replicas are available...`) {
		t.Errorf("rollout status of a stuck deployment: %s", r)
	}
	// wait gives up at its timeout.
	pod := strings.TrimSpace(must(t, "get", "pods", "-n", "deadline", "-o", "jsonpath={.items[0].metadata.name}"))
	r = zwctl(t, "wait", "pod/"+pod, "-n", "deadline", "--for=condition=Ready", "--timeout=1s")
	if r.code != 1 || r.err != "error: timed out waiting for the condition on pods/"+pod+"\n" {
		t.Errorf("wait of a pod that never gets ready: %s", r)
	}
}

func TestImageImportShowsItsProgress(t *testing.T) {
	t.Parallel()
	data := make([]byte, 6<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	// A tarball of one file is a valid lx-tarball.
	path := filepath.Join(stack.dataDir, "image-sources", "progress.tar")
	if err := os.WriteFile(path, tarOf(t, "root/blob", data), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	sum := sha256.Sum256(b)
	out := must(t, "image", "import", "progress", "--source", "file://"+path, "--sha256", hex.EncodeToString(sum[:]), "--timeout=60s")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "image/progress created" || lines[len(lines)-1] != "image/progress imported" {
		t.Errorf("import said:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^\[#{20}\]  6\.0MiB/6\.0MiB  \S+/s  Ready$`).MatchString(out) {
		t.Errorf("no finished progress bar (bytes done/total, rate):\n%s", out)
	}
	if got := must(t, "image", "list"); !regexp.MustCompile(`\nprogress +lx-tarball +Ready +100% `).MatchString(got) {
		t.Errorf("image list:\n%s", got)
	}
	if got := must(t, "image", "delete", "progress"); got != "image \"progress\" deleted\n" {
		t.Errorf("image delete said %q", got)
	}
	r := zwctl(t, "image", "import", "nosum", "--source", "file://"+path)
	if r.code != 1 || !strings.HasPrefix(r.err, "Error from server (Invalid): ") || !strings.Contains(r.err, "spec.sha256") {
		t.Errorf("import without a digest: %s", r)
	}
}

func TestDeleteBySelectorWaitsUntilThePodsAreGone(t *testing.T) {
	t.Parallel()
	namespace(t, "delsel")
	apply(t, podYAML("a", map[string]string{"tier": "web"}, "")+"---\n"+podYAML("b", map[string]string{"tier": "web"}, "")+"---\n"+podYAML("c", map[string]string{"tier": "db"}, ""), "-n", "delsel")
	must(t, "wait", "pod/a", "pod/b", "pod/c", "-n", "delsel", "--for=condition=Ready", "--timeout=60s")
	if got := must(t, "delete", "pods", "-l", "tier=web", "-n", "delsel", "--grace-period=1"); got != "pod \"a\" deleted\npod \"b\" deleted\n" {
		t.Errorf("delete -l said %q", got)
	}
	// delete returned after the pods went.
	if got := must(t, "get", "pods", "-n", "delsel", "-o", "name"); got != "pod/c\n" {
		t.Errorf("pods after delete -l: %q", got)
	}
	r := zwctl(t, "delete", "pod", "a", "-n", "delsel")
	if r.code != 1 || !strings.HasPrefix(r.err, "Error from server (NotFound): ") {
		t.Errorf("deleting a pod that is gone: %s", r)
	}
	if r := zwctl(t, "delete", "pod", "a", "-n", "delsel", "--ignore-not-found"); r.code != 0 {
		t.Errorf("--ignore-not-found: %s", r)
	}
	f := filepath.Join(t.TempDir(), "c.yaml")
	_ = os.WriteFile(f, []byte(podYAML("c", nil, "")), 0o600)
	if got := must(t, "delete", "-f", f, "-n", "delsel", "--force"); got != "pod \"c\" deleted\n" {
		t.Errorf("delete -f said %q", got)
	}
	must(t, "wait", "pod/c", "-n", "delsel", "--for=delete", "--timeout=5s")
}

func TestDescribeShowsTheObjectAndItsEvents(t *testing.T) {
	t.Parallel()
	namespace(t, "describe")
	apply(t, podYAML("web", map[string]string{"app": "web"}, ""), "-n", "describe")
	must(t, "wait", "pod/web", "-n", "describe", "--for=condition=Ready", "--timeout=60s")
	out := must(t, "describe", "pod", "web", "-n", "describe")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`^Name: +web\nNamespace: +describe\nKind: +Pod\nLabels: +app=web\n`),
		regexp.MustCompile(`\nSpec:\n  containers:\n  - command:\n`),
		regexp.MustCompile(`\nStatus:\n(  .*\n)*  phase: Running\n`),
		regexp.MustCompile(`\nConditions:\n +Type +Status +Reason +Age +Message\n`),
		regexp.MustCompile(`\n  Ready +True `),
		regexp.MustCompile(`\nEvents:\n +Type +Reason +Age +From +Message\n +Normal +Scheduled +\S+ +\S+ +Successfully assigned describe/web to node-\d\n`),
	} {
		if !want.MatchString(out) {
			t.Errorf("describe does not match %s:\n%s", want, out)
		}
	}
	if got := must(t, "describe", "node", "node-1"); !strings.Contains(got, "Name:         node-1\n") || !strings.Contains(got, "Events:") {
		t.Errorf("describe node:\n%s", got)
	}
	r := zwctl(t, "get", "pod", "nope", "-n", "describe")
	if r.code != 1 || r.out != "" || !regexp.MustCompile(`^Error from server \(NotFound\): [^\n]*nope[^\n]*\n$`).MatchString(r.err) {
		t.Errorf("get of a missing pod: %s", r)
	}
	r = zwctl(t, "get", "widgets")
	if r.code != 1 || r.err != "error: the server doesn't have a resource type \"widgets\"\n" {
		t.Errorf("get of an unknown type: %s", r)
	}
	r = zwctlWith(t, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: Bad_Name\nspec:\n  containers: []\n", nil, "apply", "-f", "-", "-n", "describe")
	if r.code != 1 || !strings.HasPrefix(r.err, "Error from server (Invalid): ") || !strings.Contains(r.err, "metadata.name") || strings.Count(r.err, "\n") != 1 {
		t.Errorf("applying an invalid pod: %s", r)
	}
	if got := must(t, "get", "pods", "-A", "-o", "wide", "--field-selector", "metadata.namespace=describe"); !regexp.MustCompile(`^NAMESPACE +NAME +READY +STATUS +RESTARTS +AGE +IP +NODE\ndescribe +web +1/1 +Running +0 +\S+ +\d+\.\d+\.\d+\.\d+ +node-\d\n$`).MatchString(got) {
		t.Errorf("get pods -A -o wide:\n%s", got)
	}
	if got := must(t, "get", "events", "-n", "describe"); !regexp.MustCompile(`^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE\n`).MatchString(got) || !strings.Contains(got, "pod/web") {
		t.Errorf("get events:\n%s", got)
	}

	// A pod of the same name made again: describe shows its own events
	// only, not the first one's (its Killing). (Drop aboutUID in describe
	// to see them.)
	must(t, "delete", "pod", "web", "-n", "describe")
	apply(t, podYAML("web", map[string]string{"app": "web"}, ""), "-n", "describe")
	must(t, "wait", "pod/web", "-n", "describe", "--for=condition=Ready", "--timeout=60s")
	if got := must(t, "get", "events", "-n", "describe", "--field-selector", "reason=Killing"); !strings.Contains(got, "pod/web") {
		t.Fatalf("the first pod's Killing event is not there to leave out:\n%s", got)
	}
	if out := must(t, "describe", "pod", "web", "-n", "describe"); strings.Contains(out, "Killing") || !strings.Contains(out, "Scheduled") {
		t.Errorf("describe of the pod made again shows the first one's events, or none:\n%s", out)
	}
}

func TestEditAppliesTheChangeOrKeepsTheFile(t *testing.T) {
	t.Parallel()
	namespace(t, "edit")
	apply(t, podYAML("web", map[string]string{"app": "web"}, ""), "-n", "edit")
	must(t, "wait", "pod/web", "-n", "edit", "--for=condition=Ready", "--timeout=60s")
	r := zwctlWith(t, "", map[string]string{"EDITOR": `sed -i 's/app: web/app: changed/'`}, "edit", "pod/web", "-n", "edit")
	if r.code != 0 || r.out != "pod/web edited\n" {
		t.Errorf("edit of a label: %s", r)
	}
	if got := must(t, "get", "pod", "web", "-n", "edit", "-o", "jsonpath={.metadata.labels.app}"); got != "changed" {
		t.Errorf("label after edit: %q", got)
	}
	r = zwctlWith(t, "", map[string]string{"EDITOR": `sed -i 's/image: base/image: other/'`}, "edit", "pod", "web", "-n", "edit")
	m := regexp.MustCompile(`your changes are kept in (\S+)\n$`).FindStringSubmatch(r.err)
	if r.code != 1 || !strings.HasPrefix(r.err, "Error from server (Invalid): ") || m == nil {
		t.Fatalf("an edit the server refuses: %s", r)
	}
	kept, err := os.ReadFile(m[1])
	if err != nil || !strings.Contains(string(kept), "image: other") {
		t.Errorf("the kept file: %v %s", err, kept)
	}
	os.Remove(m[1])
	if r := zwctlWith(t, "", map[string]string{"EDITOR": "true"}, "edit", "pod/web", "-n", "edit"); r.code != 0 || r.out != "Edit cancelled, no changes made.\n" {
		t.Errorf("an edit without a change: %s", r)
	}
}

func TestTokensAreIssuedUsedAndRevoked(t *testing.T) {
	t.Parallel()
	r := zwctl(t, "token", "create", "--ttl", "1h")
	token := strings.TrimSpace(r.out)
	m := regexp.MustCompile(`^token (\S+) \(role cluster-admin\) expires `).FindStringSubmatch(r.err)
	if r.code != 0 || !strings.HasPrefix(token, "zw_") || m == nil {
		t.Fatalf("token create: %s", r)
	}
	if got := must(t, "get", "nodes", "--token", token, "-o", "name"); !strings.Contains(got, "node/node-1\n") {
		t.Errorf("get nodes with the new token: %q", got)
	}
	if got := must(t, "get", "tokens"); !regexp.MustCompile(`(?m)^` + m[1] + ` +cluster-admin +<none> +in (59m|1h) +<none> +\S+$`).MatchString(got) {
		t.Errorf("get tokens:\n%s", got)
	}
	if got := must(t, "token", "revoke", m[1]); got != "token/"+m[1]+" revoked\n" {
		t.Errorf("revoke said %q", got)
	}
	r = zwctl(t, "get", "nodes", "--token", token)
	if r.code != 1 || !strings.HasPrefix(r.err, "Error from server (Unauthorized): ") {
		t.Errorf("a revoked token: %s", r)
	}
}

func TestFinalizeEndsAGracePeriod(t *testing.T) {
	t.Parallel()
	namespace(t, "finalize")
	apply(t, podYAML("slow", nil, "\n  terminationGracePeriodSeconds: 300"), "-n", "finalize")
	must(t, "wait", "pod/slow", "-n", "finalize", "--for=condition=Ready", "--timeout=60s")
	must(t, "delete", "pod", "slow", "-n", "finalize", "--wait=false")
	if got := must(t, "finalize", "pod/slow", "-n", "finalize"); got != "pod/slow finalized\n" {
		t.Errorf("finalize said %q", got)
	}
	must(t, "wait", "pod/slow", "-n", "finalize", "--for=delete", "--timeout=30s")
	r := zwctl(t, "cancel", "slow", "-n", "finalize")
	if r.code != 1 || !strings.HasPrefix(r.err, "Error from server (NotFound): ") {
		t.Errorf("cancel of a pod that is gone: %s", r)
	}
}

func TestVersionConfigAndCompletion(t *testing.T) {
	t.Parallel()
	if got := must(t, "version"); !regexp.MustCompile(`^Client Version: \S+\nServer Version: \S+ \(go1\.\S+, linux/\w+\)\n$`).MatchString(got) {
		t.Errorf("version:\n%s", got)
	}
	if got := must(t, "config", "get-contexts"); !regexp.MustCompile(`^CURRENT +NAME +CLUSTER +USER +NAMESPACE\n\* +dev +dev +dev +default\n$`).MatchString(got) {
		t.Errorf("get-contexts:\n%s", got)
	}
	if got := must(t, "config", "view"); !strings.Contains(got, "token: REDACTED") || strings.Contains(got, "zw_") {
		t.Errorf("config view shows a token:\n%s", got)
	}
	if got := must(t, "completion", "bash"); !strings.Contains(got, "__start_zwctl") {
		t.Errorf("bash completion: %.200s", got)
	}
	if got := must(t, "completion", "zsh"); !strings.HasPrefix(got, "#compdef zwctl") {
		t.Errorf("zsh completion: %.200s", got)
	}
	// Completion of resource types, then of names from the server.
	if got := must(t, "__complete", "get", ""); !strings.Contains(got, "deploy\n") || !strings.Contains(got, "pods\n") {
		t.Errorf("completing a type:\n%s", got)
	}
	if got := must(t, "__complete", "get", "nodes", ""); !strings.Contains(got, "node-1\nnode-2\nnode-3\n") {
		t.Errorf("completing node names:\n%s", got)
	}
}

// create makes what does not exist and fails, exit 1, on what does, after
// trying the rest.
func TestCreateRefusesWhatExists(t *testing.T) {
	t.Parallel()
	manifests := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: created\n---\n" + strings.Replace(podYAML("first", nil, ""), "metadata:\n", "metadata:\n  namespace: created\n", 1)
	if r := zwctlWith(t, manifests, nil, "create", "-f", "-"); r.code != 0 || r.out != "namespace/created created\npod/first created\n" {
		t.Fatalf("create: %s", r)
	}
	r := zwctlWith(t, manifests, nil, "create", "-f", "-")
	if r.code != 1 || r.out != "" || strings.Count(r.err, "Error from server (AlreadyExists)") != 2 {
		t.Fatalf("create again: %s", r)
	}
	must(t, "delete", "pod", "first", "-n", "created", "--force")
	must(t, "delete", "namespace", "created")
}

// A namespace role makes a namespace token, as a user would expect from
// `token create -n team --role view`. (Drop the role test beside
// namespaced in token create to see the cluster-wide route refuse it.)
func TestANamespaceRoleIssuesANamespaceToken(t *testing.T) {
	t.Parallel()
	namespace(t, "team")
	r := zwctl(t, "token", "create", "-n", "team", "--role", "view", "--ttl", "1h")
	if r.code != 0 || !strings.Contains(r.err, "(role view in team)") {
		t.Fatalf("token create -n team --role view: %s", r)
	}
	token := strings.TrimSpace(r.out)
	if r := zwctl(t, "get", "pods", "-n", "team", "--token", token); r.code != 0 || r.err != "No resources found in team namespace.\n" {
		t.Errorf("the view token lists team's pods: %s", r)
	}
	if r := zwctl(t, "get", "pods", "-n", "default", "--token", token); r.code == 0 || !strings.Contains(r.err, "Forbidden") {
		t.Errorf("the view token of team lists default's pods: %s", r)
	}
}

// Without a config file, the environment a dev stack's env file exports
// names the server, token and CA; with neither, the error names the file
// zwctl looked for. (Drop the environment loop in connect to see the
// first refused.)
func TestTheEnvironmentNamesTheServerWhenNoConfigDoes(t *testing.T) {
	t.Parallel()
	s := stackSettings(t)
	missing := filepath.Join(t.TempDir(), "none.yaml")
	r := zwctlWith(t, "", map[string]string{"ZWCONFIG": missing}, "get", "nodes")
	if r.code == 0 || !strings.Contains(r.err, "there is no config file "+missing) || !strings.Contains(r.err, "$ZW_API_URL") {
		t.Errorf("no config and no environment: %s", r)
	}
	r = zwctlWith(t, "", map[string]string{"ZWCONFIG": missing, "ZW_API_URL": s.Server, "ZW_TOKEN": s.Token, "ZW_CACERT": s.CertificateAuthority},
		"get", "nodes", "-o", "name")
	if r.code != 0 || !strings.Contains(r.out, "node/node-1\n") {
		t.Errorf("the environment alone: %s", r)
	}
}
