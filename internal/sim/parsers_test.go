package sim

import (
	"slices"
	"strings"
	"testing"
)

// renderZonecfg writes lexed commands back as zonecfg input.
func renderZonecfg(lines []zcLine) string {
	var b strings.Builder
	for _, l := range lines {
		for i, t := range l.tokens {
			if i > 0 {
				b.WriteByte(' ')
			}
			if t.kind == tkWord {
				b.WriteString(quoteZonecfg(t.text))
			} else {
				b.WriteString(t.text)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sameTokens(a, b []zcLine) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i].tokens) != len(b[i].tokens) {
			return false
		}
		for j := range a[i].tokens {
			x, y := a[i].tokens[j], b[i].tokens[j]
			if x.kind != y.kind || x.text != y.text {
				return false
			}
		}
	}
	return true
}

func FuzzZonecfgLex(f *testing.F) {
	for _, seed := range []string{
		"create -b; set zonepath=/zones/web01\n",
		"add net\nset physical=vnic0\nset allowed-address=10.0.0.5/24\nend\n",
		`set bootargs="-m verbose; x"` + "\n",
		"add rctl; set name=zone.max-lwps; add value (priv=privileged,limit=2000,action=deny); end",
		"set limitpriv=default,dtrace_proc # a comment\n",
		"add fs; add options [ro,nodevices]; end",
		"set x=\"unterminated\nset y=1",
		"create  ;;  ; set a = b",
		"set a=[(x=1,y=2),(z=3)]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		lines := lexZonecfg(input)
		last := 0
		for _, l := range lines {
			if l.line < last {
				t.Fatalf("line numbers go backwards: %d after %d", l.line, last)
			}
			last = l.line
			if len(l.tokens) == 0 && l.badQuote == nil {
				t.Fatalf("empty command emitted")
			}
			for _, tok := range l.tokens {
				if tok.kind == tkWord && tok.text == "" && !tok.quoted {
					t.Fatalf("empty bare word")
				}
				if tok.kind == tkWord && strings.ContainsAny(tok.text, "\"\n") {
					t.Fatalf("word %q holds a quote or newline", tok.text)
				}
				// Any word survives quoting: set x=<quoted> lexes back to it.
				back := lexZonecfg("set x=" + quoteZonecfg(tok.text))
				if tok.kind == tkWord && (len(back) != 1 || len(back[0].tokens) != 4 || back[0].tokens[3].text != tok.text) {
					t.Fatalf("word %q does not survive quoting: %+v", tok.text, back)
				}
			}
		}
		// Rendering the commands and lexing them again is a fixed point
		// (for input without unterminated quotes, which rendering drops).
		for _, l := range lines {
			if l.badQuote != nil {
				return
			}
		}
		again := lexZonecfg(renderZonecfg(lines))
		if !sameTokens(lines, again) {
			t.Fatalf("render/lex not stable for %q:\n%+v\n%+v", input, lines, again)
		}
	})
}

func FuzzIpnatRule(f *testing.F) {
	for _, seed := range []string{
		"rdr net0 10.0.0.5/32 port 80 -> 192.168.1.10 port 8080 tcp",
		"rdr net0 10.0.0.5/255.255.255.255 port 80-88 -> 192.168.1.10,192.168.1.11 port 8080 udp round-robin age 30/60",
		"map net0 192.168.1.0/24 -> 10.0.0.5/32 portmap tcp/udp 1025:65000",
		"map net0 192.168.1.0/255.255.255.0 -> 0/32 portmap tcp/udp auto",
		"bimap vnic0 192.168.1.11/32 -> 10.0.0.6/32 # comment",
		"map-block net0 10.1.0.0/16 -> 203.0.113.0/24 ports 256",
		"rdr net0 10.0.0.5 port http->192.168.1.10 port 80",
		"rdr net0 from 10.0.0.0/8 port 1:9 to 10.0.0.5 port <= 80 -> 1.2.3.4 port 80 tcp",
		"map net0 ! from 10.0.0.0/8 port 1 >< 9 to any port = 53 -> 0/32 udp",
		"bogus rule",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		rules, bad := parseNATRules(input)
		if bad != 0 {
			if rules != nil {
				t.Fatalf("rules returned with a syntax error")
			}
			return
		}
		for _, r := range rules {
			text := r.rule.String()
			if strings.ContainsAny(text, "\n#") {
				t.Fatalf("rendered rule %q spans lines", text)
			}
			again, bad := parseNATRules(text)
			if bad != 0 || len(again) != 1 {
				t.Fatalf("normalised rule %q (from %q) does not parse", text, input)
			}
			if got := again[0].rule.String(); got != text {
				t.Fatalf("normalisation not idempotent: %q -> %q", text, got)
			}
		}
	})
}

