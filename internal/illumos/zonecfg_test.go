package illumos

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func sparseConfig() ZoneConfig {
	return ZoneConfig{
		Name:      "default-web-0123456789ab",
		Brand:     "sparse",
		Zonepath:  "/zones/default-web-0123456789ab",
		LimitPriv: "default,dtrace_proc",
		FS:        []FS{{Dir: "/data", Special: "/tank/data", Type: "lofs", Options: []string{"ro", "nodevices"}}},
		Nets:      []Net{{Physical: "zwweb_1234567890", AllowedAddress: "10.0.0.5/24", Defrouter: "10.0.0.1"}},
		CPUCap:    1.5,
		Memory:    &CappedMemory{Physical: 1 << 30, Swap: 2 << 30},
		Attrs:     []Attr{{Name: "dns-domain", Type: "string", Value: "cluster.local"}, {Name: "resolvers", Type: "string", Value: "10.0.0.2,10.0.0.3"}},
		Datasets:  []string{"rpool/zw/data/default-web-0123456789ab"},
		Rctls:     []Rctl{{Name: "zone.max-lwps", Priv: "privileged", Limit: 2000, Action: "deny"}},
	}
}

func TestRenderZoneConfigGolden(t *testing.T) {
	tests := []struct {
		file string
		cfg  ZoneConfig
	}{
		{"zonecfg_sparse.golden", sparseConfig()},
		{"zonecfg_lx.golden", ZoneConfig{
			Name: "lx01", Brand: "lx", Zonepath: "/zones/lx01",
			Nets:         []Net{{Physical: "lx0", AllowedAddress: "10.0.0.9/24", Defrouter: "10.0.0.1"}},
			Attrs:        []Attr{{Name: "kernel-version", Type: "string", Value: "4.4"}},
			MaxProcesses: 4000, MaxLWPs: 16000,
		}},
		{"zonecfg_bhyve.golden", ZoneConfig{
			Name: "vm0", Brand: "bhyve", Zonepath: "/zones/vm0",
			Nets:    []Net{{Physical: "vm0nic0"}},
			Devices: []string{"/dev/zvol/rdsk/rpool/vm0"},
			Bhyve:   &BhyveConfig{VCPUs: 2, RAM: 4 << 30, BootDisk: "rpool/vm0"},
		}},
		{"zonecfg_quoting.golden", ZoneConfig{
			Name: "q1", Zonepath: "/zones/with space/q1",
			FS: []FS{{Dir: "/mnt/a;b", Special: "/src#x", Type: "lofs", Options: []string{"ro", "size=10m"}}},
			Attrs: []Attr{
				{Name: "evil", Type: "string", Value: "x; delete -F; add net"},
				{Name: "kw", Type: "string", Value: "net"},
				{Name: "brackets", Type: "string", Value: "[a](b)=c"},
				{Name: "dash", Type: "string", Value: "-F"},
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := RenderZoneConfig(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.file, []byte(got))
		})
	}
}

func TestRenderZoneConfigRefusesWhatCannotBeQuoted(t *testing.T) {
	base := sparseConfig()
	tests := []struct {
		name string
		edit func(c *ZoneConfig)
	}{
		{"a double quote in a value", func(c *ZoneConfig) { c.Attrs[0].Value = `a"b` }},
		{"a newline in a value", func(c *ZoneConfig) { c.Attrs[0].Value = "a\ncreate -F" }},
		{"a carriage return in a value", func(c *ZoneConfig) { c.FS[0].Special = "/x\r" }},
		{"a NUL in a value", func(c *ZoneConfig) { c.LimitPriv = "default\x00" }},
		{"a newline in a list item", func(c *ZoneConfig) { c.FS[0].Options = []string{"ro\n"} }},
		{"a comma in a mount option", func(c *ZoneConfig) { c.FS[0].Options = []string{"ro,nosuid"} }},
		{"a bad zone name", func(c *ZoneConfig) { c.Name = "bad name" }},
		{"a relative zonepath", func(c *ZoneConfig) { c.Zonepath = "zones/x" }},
		{"the root as zonepath", func(c *ZoneConfig) { c.Zonepath = "//" }},
		{"a bad link name", func(c *ZoneConfig) { c.Nets[0].Physical = "web" }},
		{"a bad allowed-address", func(c *ZoneConfig) { c.Nets[0].AllowedAddress = "10.0.0.5; x" }},
		{"a defrouter without allowed-address", func(c *ZoneConfig) { c.Nets[0].AllowedAddress = "" }},
		{"a bad attr name", func(c *ZoneConfig) { c.Attrs[0].Name = "a b" }},
		{"a bad attr type", func(c *ZoneConfig) { c.Attrs[0].Type = "float" }},
		{"an attr without a value", func(c *ZoneConfig) { c.Attrs[0].Value = "" }},
		{"a duplicate attr", func(c *ZoneConfig) { c.Attrs[1].Name = c.Attrs[0].Name }},
		{"a bad dataset", func(c *ZoneConfig) { c.Datasets[0] = "tank/a b" }},
		{"a bad rctl action", func(c *ZoneConfig) { c.Rctls[0].Action = "signal=KILL" }},
		{"capped memory in bytes", func(c *ZoneConfig) { c.Memory = &CappedMemory{Physical: 1000} }},
		{"bhyve ram that is not whole MiB", func(c *ZoneConfig) { c.Bhyve = &BhyveConfig{RAM: 1 << 19} }},
		{"a bhyve attr that clashes", func(c *ZoneConfig) {
			c.Bhyve = &BhyveConfig{VCPUs: 2}
			c.Attrs = append(c.Attrs, Attr{Name: "vcpus", Type: "string", Value: "4"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sparseConfig()
			c.FS = append([]FS(nil), base.FS...)
			c.Nets = append([]Net(nil), base.Nets...)
			c.Attrs = append([]Attr(nil), base.Attrs...)
			c.Datasets = append([]string(nil), base.Datasets...)
			c.Rctls = append([]Rctl(nil), base.Rctls...)
			tt.edit(&c)
			if out, err := RenderZoneConfig(c); err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
		})
	}
}

// The mirror of zonecfg_lex.l (illumos-omnios), enough to see how zonecfg
// splits a command file into commands and tokens.

type zlTok struct{ kind, text string } // kind: CMD, KW, TOKEN, or the punctuation itself

var zlCommands = wordSet("add cancel commit create delete end exit export help info remove revert select set clear verify")

func lexZonecfgMirror(src string) ([][]zlTok, error) {
	var cmds [][]zlTok
	var cur []zlTok
	const (
		initial = iota
		tstate
		lstate
		cstate
	)
	state, saved := initial, initial
	end := func() {
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur, state = nil, initial
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == ';' || c == '\n':
			end()
			i++
		case state == initial && c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case state == initial:
			j := i
			for j < len(src) && isLetter(src[j]) {
				j++
			}
			w := src[i:j]
			if !zlCommands[w] {
				return nil, fmt.Errorf("offset %d: not a command: %q", i, src[i:])
			}
			cur = append(cur, zlTok{"CMD", w})
			state, i = tstate, j
		case c == '=':
			cur = append(cur, zlTok{"=", "="})
			i++
		case c == '[' && state == tstate:
			cur = append(cur, zlTok{"[", "["})
			state, i = lstate, i+1
		case c == ']' && state == lstate:
			cur = append(cur, zlTok{"]", "]"})
			state, i = tstate, i+1
		case c == '(' && (state == tstate || state == lstate):
			cur = append(cur, zlTok{"(", "("})
			saved, state, i = state, cstate, i+1
		case c == ')' && state == cstate:
			cur = append(cur, zlTok{")", ")"})
			state, i = saved, i+1
		case c == ',' && (state == lstate || state == cstate):
			cur = append(cur, zlTok{",", ","})
			i++
		case c == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' && src[j] != '\n' {
				j++
			}
			if j >= len(src) || src[j] != '"' {
				return nil, fmt.Errorf("offset %d: unterminated quote", i)
			}
			cur = append(cur, zlTok{"TOKEN", src[i+1 : j]})
			i = j + 1
		default:
			stop := " \t\n\";=[]()"
			if state != tstate {
				stop += ","
			}
			j := i
			for j < len(src) && strings.IndexByte(stop, src[j]) < 0 {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("offset %d: stray %q", i, c)
			}
			w := src[i:j]
			kind := "TOKEN"
			if state != lstate && zcKeywords[w] {
				kind = "KW"
			}
			cur = append(cur, zlTok{kind, w})
			i = j
		}
	}
	end()
	return cmds, nil
}

// expectedCommands is the command sequence a config must produce, built
// without the renderer.
func expectedCommands(cfg ZoneConfig) [][]zlTok {
	cmd := func(toks ...zlTok) []zlTok { return toks }
	c := func(s string) zlTok { return zlTok{"CMD", s} }
	kw := func(s string) zlTok { return zlTok{"KW", s} }
	tok := func(s string) zlTok { return zlTok{"TOKEN", s} }
	eq := zlTok{"=", "="}
	set := func(p, v string) []zlTok { return cmd(c("set"), kw(p), eq, tok(v)) }
	end := cmd(c("end"))
	out := [][]zlTok{cmd(c("create"), tok("-b")), set("zonepath", cfg.Zonepath)}
	if cfg.Brand != "" {
		out = append(out, set("brand", cfg.Brand))
	}
	out = append(out, set("autoboot", fmt.Sprint(cfg.Autoboot)))
	if cfg.LimitPriv != "" {
		out = append(out, set("limitpriv", cfg.LimitPriv))
	}
	out = append(out, set("ip-type", "exclusive"))
	for _, fs := range cfg.FS {
		out = append(out, cmd(c("add"), kw("fs")), set("dir", fs.Dir), set("special", fs.Special), set("type", fs.Type))
		if len(fs.Options) > 0 {
			l := cmd(c("set"), kw("options"), eq, zlTok{"[", "["})
			for i, o := range fs.Options {
				if i > 0 {
					l = append(l, zlTok{",", ","})
				}
				l = append(l, tok(o))
			}
			out = append(out, append(l, zlTok{"]", "]"}))
		}
		out = append(out, end)
	}
	for _, n := range cfg.Nets {
		out = append(out, cmd(c("add"), kw("net")), set("physical", n.Physical), set("allowed-address", n.AllowedAddress), set("defrouter", n.Defrouter), end)
	}
	for _, d := range cfg.Devices {
		out = append(out, cmd(c("add"), kw("device")), set("match", d), end)
	}
	for _, a := range cfg.Attrs {
		out = append(out, cmd(c("add"), kw("attr")), set("name", a.Name), set("type", a.Type), set("value", a.Value), end)
	}
	for _, d := range cfg.Datasets {
		out = append(out, cmd(c("add"), kw("dataset")), set("name", d), end)
	}
	return out
}

// FuzzRenderZoneConfigCannotInject proves that no value can add, remove or
// change a zonecfg command: the rendered file, read by a mirror of
// zonecfg's lexer, is exactly the expected command sequence with every
// value intact, or rendering refuses the value.
func FuzzRenderZoneConfigCannotInject(f *testing.F) {
	for _, s := range []string{"plain", "a b", "x; delete -F", "net", "\"", "a\nb", "#c", "[a,b]", "(x)", "=", "", "-F", "a,b", "\t", "é", "\r"} {
		f.Add(s, s, s, s)
	}
	f.Fuzz(func(t *testing.T, zonepathTail, special, option, value string) {
		cfg := ZoneConfig{
			Name:      "z1",
			Brand:     "sparse",
			Zonepath:  "/zones/" + zonepathTail,
			LimitPriv: value,
			FS:        []FS{{Dir: "/d", Special: special, Type: "lofs", Options: []string{"o" + strings.ReplaceAll(option, ",", ""), "ro"}}},
			Nets:      []Net{{Physical: "net0", AllowedAddress: "10.0.0.5/24", Defrouter: "10.0.0.1"}},
			Devices:   []string{"d" + value},
			Attrs:     []Attr{{Name: "a", Type: "string", Value: "v" + value}},
			Datasets:  []string{"tank/d"},
		}
		rendered, err := RenderZoneConfig(cfg)
		quotable := func(s string) bool {
			return !strings.ContainsFunc(s, func(r rune) bool { return r == '"' || (r < 0x20 && r != '\t') || r == 0x7f })
		}
		allQuotable := quotable(zonepathTail) && quotable(special) && quotable(option) && quotable(value)
		if err != nil {
			if allQuotable && special != "" && cfg.validate() == nil {
				t.Fatalf("refused quotable values: %v", err)
			}
			return
		}
		if !allQuotable {
			t.Fatalf("rendered an unquotable value:\n%s", rendered)
		}
		got, err := lexZonecfgMirror(rendered)
		if err != nil {
			t.Fatalf("%v in\n%s", err, rendered)
		}
		if want := expectedCommands(cfg); !reflect.DeepEqual(got, want) {
			t.Fatalf("rendered\n%s\nlexes as\n%v\nwant\n%v", rendered, got, want)
		}
	})
}

const specInfo = "zonename: web01\n" +
	"zonepath: /zones/web01\n" +
	"brand: sparse\n" +
	"autoboot: false\n" +
	"bootargs: \n" +
	"pool: \n" +
	"limitpriv: default,sys_dl_config\n" +
	"scheduling-class: \n" +
	"ip-type: exclusive\n" +
	"hostid: \n" +
	"fs-allowed: \n" +
	"[max-lwps: 2000]\n" +
	"[cpu-shares: 100]\n" +
	"fs:\n" +
	"\tdir: /data\n" +
	"\tspecial: /tank/data\n" +
	"\traw not specified\n" +
	"\ttype: lofs\n" +
	"\toptions: [ro,nodevices,\"size=10m\"]\n" +
	"net:\n" +
	"\taddress not specified\n" +
	"\tallowed-address: 10.0.0.5/24\n" +
	"\tphysical: vnic0\n" +
	"\tdefrouter: 10.0.0.1\n" +
	"capped-cpu:\n" +
	"\t[ncpus: 1.50]\n" +
	"capped-memory:\n" +
	"\tphysical: 1G\n" +
	"\t[swap: 2G]\n" +
	"\t[locked: 512M]\n" +
	"attr:\n" +
	"\tname: foo\n" +
	"\ttype: string\n" +
	"\tvalue: \"bar baz\"\n" +
	"dataset:\n" +
	"\tname: tank/delegated\n" +
	"rctl:\n" +
	"\tname: zone.max-lwps\n" +
	"\tvalue: (priv=privileged,limit=2000,action=deny)\n"

func TestParseZonecfgInfo(t *testing.T) {
	info, err := ParseZonecfgInfo(specInfo)
	if err != nil {
		t.Fatal(err)
	}
	want := ZoneConfig{
		Name: "web01", Zonepath: "/zones/web01", Brand: "sparse", IPType: IPExclusive,
		LimitPriv: "default,sys_dl_config",
		FS:        []FS{{Dir: "/data", Special: "/tank/data", Type: "lofs", Options: []string{"ro", "nodevices", "size=10m"}}},
		Nets:      []Net{{Physical: "vnic0", AllowedAddress: "10.0.0.5/24", Defrouter: "10.0.0.1"}},
		CPUCap:    1.5,
		Memory:    &CappedMemory{Physical: 1 << 30, Swap: 2 << 30, Locked: 512 << 20},
		Attrs:     []Attr{{Name: "foo", Type: "string", Value: "bar baz"}},
		Datasets:  []string{"tank/delegated"},
		// The aliased global property, listed again as an rctl.
		MaxLWPs: 2000,
	}
	if !reflect.DeepEqual(info.Config, want) {
		t.Errorf("config\n got %+v\nwant %+v", info.Config, want)
	}
	if info.Props["max-lwps"] != "2000" || info.Props["bootargs"] != "" || info.Props["pool"] != "" {
		t.Errorf("props: %q", info.Props)
	}
	if _, ok := info.Props["pool"]; !ok {
		t.Error("an empty global property must still be listed")
	}
	if len(info.Resources) != 7 || info.Resources[1].Type != "net" {
		t.Errorf("resources: %+v", info.Resources)
	}
	if _, ok := info.Resources[0].Props["raw"]; ok {
		t.Error(`"raw not specified" must not become a property`)
	}
}

func TestParseZonecfgInfoLiftsBhyveAttrs(t *testing.T) {
	out := "zonename: vm0\nzonepath: /zones/vm0\nbrand: bhyve\nautoboot: false\nip-type: exclusive\n" +
		"attr:\n\tname: vcpus\n\ttype: string\n\tvalue: 2\n" +
		"attr:\n\tname: ram\n\ttype: string\n\tvalue: 4096\n" +
		"attr:\n\tname: bootdisk\n\ttype: string\n\tvalue: rpool/vm0\n" +
		"attr:\n\tname: other\n\ttype: string\n\tvalue: x\n"
	info, err := ParseZonecfgInfo(out)
	if err != nil {
		t.Fatal(err)
	}
	if b := info.Config.Bhyve; b == nil || b.VCPUs != 2 || b.RAM != 4<<30 || b.BootDisk != "rpool/vm0" {
		t.Errorf("bhyve = %+v (a plain ram number is MiB)", b)
	}
	if len(info.Config.Attrs) != 1 || info.Config.Attrs[0].Name != "other" {
		t.Errorf("attrs = %+v", info.Config.Attrs)
	}
}

func TestParseZonecfgInfoRejectsGarbage(t *testing.T) {
	for _, bad := range []string{"\tdir: /x\n", "no colon here\n", "capped-cpu:\n\t[ncpus: lots]\n", "capped-memory:\n\tphysical: 1Q\n"} {
		if _, err := ParseZonecfgInfo(bad); err == nil {
			t.Errorf("ParseZonecfgInfo(%q) succeeded", bad)
		}
	}
}

// Of two bad values, the same one is named every time. (Range over a
// map of the properties in configFromInfo to see either.)
func TestParseZonecfgInfoNamesTheFirstBadValue(t *testing.T) {
	for range 20 {
		_, err := ParseZonecfgInfo("zonename: z\nmax-processes: many\nmax-lwps: lots\n")
		if err == nil || !strings.HasPrefix(err.Error(), "max-processes") {
			t.Fatalf("error %v: want max-processes named", err)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, tt := range []struct {
		b uint64
		s string
	}{{1 << 30, "1G"}, {1536 << 20, "1536M"}, {512, "512"}, {3 << 40, "3T"}, {4 << 10, "4K"}} {
		if got := FormatSize(tt.b); got != tt.s {
			t.Errorf("FormatSize(%d) = %s, want %s", tt.b, got, tt.s)
		}
		if got, err := ParseSize(tt.s); err != nil || got != tt.b {
			t.Errorf("ParseSize(%s) = %d, %v", tt.s, got, err)
		}
	}
	for s, want := range map[string]uint64{"1.5G": 1536 << 20, "2g": 2 << 30, "100MB": 100 << 20, "1024": 1024} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%s) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "1Q", "-1G", "NaNG", "1e3M", "99999999999T"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) succeeded", bad)
		}
	}
}

