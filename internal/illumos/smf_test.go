package illumos

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

func webService() Service {
	return Service{
		Name:       "zonewright/pod/web",
		Start:      []string{"/app/bin/server", "--listen", ":8080", "--motd", "it's <fine> & 100%"},
		Env:        []EnvVar{{Name: "PORT", Value: "8080"}, {Name: "GREETING", Value: `say "hi" & <bye>`}},
		WorkingDir: "/app",
		User:       "app",
		Group:      "app",
	}
}

func TestRenderManifestGolden(t *testing.T) {
	tests := []struct {
		file string
		svc  Service
	}{
		{"manifest_web.golden", webService()},
		{"manifest_minimal.golden", Service{Name: "zonewright/pod/job", Start: []string{"/bin/true"}, Duration: "transient", Enabled: true, StartTimeout: 90 * time.Second}},
		{"manifest_stop.golden", Service{Name: "site/db", Start: []string{"/opt/db/bin/db", "start"}, Stop: []string{"/opt/db/bin/db", "stop"}, Duration: "contract", StopTimeout: 1500 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := RenderManifest(tt.svc)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.file, got)
		})
	}
}

// manifestAttrs decodes a manifest with a real XML parser and returns the
// attribute values that carry user input.
func manifestAttrs(t *testing.T, doc []byte) (start, stop string, env map[string]string, wd string) {
	t.Helper()
	env = map[string]string{}
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("manifest is not well-formed XML: %v\n%s", err, doc)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := func(n string) string {
			for _, a := range se.Attr {
				if a.Name.Local == n {
					return a.Value
				}
			}
			return ""
		}
		switch se.Name.Local {
		case "exec_method":
			if attr("name") == "start" {
				start = attr("exec")
			} else {
				stop = attr("exec")
			}
		case "envvar":
			env[attr("name")] = attr("value")
		case "method_context":
			wd = attr("working_directory")
		}
	}
}

// smfExpand undoes svc.startd's %-token escaping ("%%" is "%").
func smfExpand(s string) string { return strings.ReplaceAll(s, "%%", "%") }

func TestRenderManifestCarriesValuesExactly(t *testing.T) {
	svc := webService()
	doc, err := RenderManifest(svc)
	if err != nil {
		t.Fatal(err)
	}
	start, stop, env, wd := manifestAttrs(t, doc)
	if got := shellSplit(t, smfExpand(start)); strings.Join(got, "\x00") != strings.Join(svc.Start, "\x00") {
		t.Errorf("start method runs %q, want %q", got, svc.Start)
	}
	if stop != ":kill" {
		t.Errorf("stop = %q", stop)
	}
	if env["GREETING"] != `say "hi" & <bye>` || env["PORT"] != "8080" || wd != "/app" {
		t.Errorf("env %q, wd %q", env, wd)
	}
}

func TestRenderManifestRefuses(t *testing.T) {
	tests := map[string]func(*Service){
		"a bad service name":       func(s *Service) { s.Name = "bad name" },
		"an empty start":           func(s *Service) { s.Start = nil },
		"a bad duration":           func(s *Service) { s.Duration = "forever" },
		"a relative working dir":   func(s *Service) { s.WorkingDir = "app" },
		"a bad env name":           func(s *Service) { s.Env = []EnvVar{{Name: "A=B", Value: "x"}} },
		"a duplicate env name":     func(s *Service) { s.Env = []EnvVar{{Name: "A"}, {Name: "A"}} },
		"a control char in argv":   func(s *Service) { s.Start = []string{"/bin/x", "\x01"} },
		"a NUL in argv":            func(s *Service) { s.Start = []string{"/bin/x\x00"} },
		"invalid UTF-8 in env":     func(s *Service) { s.Env = []EnvVar{{Name: "A", Value: "\xff"}} },
		"a control char in a user": func(s *Service) { s.User = "a\x1b" },
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			s := webService()
			edit(&s)
			if out, err := RenderManifest(s); err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
		})
	}
}

func FuzzRenderManifest(f *testing.F) {
	f.Add("/bin/x", "a b", "VAL&<>'\"", "/wd")
	f.Add("%s", "%%", "\n\r\t", "/")
	f.Add("", "'", "]]>", "/a b")
	f.Fuzz(func(t *testing.T, arg0, arg1, val, wd string) {
		svc := Service{Name: "zw/fuzz", Start: []string{"/bin/echo", arg0, arg1}, Env: []EnvVar{{Name: "V", Value: val}}, WorkingDir: "/" + strings.TrimPrefix(wd, "/")}
		doc, err := RenderManifest(svc)
		if err != nil {
			return
		}
		start, _, env, gotWD := manifestAttrs(t, doc)
		if env["V"] != val {
			t.Fatalf("env value %q came back as %q", val, env["V"])
		}
		if gotWD != svc.WorkingDir {
			t.Fatalf("working dir %q came back as %q", svc.WorkingDir, gotWD)
		}
		want, _ := methodExec(svc.Start)
		if start != want {
			t.Fatalf("exec %q came back as %q", want, start)
		}
		if back := smfExpand(start); strings.Count(start, "%")%2 != 0 || !strings.HasPrefix(back, "/bin/echo ") {
			t.Fatalf("exec string %q is not escaped for svc.startd", start)
		}
	})
}
