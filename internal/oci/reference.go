package oci

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Reference is a registry image reference, normalised as Docker normalises
// it, so that two spellings of one image ("alpine:3.20" and
// "docker.io/library/alpine:3.20") compare equal and name the same
// registry, repository and credentials.
type Reference struct {
	// Registry is host[:port]; Docker Hub is "index.docker.io".
	Registry string
	// Repository is the path in the registry; Docker Hub's official images
	// are under "library/".
	Repository string
	// Tag is "latest" when the reference names neither tag nor digest, and
	// empty when it names only a digest.
	Tag string
	// Digest is "sha256:<64 hex>" or empty. When both Tag and Digest are
	// set the digest is what is fetched: the tag is only a label.
	Digest string
}

var (
	// Docker's grammar (distribution/reference): a path component is
	// lower-case alphanumerics separated by '.', '_', '__' or dashes.
	pathComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	tagRE           = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	sha256RE        = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// ParseReference parses and normalises an image reference. It refuses what
// a registry would refuse anyway (upper case in the repository, a malformed
// tag, a digest that is not sha256 with 64 hex digits) with an error saying
// what is wrong, so a pod gets InvalidImageName rather than a pull that
// fails later with a less useful message.
func ParseReference(s string) (Reference, error) {
	if s == "" {
		return Reference{}, errors.New("empty image reference")
	}
	if strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\r\n") {
		return Reference{}, fmt.Errorf("image reference %q contains white space", s)
	}
	if strings.Contains(s, "://") {
		return Reference{}, fmt.Errorf("image reference %q must not contain a URL scheme", s)
	}
	rest, digest, hasDigest := strings.Cut(s, "@")
	if hasDigest {
		if strings.Contains(digest, "@") {
			return Reference{}, fmt.Errorf("image reference %q has more than one '@'", s)
		}
		if !sha256RE.MatchString(digest) {
			return Reference{}, fmt.Errorf("image reference %q: digest %q is not sha256:<64 lower-case hex digits>", s, digest)
		}
	}
	tag := ""
	if c := strings.LastIndexByte(rest, ':'); c > strings.LastIndexByte(rest, '/') {
		rest, tag = rest[:c], rest[c+1:]
		if !tagRE.MatchString(tag) {
			return Reference{}, fmt.Errorf("image reference %q: invalid tag %q (want up to 128 of [A-Za-z0-9_.-], not starting with '.' or '-')", s, tag)
		}
	}
	repo := rest
	if first, after, ok := strings.Cut(rest, "/"); ok && (first == "localhost" || strings.ContainsAny(first, ".:")) {
		if first == "" {
			return Reference{}, fmt.Errorf("image reference %q: empty registry", s)
		}
		repo = after
	}
	if repo == "" {
		return Reference{}, fmt.Errorf("image reference %q names no repository", s)
	}
	if strings.ToLower(repo) != repo {
		return Reference{}, fmt.Errorf("image reference %q: repository %q must be lower case", s, repo)
	}
	for _, c := range strings.Split(repo, "/") {
		if !pathComponentRE.MatchString(c) {
			return Reference{}, fmt.Errorf("image reference %q: invalid repository path component %q", s, c)
		}
	}
	if len(repo) > 255 {
		return Reference{}, fmt.Errorf("image reference %q: repository longer than 255 characters", s)
	}

	// go-containerregistry applies Docker's defaults (docker.io is
	// index.docker.io, official images are under library/) and checks
	// the registry is a valid URI authority.
	nr, err := name.ParseReference(s, name.WeakValidation)
	if err != nil {
		return Reference{}, fmt.Errorf("image reference %q: %w", s, err)
	}
	ref := Reference{
		Registry:   nr.Context().RegistryStr(),
		Repository: nr.Context().RepositoryStr(),
		Tag:        tag,
		Digest:     digest,
	}
	if ref.Tag == "" && ref.Digest == "" {
		ref.Tag = "latest"
	}
	return ref, nil
}

// String is the normalised reference: registry/repository[:tag][@digest].
func (r Reference) String() string {
	s := r.Registry + "/" + r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Latest reports whether the reference is the implicit or explicit
// "latest" tag with no digest: Kubernetes defaults imagePullPolicy to
// Always for these, since what they name moves.
func (r Reference) Latest() bool {
	return r.Tag == "latest" && r.Digest == ""
}

// identifier is what is asked of the registry: the digest when there is
// one (it cannot move), otherwise the tag.
func (r Reference) identifier() string {
	if r.Digest != "" {
		return r.Digest
	}
	return r.Tag
}