func TestIpnatNormalisation(t *testing.T) {
	for in, want := range map[string]string{
		"rdr net0 10.0.0.5 port 80 -> 192.168.1.10 port 8080":                                      "rdr net0 10.0.0.5/32 port 80 -> 192.168.1.10 port 8080 tcp",
		"rdr net0 10.0.0.5/255.255.255.255 port http -> 192.168.1.10 port 80 udp":                  "rdr net0 10.0.0.5/32 port 80 -> 192.168.1.10 port 80 udp",
		"map net0 192.168.1.0/255.255.255.0 -> 0/32":                                               "map net0 192.168.1.0/24 -> 0.0.0.0/32",
		"map net0 192.168.1.0/24->10.0.0.5/32 portmap tcp/udp 1025:65000":                          "map net0 192.168.1.0/24 -> 10.0.0.5/32 portmap tcp/udp 1025:65000",
		"rdr net0 10.0.0.5/32 port 80:90 -> 1.2.3.4 port 80 tcpudp frag sticky":                    "rdr net0 10.0.0.5/32 port 80-90 -> 1.2.3.4 port 80 tcp/udp frag",
		"RDR net0 10.0.0.5 port 80 -> 1.2.3.4,1.2.3.5 port = 80 sticky tag web":                    "rdr net0 10.0.0.5/32 port 80 -> 1.2.3.4,1.2.3.5 port = 80 tcp sticky tag web",
		"map net0 10.0.0.0 -> 1.2.3.4/32":                                                          "map net0 10.0.0.0/32 -> 1.2.3.4/32",
		"map net0 10.0.0.0/0xffffff00 -> 1.2.3.4/32 tag t udp":                                     "map net0 10.0.0.0/24 -> 1.2.3.4/32 tag t udp",
		"map net0 10.0.0.0 netmask 255.0.255.0 -> range 1.2.3.4-1.2.3.9":                           "map net0 10.0.0.0/255.0.255.0 -> range 1.2.3.4-1.2.3.9",
		"rdr net0 10.0.0.5 port 0 -> 1.2.3.4 port 80":                                              "rdr net0 10.0.0.5/32 port 0 -> 1.2.3.4 port 80 tcp",
		"rdr net0 from any to 10.0.0.5 port = 80 -> 10.1.0.1 port 8080":                            "rdr net0 from any to 10.0.0.5/32 port = 80 -> 10.1.0.1 port 8080 tcp",
		"rdr net0 ! from 10.0.0.0/8 port 1 <> 1024 to 10.0.0.5 port ge 80 -> 10.1.0.1 port 80 udp": "rdr net0 ! from 10.0.0.0/8 port 1 <> 1024 to 10.0.0.5/32 port >= 80 -> 10.1.0.1 port 80 udp",
		"map gw0 from 10.2.0.0/16 to 10.2.0.0/16 -> 10.2.0.1/32 portmap tcp/udp auto":              "map gw0 from 10.2.0.0/16 to 10.2.0.0/16 -> 10.2.0.1/32 portmap tcp/udp auto",
		"map net0 from 10.2.0.0/16 port != 53 ! to any -> 0/32":                                    "map net0 from 10.2.0.0/16 port != 53 ! to any -> 0.0.0.0/32",
		"rdr net0 10.0.0.5 -> 0/32 age 3":                                                          "rdr net0 10.0.0.5/32 -> 0.0.0.0/32 ip age 3/3",
	} {
		rules, bad := parseNATRules(in)
		if bad != 0 || len(rules) != 1 || rules[0].rule.String() != want {
			t.Errorf("%q: got %v (bad line %d), want %q", in, rules, bad, want)
		}
	}
	for _, in := range []string{
		"rdr net0 10.0.0.5 port 65536 -> 1.2.3.4 port 80",
		"map net0 10.0.0.0/33 -> 1.2.3.4/32",
		"rdr net0 from any to 10.0.0.5 port = 80 -> 10.1.0.1 tcp",
		"map net0 from 10.2.0.0/16 -> 0/32",
		"rdr web 10.0.0.5 port 80 -> 1.2.3.4 port 80 tcp bogus",
		"rdr net0 10.0.0.5 port 80 -> 1.2.3.4,1.2.3.5,1.2.3.6 port 80",
		"rdr net0 10.0.0.5 port 80 -> 1.2.3.4 port 80 tag x round-robin",
		"rdr net0 10.0.0.5 port 80 -> 1.2.3.4/32 port 80",
		"map net0 10.0.0.0/24 -> 1.2.3.4/32 portmap tcp auto udp",
	} {
		if _, bad := parseNATRules("\n" + in); bad != 2 {
			t.Errorf("%q: bad line %d, want 2", in, bad)
		}
	}
}

