package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Errors a caller maps to Kubernetes reasons. They are returned wrapped,
// with the registry's own message (and, for registry answers, the
// *transport.Error, reachable with errors.As).
var (
	// ErrNotFound: the registry does not have the manifest, the
	// repository or the blob (MANIFEST_UNKNOWN, NAME_UNKNOWN,
	// BLOB_UNKNOWN or a 404).
	ErrNotFound = errors.New("image not found")
	// ErrUnauthorized: the registry refused us (401, 403, UNAUTHORIZED or
	// DENIED), including a token endpoint that refused the credentials.
	ErrUnauthorized = errors.New("not authorized to pull image")
	// ErrNoPlatform: the image exists but has no linux/amd64 variant.
	ErrNoPlatform = errors.New("image has no linux/amd64 manifest")
	// ErrUnsupported: the image is one this client cannot run (a schema 1
	// manifest, a foreign or unknown layer type, a malformed manifest or
	// configuration); asking again will not change it.
	ErrUnsupported = errors.New("image not supported")
)

const (
	defaultMaxManifestBytes = 4 << 20
	maxTransports           = 1024
)

// Client talks to registries. The zero value is ready to use.
type Client struct {
	// Transport is the base round tripper (the caller's, which may refuse
	// private addresses); nil means http.DefaultTransport. Token
	// endpoints and blob redirects go through it too.
	Transport http.RoundTripper
	// Insecure registries (host[:port]) may be spoken to over plain http
	// (tests, a dev registry on localhost). Every other registry is
	// https only, even on loopback or RFC 1918 addresses, where
	// go-containerregistry would otherwise fall back to http.
	Insecure func(registry string) bool
	// MaxManifestBytes bounds manifests and image configs read into
	// memory; 0 means 4 MiB.
	MaxManifestBytes int64

	mu sync.Mutex
	// transports holds one authenticated transport per registry,
	// repository and credentials, so that Resolve and the many Blob calls
	// that follow do the ping and token dance once.
	transports map[transportKey]*transportEntry
}

type transportKey struct {
	registry, repository string
	insecure             bool
	creds                Credentials
}

type transportEntry struct {
	ready chan struct{} // closed once rt or err is set
	rt    http.RoundTripper
	err   error
}

// Credentials for one registry, as found in a
// kubernetes.io/dockerconfigjson secret.
type Credentials struct {
	Username, Password string
	// Auth is base64("username:password"), used when Username and
	// Password are empty.
	Auth string
	// IdentityToken is an OAuth2 refresh token exchanged at the
	// registry's token endpoint.
	IdentityToken string
	// RegistryToken is a bearer token sent to the registry as is.
	RegistryToken string
}

// Keyring finds credentials for a registry (host[:port], as in
// Reference.Registry); nil, or not found, means anonymous.
type Keyring func(registry string) (Credentials, bool)

