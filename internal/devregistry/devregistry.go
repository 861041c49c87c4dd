// Package devregistry is the dev stack's OCI registry: go-containerregistry's
// registry, in memory, on a loopback address, seeded with one demo image so
// that a registry image runs on a fresh machine with nothing else
// installed. Images pushed to it last until the stack stops.
package devregistry

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DemoImage is the repository and tag the registry is seeded with: an
// image whose command prints DemoGreeting (from a file of its layer) and
// then waits.
const (
	DemoImage    = "demo/hello:1"
	DemoGreeting = "hello from a registry image"
)

// Registry is a running registry.
type Registry struct {
	// Addr is where it listens (host:port).
	Addr string
	srv  *http.Server
	done chan error
}

// Start serves a registry at addr (a loopback host:port; port 0 picks
// one) and pushes the demo image into it.
func Start(ctx context.Context, addr string) (*Registry, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the dev registry: %w", err)
	}
	r := &Registry{Addr: ln.Addr().String(), done: make(chan error, 1),
		srv: &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}}
	go func() { r.done <- r.srv.Serve(ln) }()
	// A stack must come up even if the push cannot finish.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.seed(sctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("the dev registry: push %s: %w", DemoImage, err)
	}
	return r, nil
}

// Close stops the registry.
func (r *Registry) Close() error {
	err := r.srv.Close()
	if serr := <-r.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// seed pushes the demo image: one layer with etc/motd, run from / as
// `sh -c 'cat etc/motd; exec sleep 86400'`.
func (r *Registry) seed(ctx context.Context) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	motd := DemoGreeting + "\n"
	for _, h := range []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/motd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(motd))},
	} {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(tw, motd); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"cat etc/motd; exec sleep 86400"}, WorkingDir: "/",
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.ParseReference(r.Addr+"/"+DemoImage, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(ref, img, remote.WithContext(ctx))
}