func FuzzParseZonecfgInfo(f *testing.F) {
	f.Add(specInfo)
	f.Add("")
	f.Add("net:\n\tphysical: x\n")
	f.Add("[swap: 2G]\nfs:\n")
	f.Fuzz(func(t *testing.T, out string) {
		info, err := ParseZonecfgInfo(out)
		if err != nil {
			return
		}
		for _, r := range info.Resources {
			if !isResourceType(r.Type) || r.Props == nil {
				t.Fatalf("bad resource %+v", r)
			}
		}
		if info.Config.Name != info.Props["zonename"] {
			t.Fatal("zonename not carried into the config")
		}
	})
}

func TestParseZonecfgInfoFoldsCapAliases(t *testing.T) {
	out := "zonename: z\ncapped-cpu:\n\t[ncpus: 1.50]\ncapped-memory:\n\tphysical: 1G\n\t[swap: 2G]\n" +
		"rctl:\n\tname: zone.cpu-cap\n\tvalue: (priv=privileged,limit=150,action=deny)\n" +
		"rctl:\n\tname: zone.max-swap\n\tvalue: (priv=privileged,limit=2147483648,action=deny)\n" +
		"rctl:\n\tname: zone.max-lwps\n\tvalue: (priv=privileged,limit=100,action=deny)\n"
	info, err := ParseZonecfgInfo(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Rctl{{Name: "zone.max-lwps", Priv: "privileged", Limit: 100, Action: "deny"}}; !reflect.DeepEqual(info.Config.Rctls, want) {
		t.Errorf("rctls = %+v, want only the one not aliased by a cap", info.Config.Rctls)
	}
	if len(info.Resources) != 5 {
		t.Errorf("every printed resource stays in Resources: %d", len(info.Resources))
	}
}