// ParseDockerConfigJSON reads the .dockerconfigjson value of a pull secret
// ({"auths":{"host":{"username":..,"password":..,"auth":"base64(u:p)"}}}).
// Keys are matched as the kubelet matches them: a key may carry a scheme
// and a path ("https://index.docker.io/v1/"), "docker.io" and
// "index.docker.io" both mean Docker Hub, a host may be a glob
// ("*.example.com", one label per '*'), and the port must be the same.
// A Keyring sees only the registry, so a key with a repository path
// ("quay.io/team") matches its whole registry, after any key without one.
func ParseDockerConfigJSON(data []byte) (Keyring, error) {
	var cfg struct {
		Auths map[string]struct {
			Username      string `json:"username"`
			Password      string `json:"password"`
			Auth          string `json:"auth"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse .dockerconfigjson: %w", err)
	}
	type entry struct {
		host, port string
		hasPath    bool
		key        string
		creds      Credentials
	}
	var entries []entry
	for key, a := range cfg.Auths {
		c := Credentials{Username: a.Username, Password: a.Password, Auth: a.Auth,
			IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
		if c.Username == "" && c.Password == "" && c.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(c.Auth)
			if err != nil {
				return nil, fmt.Errorf("parse .dockerconfigjson: auth of %q is not base64: %w", key, err)
			}
			u, p, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("parse .dockerconfigjson: auth of %q is not base64(user:password)", key)
			}
			c.Username, c.Password = u, p
		}
		v := key
		if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
			v = "https://" + v
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			// The kubelet skips keys it cannot parse.
			continue
		}
		p := u.Path
		if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
			p = p[3:]
		}
		host := strings.ToLower(u.Hostname())
		if host == "docker.io" || host == "registry-1.docker.io" {
			host = name.DefaultRegistry
		}
		entries = append(entries, entry{host: host, port: u.Port(), hasPath: p != "" && p != "/", key: key, creds: c})
	}
	// Exact keys before path-scoped ones; otherwise reverse order, as the
	// kubelet sorts its index, so a map's order never decides.
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].hasPath != entries[j].hasPath {
			return !entries[i].hasPath
		}
		return entries[i].key > entries[j].key
	})
	return func(registry string) (Credentials, bool) {
		host, port := registry, ""
		if h, p, err := splitHostPort(registry); err == nil {
			host, port = h, p
		}
		host = strings.ToLower(host)
		if host == "docker.io" || host == "registry-1.docker.io" {
			host = name.DefaultRegistry
		}
		for _, e := range entries {
			if e.port == port && hostMatches(e.host, host) {
				return e.creds, true
			}
		}
		return Credentials{}, false
	}, nil
}

func splitHostPort(s string) (host, port string, err error) {
	u, err := url.Parse("//" + s)
	if err != nil {
		return "", "", err
	}
	return u.Hostname(), u.Port(), nil
}

// hostMatches matches host against a kubelet-style glob: same number of
// dot-separated labels, each matched with path.Match.
func hostMatches(glob, host string) bool {
	g, h := strings.Split(glob, "."), strings.Split(host, ".")
	if len(g) != len(h) {
		return false
	}
	for i := range g {
		if ok, err := path.Match(g[i], h[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// Image is a resolved image for linux/amd64: what to fetch and how to run it.
type Image struct {
	// Reference is the normalised reference as asked.
	Reference string
	// Digest is the "sha256:..." of the image manifest chosen (for an
	// index, the linux/amd64 manifest's), the identity of what runs.
	Digest string
	// Layers in order, bottom first.
	Layers []Layer
	Config Config
	// Size is the sum of the compressed layer sizes: what a pull fetches.
	Size int64
}

// Layer is one layer blob of an image.
type Layer struct {
	// Digest is the "sha256:..." of the blob as stored (compressed).
	Digest string
	// DiffID is the "sha256:..." of the uncompressed tar, from the
	// config's rootfs.diff_ids; ApplyLayer's result must equal it.
	DiffID    string
	Size      int64
	MediaType string
}

// Config is the part of the image config that decides how a container runs.
type Config struct {
	Entrypoint, Cmd, Env []string
	WorkingDir, User     string
	// ExposedPorts are "port/proto" ("80/tcp"), sorted.
	ExposedPorts []string
}

var (
	manifestAccept = strings.Join([]string{
		string(types.OCIManifestSchema1),
		string(types.DockerManifestSchema2),
		string(types.OCIImageIndex),
		string(types.DockerManifestList),
	}, ", ")

	layerTypes = map[types.MediaType]bool{
		types.DockerLayer:             true,
		types.DockerUncompressedLayer: true,
		types.OCILayer:                true,
		types.OCILayerZStd:            true,
		types.OCIUncompressedLayer:    true,
	}
)

// Resolve finds the linux/amd64 image ref names: it fetches the manifest
// (choosing from a manifest list or OCI index), checks every manifest
// against its digest, reads the config and lists the layers. It fetches no
// layer; Blob does.
func (c *Client) Resolve(ctx context.Context, ref Reference, keys Keyring) (Image, error) {
	rt, err := c.transport(ctx, ref, keys)
	if err != nil {
		return Image{}, err
	}
	body, mt, dgst, err := c.manifest(ctx, rt, ref, ref.identifier(), ref.Digest, -1)
	if err != nil {
		return Image{}, err
	}
	// An index may point to another index; two levels are enough for
	// anything in the wild and bound the work a hostile registry causes.
	for depth := 0; mt.IsIndex(); depth++ {
		if depth == 2 {
			return Image{}, fmt.Errorf("%s: indexes nested too deep", ref)
		}
		idx, err := v1.ParseIndexManifest(bytes.NewReader(body))
		if err != nil {
			return Image{}, fmt.Errorf("%s: parse index %s: %w", ref, dgst, err)
		}
		d, err := pickPlatform(idx)
		if err != nil {
			return Image{}, fmt.Errorf("%s: %w", ref, err)
		}
		body, mt, dgst, err = c.manifest(ctx, rt, ref, d.Digest.String(), d.Digest.String(), d.Size)
		if err != nil {
			return Image{}, err
		}
	}
	if !mt.IsImage() {
		return Image{}, fmt.Errorf("%s: unsupported manifest media type %q", ref, mt)
	}
	m, err := v1.ParseManifest(bytes.NewReader(body))
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w: parse manifest %s: %w", ref, ErrUnsupported, dgst, err)
	}
	if !m.Config.MediaType.IsConfig() {
		return Image{}, fmt.Errorf("%s: %w: manifest %s: config media type %q is not an image config", ref, ErrUnsupported, dgst, m.Config.MediaType)
	}
	cfgBytes, err := c.smallBlob(ctx, rt, ref, m.Config)
	if err != nil {
		return Image{}, err
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(cfgBytes))
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w: parse config %s: %w", ref, ErrUnsupported, m.Config.Digest, err)
	}
	// A single-manifest image says its platform only in its config; one
	// built for another architecture would fail later with an exec error.
	if (cf.OS != "" && cf.OS != "linux") || (cf.Architecture != "" && cf.Architecture != "amd64") {
		return Image{}, fmt.Errorf("%s: %w: the image is %s/%s", ref, ErrNoPlatform, cf.OS, cf.Architecture)
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return Image{}, fmt.Errorf("%s: %w: config has %d diff_ids for %d layers", ref, ErrUnsupported, len(cf.RootFS.DiffIDs), len(m.Layers))
	}
	img := Image{Reference: ref.String(), Digest: dgst}
	for i, l := range m.Layers {
		if !layerTypes[l.MediaType] {
			if !l.MediaType.IsDistributable() {
				return Image{}, fmt.Errorf("%s: %w: layer %d (%s) is a foreign (non-distributable) layer, which cannot be pulled", ref, ErrUnsupported, i, l.Digest)
			}
			return Image{}, fmt.Errorf("%s: %w: layer %d (%s) has media type %q", ref, ErrUnsupported, i, l.Digest, l.MediaType)
		}
		diffID := cf.RootFS.DiffIDs[i].String()
		if !sha256RE.MatchString(l.Digest.String()) || !sha256RE.MatchString(diffID) {
			return Image{}, fmt.Errorf("%s: %w: layer %d: digest %s / diff_id %s is not sha256", ref, ErrUnsupported, i, l.Digest, diffID)
		}
		if l.Size < 0 {
			return Image{}, fmt.Errorf("%s: %w: layer %d: negative size", ref, ErrUnsupported, i)
		}
		img.Layers = append(img.Layers, Layer{Digest: l.Digest.String(), DiffID: diffID, Size: l.Size, MediaType: string(l.MediaType)})
		img.Size += l.Size
	}
	cc := cf.Config
	img.Config = Config{Entrypoint: cc.Entrypoint, Cmd: cc.Cmd, Env: cc.Env, WorkingDir: cc.WorkingDir, User: cc.User}
	for p := range cc.ExposedPorts {
		img.Config.ExposedPorts = append(img.Config.ExposedPorts, p)
	}
	sort.Strings(img.Config.ExposedPorts)
	return img, nil
}

// pickPlatform chooses linux/amd64 from an index, preferring an entry
// without a variant (amd64 variants such as v3 need newer CPUs).
func pickPlatform(idx *v1.IndexManifest) (v1.Descriptor, error) {
	var found []v1.Descriptor
	var have []string
	for _, d := range idx.Manifests {
		if d.Platform == nil {
			have = append(have, "unknown")
			continue
		}
		have = append(have, d.Platform.String())
		if d.Platform.OS == "linux" && d.Platform.Architecture == "amd64" &&
			(d.MediaType.IsImage() || d.MediaType.IsIndex()) {
			found = append(found, d)
		}
	}
	for _, d := range found {
		if d.Platform.Variant == "" || d.Platform.Variant == "v1" {
			return d, nil
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	slices.Sort(have)
	have = slices.Compact(have)
	return v1.Descriptor{}, fmt.Errorf("%w (it has: %s)", ErrNoPlatform, strings.Join(have, ", "))
}

func (c *Client) maxManifest() int64 {
	if c.MaxManifestBytes > 0 {
		return c.MaxManifestBytes
	}
	return defaultMaxManifestBytes
}

// manifest fetches a manifest by tag or digest. want, when set, is the
// digest the bytes must have; wantSize, when >= 0, the size. It returns
// the bytes, their media type and their sha256 digest.
func (c *Client) manifest(ctx context.Context, rt http.RoundTripper, ref Reference, id, want string, wantSize int64) ([]byte, types.MediaType, string, error) {
	u := registryURL(ref, "manifests", id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", "", err
	}
	req.Header.Set("Accept", manifestAccept)
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: fetch manifest %s: %w", ref, id, err)
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return nil, "", "", classify(fmt.Sprintf("%s: manifest %s", ref, id), err)
	}
	body, err := readLimited(resp.Body, c.maxManifest())
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: manifest %s: %w", ref, id, err)
	}
	sum := sha256.Sum256(body)
	dgst := "sha256:" + hex.EncodeToString(sum[:])
	if want != "" && dgst != want {
		return nil, "", "", fmt.Errorf("%s: manifest fetched as %s has digest %s", ref, want, dgst)
	}
	if wantSize >= 0 && int64(len(body)) != wantSize {
		return nil, "", "", fmt.Errorf("%s: manifest %s is %d bytes, the index says %d", ref, dgst, len(body), wantSize)
	}
	// The manifest's own mediaType field is covered by the digest; the
	// Content-Type header is not, so it is only the fallback.
	var probe struct {
		MediaType     types.MediaType `json:"mediaType"`
		SchemaVersion int             `json:"schemaVersion"`
		Manifests     json.RawMessage `json:"manifests"`
		Config        json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, "", "", fmt.Errorf("%s: manifest %s is not JSON: %w", ref, dgst, err)
	}
	mt := probe.MediaType
	if mt == "" {
		mt = types.MediaType(strings.TrimSpace(strings.Split(resp.Header.Get("Content-Type"), ";")[0]))
	}
	if mt == "" || mt == "application/json" {
		// OCI allows an unlabelled manifest; tell by its shape.
		switch {
		case probe.Manifests != nil:
			mt = types.OCIImageIndex
		case probe.Config != nil:
			mt = types.OCIManifestSchema1
		}
	}
	if probe.SchemaVersion == 1 || mt == types.DockerManifestSchema1 || mt == types.DockerManifestSchema1Signed {
		return nil, "", "", fmt.Errorf("%s: %w: Docker schema 1 manifests", ref, ErrUnsupported)
	}
	return body, mt, dgst, nil
}

// smallBlob reads a blob that must fit in memory (the config) and checks
// it against its descriptor.
func (c *Client) smallBlob(ctx context.Context, rt http.RoundTripper, ref Reference, d v1.Descriptor) ([]byte, error) {
	if !sha256RE.MatchString(d.Digest.String()) {
		return nil, fmt.Errorf("%s: config digest %s is not sha256", ref, d.Digest)
	}
	if d.Size > c.maxManifest() {
		return nil, fmt.Errorf("%s: config is %d bytes, more than the %d allowed", ref, d.Size, c.maxManifest())
	}
	rc, err := c.openBlob(ctx, rt, ref, d.Digest.String(), 0)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := readLimited(rc, c.maxManifest())
	if err != nil {
		return nil, fmt.Errorf("%s: config %s: %w", ref, d.Digest, err)
	}
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest.String() {
		return nil, fmt.Errorf("%s: config %s has digest %s", ref, d.Digest, got)
	}
	return b, nil
}

// RepositoryTransport is the authenticated transport for ref's repository, over
// c.Transport, for a caller that fetches blobs itself (at BlobURL) with
// its own resume and limits.
func (c *Client) RepositoryTransport(ctx context.Context, ref Reference, keys Keyring) (http.RoundTripper, error) {
	return c.transport(ctx, ref, keys)
}

// BlobURL is where a blob of ref's repository is fetched with
// RepositoryTransport, which speaks plain http to an insecure registry
// whatever the scheme says.
func BlobURL(ref Reference, digest string) string { return registryURL(ref, "blobs", digest) }

// Blob opens a blob for reading from offset (a Range request when offset >
// 0; if the registry ignores the range and answers 200, the first offset
// bytes are skipped), so an interrupted layer download can resume. The
// caller verifies the digest.
func (c *Client) Blob(ctx context.Context, ref Reference, keys Keyring, digest string, offset int64) (io.ReadCloser, error) {
	if !sha256RE.MatchString(digest) {
		return nil, fmt.Errorf("%s: blob digest %q is not sha256:<64 hex>", ref, digest)
	}
	if offset < 0 {
		return nil, fmt.Errorf("%s: blob %s: negative offset %d", ref, digest, offset)
	}
	rt, err := c.transport(ctx, ref, keys)
	if err != nil {
		return nil, err
	}
	return c.openBlob(ctx, rt, ref, digest, offset)
}

func (c *Client) openBlob(ctx context.Context, rt http.RoundTripper, ref Reference, digest string, offset int64) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, registryURL(ref, "blobs", digest), nil)
	if err != nil {
		return nil, err
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	// Blob GETs are usually redirected to storage; http.Client follows,
	// and go-containerregistry's transports only send our credentials
	// to the registry's own host.
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: fetch blob %s: %w", ref, digest, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if offset > 0 {
			if n, err := io.CopyN(io.Discard, resp.Body, offset); err != nil {
				resp.Body.Close()
				return nil, fmt.Errorf("%s: blob %s: skipping to offset %d (the registry ignored the range) after %d bytes: %w", ref, digest, offset, n, err)
			}
		}
		return resp.Body, nil
	case resp.StatusCode == http.StatusPartialContent && offset > 0:
		if cr := resp.Header.Get("Content-Range"); cr != "" {
			start, ok := contentRangeStart(cr)
			if !ok || start != offset {
				resp.Body.Close()
				return nil, fmt.Errorf("%s: blob %s: asked for bytes from %d, got Content-Range %q", ref, digest, offset, cr)
			}
		}
		return resp.Body, nil
	}
	defer resp.Body.Close()
	return nil, classify(fmt.Sprintf("%s: blob %s", ref, digest), transport.CheckError(resp))
}

// contentRangeStart parses the first byte of "bytes <start>-<end>/<size>".
func contentRangeStart(cr string) (int64, bool) {
	s, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	s, _, ok = strings.Cut(s, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n, err == nil
}

func registryURL(ref Reference, kind, id string) string {
	// The scheme is fixed up by go-containerregistry's scheme transport
	// to what the ping found (https, or http for an insecure registry).
	return (&url.URL{Scheme: "https", Host: ref.Registry, Path: "/v2/" + ref.Repository + "/" + kind + "/" + id}).String()
}

// readLimited reads all of r, failing if it is more than limit bytes.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// classify wraps a registry error with the sentinel it means.
func classify(what string, err error) error {
	var te *transport.Error
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
			return fmt.Errorf("%s: %w: %w", what, ErrNotFound, err)
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return fmt.Errorf("%s: %w: %w", what, ErrUnauthorized, err)
		}
	}
	switch te.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w: %w", what, ErrNotFound, err)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%s: %w: %w", what, ErrUnauthorized, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// transport returns the authenticated transport for ref's repository with
// the credentials keys gives, doing the ping and token exchange once per
// client. Concurrent callers wait for the first; a failure is not kept, so
// the next call tries again.
func (c *Client) transport(ctx context.Context, ref Reference, keys Keyring) (http.RoundTripper, error) {
	key := transportKey{registry: ref.Registry, repository: ref.Repository}
	key.insecure = c.Insecure != nil && c.Insecure(ref.Registry)
	found := false
	if keys != nil {
		key.creds, found = keys(ref.Registry)
	}
	for {
		c.mu.Lock()
		if c.transports == nil {
			c.transports = make(map[transportKey]*transportEntry)
		}
		e, ok := c.transports[key]
		if !ok {
			if len(c.transports) >= maxTransports {
				// Forget them all rather than grow without bound
				// (one per repository and pull secret seen).
				clear(c.transports)
			}
			e = &transportEntry{ready: make(chan struct{})}
			c.transports[key] = e
		}
		c.mu.Unlock()
		if ok {
			select {
			case <-e.ready:
				if e.err == nil {
					return e.rt, nil
				}
				continue // the first attempt failed and was forgotten: try ourselves
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		e.rt, e.err = c.newTransport(ctx, key, found)
		if e.err != nil {
			c.mu.Lock()
			delete(c.transports, key)
			c.mu.Unlock()
		}
		close(e.ready)
		return e.rt, e.err
	}
}

func (c *Client) newTransport(ctx context.Context, key transportKey, found bool) (http.RoundTripper, error) {
	var opts []name.Option
	if key.insecure {
		opts = append(opts, name.Insecure)
	}
	reg, err := name.NewRegistry(key.registry, opts...)
	if err != nil {
		return nil, fmt.Errorf("registry %q: %w", key.registry, err)
	}
	repo := reg.Repo(key.repository)
	auth := authn.Anonymous
	if found {
		cr := key.creds
		auth = authn.FromConfig(authn.AuthConfig{Username: cr.Username, Password: cr.Password, Auth: cr.Auth,
			IdentityToken: cr.IdentityToken, RegistryToken: cr.RegistryToken})
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if !key.insecure {
		base = httpsOnly{base}
	}
	rt, err := transport.NewWithContext(ctx, reg, auth, base, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, classify(fmt.Sprintf("%s/%s: authenticate", key.registry, key.repository), err)
	}
	return rt, nil
}

// httpsOnly refuses plain http: go-containerregistry falls back to http for
// loopback and RFC 1918 registries, which only Client.Insecure may allow.
type httpsOnly struct{ inner http.RoundTripper }

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("refusing %s: registry %s is not insecure, so only https is used", req.URL.Redacted(), req.URL.Host)
	}
	return h.inner.RoundTrip(req)
}
