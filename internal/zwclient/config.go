// Package zwclient is zwctl's side of the zonewright API: the config file
// with its contexts, an HTTP client with TLS and the bearer token ready,
// the resource types the API serves, and watches that resume after a
// dropped connection.
package zwclient

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/yaml"
)

// Config is the file zwctl reads its clusters, users and contexts from:
//
//	clusters:
//	- name: dev
//	  server: https://127.0.0.1:8443
//	  certificateAuthority: /path/ca.crt      # or certificateAuthorityData: <PEM>
//	users:
//	- name: dev-admin
//	  token: zw_...
//	contexts:
//	- name: dev
//	  cluster: dev
//	  user: dev-admin
//	  namespace: default
//	currentContext: dev
type Config struct {
	Clusters       []NamedCluster `json:"clusters,omitempty"`
	Users          []NamedUser    `json:"users,omitempty"`
	Contexts       []NamedContext `json:"contexts,omitempty"`
	CurrentContext string         `json:"currentContext,omitempty"`
}

// NamedCluster is one API server.
type NamedCluster struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	// CertificateAuthority is a PEM file of the CA the server's
	// certificate chains to; CertificateAuthorityData the PEM itself.
	CertificateAuthority     string `json:"certificateAuthority,omitempty"`
	CertificateAuthorityData string `json:"certificateAuthorityData,omitempty"`
}

// NamedUser is one set of credentials.
type NamedUser struct {
	Name  string `json:"name"`
	Token string `json:"token,omitempty"`
}

// NamedContext pairs a cluster with a user and a default namespace.
type NamedContext struct {
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	User      string `json:"user"`
	Namespace string `json:"namespace,omitempty"`
}

// EnvConfig names the environment variable with the config file's path.
const EnvConfig = "ZWCONFIG"

// DefaultPath is where the config file is without --zwconfig or ZWCONFIG:
// ~/.config/zonewright/config.yaml.
func DefaultPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "zonewright", "config.yaml")
}

// ConfigPath picks the config file: the flag, else $ZWCONFIG, else the
// default path.
func ConfigPath(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if p := getenv(EnvConfig); p != "" {
		return p
	}
	return DefaultPath()
}

// LoadConfig reads a config file; a missing file is an empty config.
func LoadConfig(path string) (*Config, error) {
	cfg := &Config{}
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, cfg); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Save writes the config file, readable by its owner only (it holds tokens).
func (c *Config) Save(path string) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return writePrivate(path, b)
}

// writePrivate replaces the file at path with b, readable by its owner
// only (it holds a token).
func writePrivate(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}

// SaveKubeconfig writes c as a kubeconfig (apiVersion v1, kind Config),
// the file the stock kubectl reads through $KUBECONFIG: the same
// clusters, users and contexts.
func (c *Config) SaveKubeconfig(path string) error {
	type kv = map[string]any
	var clusters, users, contexts []kv
	for _, cl := range c.Clusters {
		cluster := kv{"server": cl.Server}
		if cl.CertificateAuthority != "" {
			cluster["certificate-authority"] = cl.CertificateAuthority
		}
		if cl.CertificateAuthorityData != "" {
			cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString([]byte(cl.CertificateAuthorityData))
		}
		clusters = append(clusters, kv{"name": cl.Name, "cluster": cluster})
	}
	for _, u := range c.Users {
		users = append(users, kv{"name": u.Name, "user": kv{"token": u.Token}})
	}
	for _, x := range c.Contexts {
		contexts = append(contexts, kv{"name": x.Name, "context": kv{"cluster": x.Cluster, "user": x.User, "namespace": x.Namespace}})
	}
	b, err := yaml.Marshal(kv{"apiVersion": "v1", "kind": "Config", "clusters": clusters, "users": users, "contexts": contexts,
		"current-context": c.CurrentContext})
	if err != nil {
		return err
	}
	return writePrivate(path, b)
}

// Context returns the named context.
func (c *Config) Context(name string) (NamedContext, bool) {
	i := slices.IndexFunc(c.Contexts, func(x NamedContext) bool { return x.Name == name })
	if i < 0 {
		return NamedContext{}, false
	}
	return c.Contexts[i], true
}

// Overrides are the command-line flags that win over the config file.
type Overrides struct {
	Context, Server, Token, CertificateAuthority, Namespace string
}

// Settings are what a client needs, resolved from the file and flags.
type Settings struct {
	Context                  string
	Server                   string
	CertificateAuthority     string
	CertificateAuthorityData string
	Token                    string
	Namespace                string
}

// Resolve merges the config file's context (--context, else
// currentContext) with the flags; flags win. A context named but absent
// is an error; no context at all is fine when --server is given.
func (c *Config) Resolve(o Overrides) (Settings, error) {
	var s Settings
	name := o.Context
	if name == "" {
		name = c.CurrentContext
	}
	if name != "" {
		ctx, ok := c.Context(name)
		if !ok {
			return s, fmt.Errorf("context %q is not in the config file", name)
		}
		s.Context, s.Namespace = ctx.Name, ctx.Namespace
		if i := slices.IndexFunc(c.Clusters, func(x NamedCluster) bool { return x.Name == ctx.Cluster }); i >= 0 {
			cl := c.Clusters[i]
			s.Server, s.CertificateAuthority, s.CertificateAuthorityData = cl.Server, cl.CertificateAuthority, cl.CertificateAuthorityData
		} else if o.Server == "" {
			return s, fmt.Errorf("context %q names cluster %q, which is not in the config file", name, ctx.Cluster)
		}
		if i := slices.IndexFunc(c.Users, func(x NamedUser) bool { return x.Name == ctx.User }); i >= 0 {
			s.Token = c.Users[i].Token
		}
	}
	if o.Server != "" {
		s.Server = o.Server
	}
	if o.Token != "" {
		s.Token = o.Token
	}
	if o.CertificateAuthority != "" {
		s.CertificateAuthority, s.CertificateAuthorityData = o.CertificateAuthority, ""
	}
	if o.Namespace != "" {
		s.Namespace = o.Namespace
	}
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	if s.Server == "" {
		return s, errors.New("no server: give --server or $ZW_API_URL, or a config file with a current context (--zwconfig, $ZWCONFIG or " + DefaultPath() + ")")
	}
	return s, nil
}

// SingleContext is a config with one cluster, user and context of the same
// name, current: what `zonewright dev` writes for its stack.
func SingleContext(name, server, caFile, token, namespace string) *Config {
	return &Config{
		Clusters:       []NamedCluster{{Name: name, Server: server, CertificateAuthority: caFile}},
		Users:          []NamedUser{{Name: name, Token: token}},
		Contexts:       []NamedContext{{Name: name, Cluster: name, User: name, Namespace: namespace}},
		CurrentContext: name,
	}
}