func TestNumberFormats(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0", 512: "512", 24576: "24K", 1 << 30: "1G", 1610612736: "1.50G",
		1063004405760: "990G", 1099511627776: "1T", 123456789: "118M",
	} {
		if got := nicenum(n); got != want {
			t.Errorf("nicenum(%d) = %q, want %q", n, got, want)
		}
	}
	for s, want := range map[string]uint64{"1G": 1 << 30, "1.5g": 1610612736, "512": 512, "10M": 10 << 20, "1T": 1 << 40, "2GB": 2 << 30} {
		if got, ok := parseZfsSize(s); !ok || got != want {
			t.Errorf("parseZfsSize(%q) = %d %v, want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "G", "-1G", "1X", "1e9"} {
		if _, ok := parseZfsSize(s); ok {
			t.Errorf("parseZfsSize(%q) accepted", s)
		}
	}
	for n, want := range map[uint64]string{1 << 30: "1G", 2 << 30: "2G", 512 << 20: "512M", 1536 << 20: "1.5G", 100: "100"} {
		if got := bytesToUnits(n); got != want {
			t.Errorf("bytesToUnits(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestNameRules(t *testing.T) {
	for name, want := range map[string]string{
		"web0": "", "web": "invalid", "0web1": "invalid", "a.b1": "", "a-b1": "invalid",
		strings.Repeat("a", 30) + "1": "", strings.Repeat("a", 31) + "1": "too long",
	} {
		if got := linkNameProblem(name); got != want {
			t.Errorf("linkNameProblem(%q) = %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]string{
		"tank/a":   "",
		"tank/a@s": "",
		"/tank":    "leading slash in name",
		"tank/":    "trailing slash in name",
		"tank//a":  "empty component in name",
		"tank/a b": "invalid character ' ' in name",
		"tank@a@b": "multiple '@' delimiters in name",
		"1tank":    "pool name must begin with a letter",
		"mirror/x": "name is reserved",
	} {
		if got := datasetNameProblem(name); got != want {
			t.Errorf("datasetNameProblem(%q) = %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]bool{"web01": true, "a": true, "-a": false, "global": false, "SUNWx": false, "a b": false, strings.Repeat("z", 64): false} {
		if got := validZoneName(name); got != want {
			t.Errorf("validZoneName(%q) = %v", name, got)
		}
	}
}

func TestOfmtEscapes(t *testing.T) {
	var b strings.Builder
	tbl, _ := selectFields([]ofmtField{{"A", 5}, {"B", 5}}, []string{"A", "B"}, "a,b")
	tbl.print(&b, true, []map[string]string{{"A": `x:y\z`, "B": ""}})
	if b.String() != `x\:y\\z:`+"\n" {
		t.Errorf("parsable two fields: %q", b.String())
	}
	b.Reset()
	tbl, _ = selectFields([]ofmtField{{"A", 5}}, []string{"A"}, "A")
	tbl.print(&b, true, []map[string]string{{"A": "x:y"}})
	if b.String() != "x:y\n" {
		t.Errorf("parsable one field: %q", b.String())
	}
}

func TestMatchFMRI(t *testing.T) {
	f := "svc:/network/http:apache"
	for pat, want := range map[string]bool{
		f: true, "network/http:apache": true, "network/http": true, "http": true, "http:apache": true,
		"/network/http": true, "ttp": false, "network": false, "svc:/network/http:other": false,
	} {
		if got := matchFMRI(pat, f); got != want {
			t.Errorf("matchFMRI(%q) = %v", pat, got)
		}
	}
}

func TestParseManifest(t *testing.T) {
	m := `<?xml version="1.0"?>
<!DOCTYPE service_bundle SYSTEM "/usr/share/lib/xml/dtd/service_bundle.dtd.1">
<service_bundle type='manifest' name='x'>
  <service name='site/app' type='service' version='1'>
    <exec_method type='method' name='start' exec='/opt/app/bin/run %i' timeout_seconds='30'>
      <method_context working_directory='/opt/app'>
        <method_environment><envvar name='PORT' value='8080'/></method_environment>
      </method_context>
    </exec_method>
    <exec_method type='method' name='stop' exec=':kill -HUP' timeout_seconds='5'/>
    <property_group name='startd' type='framework'><propval name='duration' type='astring' value='child'/></property_group>
    <instance name='blue' enabled='true'/>
    <instance name='green' enabled='false'/>
  </service>
</service_bundle>`
	insts, err := parseManifest([]byte(m))
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 2 || insts[0].fmri != "svc:/site/app:blue" || !insts[0].enabled || insts[1].enabled {
		t.Fatalf("instances: %+v", insts)
	}
	d := insts[0].def
	if d.Start.Exec != "/opt/app/bin/run %i" || d.Start.Timeout != 30 || d.Stop.Exec != ":kill -HUP" ||
		d.WorkDir != "/opt/app" || len(d.Env) != 1 || d.Env[0] != "PORT=8080" || d.Duration != "child" {
		t.Errorf("definition: %+v", d)
	}
	if got := expandMethod(d.Start.Exec, insts[0].fmri, "start"); got != "/opt/app/bin/run blue" {
		t.Errorf("expandMethod = %q", got)
	}
	if _, err := parseManifest([]byte("<service_bundle><service name='a'><create_default_instance enabled='true'/></service></service_bundle>")); err == nil {
		t.Errorf("a service without a start method was accepted")
	}
}

// Only a zone command with plain, quoted arguments is taken from the zone
// user's shell; anything a shell would interpret stays in the shell.
func TestZoneCommandLine(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{"svcs -H -o state,fmri svc:/a:default ", []string{"/b/svcs", "-H", "-o", "state,fmri", "svc:/a:default"}},
		{"/usr/sbin/ipadm create-addr 'a b' 'it'\\''s' ", []string{"/b/ipadm", "create-addr", "a b", "it's"}},
		{"svccfg import /dev/stdin", []string{"/b/svccfg", "import", "/dev/stdin"}},
		{"cat /etc/passwd", nil},
		{"svcs; cat /etc/passwd", nil},
		{"svcs $(id)", nil},
		{"svcs `id`", nil},
		{"svcs > out", nil},
		{"svcs 'unterminated", nil},
		{"svcs *", nil},
		{"FOO=1 svcs", nil},
		{"", nil},
	} {
		got, ok := zoneCommandLine(c.line, "/b")
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("%q: %q %v, want %q", c.line, got, ok, c.want)
		}
	}
}
