package sim

import (
	"encoding/xml"
	"fmt"
	"sort"
	"strings"
)

// Service manifests: the service_bundle XML svccfg import reads, and what
// the simulator keeps of it.

// SvcDef is what the simulator keeps of a service manifest.
type SvcDef struct {
	Start   SvcMethod  `json:"start"`
	Stop    *SvcMethod `json:"stop,omitempty"`
	Env     []string   `json:"env,omitempty"` // KEY=VALUE from method_environment
	WorkDir string     `json:"working_directory,omitempty"`
	// User and Group are method_credential's: the zone's user (a login
	// name or a uid) and group (a name or a gid; empty: the user's own)
	// the methods run as; empty: root.
	User     string `json:"user,omitempty"`
	Group    string `json:"group,omitempty"`
	Duration string `json:"duration"` // contract, child (wait) or transient
}

// SvcMethod is an exec method.
type SvcMethod struct {
	Exec    string `json:"exec"`
	Timeout int    `json:"timeout_seconds,omitempty"`
}

// The manifest XML (service_bundle DTD), as far as the simulator reads it.
type xmlBundle struct {
	XMLName  xml.Name     `xml:"service_bundle"`
	Services []xmlService `xml:"service"`
}

type xmlService struct {
	Name          string         `xml:"name,attr"`
	CreateDefault *xmlEnabled    `xml:"create_default_instance"`
	Instances     []xmlInstance  `xml:"instance"`
	Methods       []xmlMethod    `xml:"exec_method"`
	Context       *xmlContext    `xml:"method_context"`
	PropGroups    []xmlPropGroup `xml:"property_group"`
}

type xmlEnabled struct {
	Enabled string `xml:"enabled,attr"`
}

type xmlInstance struct {
	Name       string         `xml:"name,attr"`
	Enabled    string         `xml:"enabled,attr"`
	Methods    []xmlMethod    `xml:"exec_method"`
	Context    *xmlContext    `xml:"method_context"`
	PropGroups []xmlPropGroup `xml:"property_group"`
}

type xmlMethod struct {
	Name    string      `xml:"name,attr"`
	Exec    string      `xml:"exec,attr"`
	Timeout string      `xml:"timeout_seconds,attr"`
	Context *xmlContext `xml:"method_context"`
}

type xmlContext struct {
	WorkDir    string `xml:"working_directory,attr"`
	Credential *struct {
		User  string `xml:"user,attr"`
		Group string `xml:"group,attr"`
	} `xml:"method_credential"`
	Env *struct {
		Vars []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"envvar"`
	} `xml:"method_environment"`
}

type xmlPropGroup struct {
	Name  string `xml:"name,attr"`
	Props []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"propval"`
}

// importedInstance is one instance a manifest defines.
type importedInstance struct {
	fmri    string
	enabled bool
	def     *SvcDef
}

// parseManifest reads a service bundle into instances.
func parseManifest(data []byte) ([]importedInstance, error) {
	var b xmlBundle
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("couldn't parse document: %v", err)
	}
	var out []importedInstance
	for _, s := range b.Services {
		if s.Name == "" {
			return nil, fmt.Errorf("service has no name")
		}
		insts := s.Instances
		if s.CreateDefault != nil {
			insts = append(insts, xmlInstance{Name: "default", Enabled: s.CreateDefault.Enabled})
		}
		for _, in := range insts {
			def, err := buildSvcDef(s, in)
			if err != nil {
				return nil, fmt.Errorf("svc:/%s:%s: %v", s.Name, in.Name, err)
			}
			out = append(out, importedInstance{
				fmri:    "svc:/" + strings.TrimPrefix(s.Name, "/") + ":" + in.Name,
				enabled: in.Enabled == "true",
				def:     def,
			})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no service instances in document")
	}
	return out, nil
}

// buildSvcDef merges service-level and instance-level settings; the
// instance's win.
func buildSvcDef(s xmlService, in xmlInstance) (*SvcDef, error) {
	def := &SvcDef{Duration: "contract"}
	methods := map[string]xmlMethod{}
	for _, m := range s.Methods {
		methods[m.Name] = m
	}
	for _, m := range in.Methods {
		methods[m.Name] = m
	}
	start, ok := methods["start"]
	if !ok || start.Exec == "" {
		return nil, fmt.Errorf("no start method")
	}
	def.Start = SvcMethod{Exec: start.Exec, Timeout: atoiOr(start.Timeout, 60)}
	if stop, ok := methods["stop"]; ok && stop.Exec != "" {
		def.Stop = &SvcMethod{Exec: stop.Exec, Timeout: atoiOr(stop.Timeout, 60)}
	}
	env := map[string]string{}
	applyCtx := func(c *xmlContext) {
		if c == nil {
			return
		}
		if c.WorkDir != "" {
			def.WorkDir = c.WorkDir
		}
		if c.Credential != nil {
			def.User, def.Group = c.Credential.User, c.Credential.Group
		}
		if c.Env != nil {
			for _, v := range c.Env.Vars {
				env[v.Name] = v.Value
			}
		}
	}
	applyCtx(s.Context)
	applyCtx(in.Context)
	applyCtx(start.Context)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		def.Env = append(def.Env, k+"="+env[k])
	}
	for _, pg := range append(s.PropGroups, in.PropGroups...) {
		if pg.Name != "startd" {
			continue
		}
		for _, p := range pg.Props {
			if p.Name == "duration" {
				def.Duration = p.Value
			}
		}
	}
	switch def.Duration {
	case "wait":
		def.Duration = "child"
	case "contract", "child", "transient":
	default:
		return nil, fmt.Errorf("invalid startd/duration %q", def.Duration)
	}
	return def, nil
}

func atoiOr(s string, def int) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
		return def
	}
	return n
}
