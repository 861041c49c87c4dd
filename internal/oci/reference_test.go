package oci

import (
	"strings"
	"testing"
)

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseReference(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   Reference
		str    string
		latest bool
	}{
		{"alpine:3.20", Reference{"index.docker.io", "library/alpine", "3.20", ""}, "index.docker.io/library/alpine:3.20", false},
		{"alpine", Reference{"index.docker.io", "library/alpine", "latest", ""}, "index.docker.io/library/alpine:latest", true},
		{"docker.io/library/alpine", Reference{"index.docker.io", "library/alpine", "latest", ""}, "index.docker.io/library/alpine:latest", true},
		{"index.docker.io/bitnami/redis:7", Reference{"index.docker.io", "bitnami/redis", "7", ""}, "index.docker.io/bitnami/redis:7", false},
		{"bitnami/redis", Reference{"index.docker.io", "bitnami/redis", "latest", ""}, "index.docker.io/bitnami/redis:latest", true},
		{"host:5000/repo", Reference{"host:5000", "repo", "latest", ""}, "host:5000/repo:latest", true},
		{"localhost/a/b:v1", Reference{"localhost", "a/b", "v1", ""}, "localhost/a/b:v1", false},
		{"ghcr.io/org/app@sha256:" + hex64, Reference{"ghcr.io", "org/app", "", "sha256:" + hex64}, "ghcr.io/org/app@sha256:" + hex64, false},
		{"alpine:latest@sha256:" + hex64, Reference{"index.docker.io", "library/alpine", "latest", "sha256:" + hex64}, "index.docker.io/library/alpine:latest@sha256:" + hex64, false},
		{"127.0.0.1:5000/x/y-z_w.v:tag_1.0-rc", Reference{"127.0.0.1:5000", "x/y-z_w.v", "tag_1.0-rc", ""}, "127.0.0.1:5000/x/y-z_w.v:tag_1.0-rc", false},
		{"[::1]:5000/x", Reference{"[::1]:5000", "x", "latest", ""}, "[::1]:5000/x:latest", true},
	} {
		got, err := ParseReference(tc.in)
		if err != nil {
			t.Errorf("ParseReference(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseReference(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if got.String() != tc.str {
			t.Errorf("ParseReference(%q).String() = %q, want %q", tc.in, got.String(), tc.str)
		}
		if got.Latest() != tc.latest {
			t.Errorf("ParseReference(%q).Latest() = %v", tc.in, got.Latest())
		}
		// The normalised form parses to itself.
		again, err := ParseReference(got.String())
		if err != nil || again != got {
			t.Errorf("ParseReference(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}
}

func TestParseReferenceRejects(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{"", "empty"},
		{"Alpine:3", "lower case"},
		{"ghcr.io/Org/app", "lower case"},
		{"alpine@sha256:abc", "digest"},
		{"alpine@sha512:" + hex64 + hex64, "digest"},
		{"alpine@sha256:" + strings.ToUpper(hex64), "digest"},
		{"alpine@sha256:" + hex64 + "@sha256:" + hex64, "more than one"},
		{"alpine:", "tag"},
		{"alpine:-x", "tag"},
		{"alpine:" + strings.Repeat("x", 129), "tag"},
		{"a//b", "path component"},
		{"a/b/", "path component"},
		{"a/-b", "path component"},
		{"ghcr.io/", "no repository"},
		{"https://ghcr.io/a", "scheme"},
		{" alpine:3", "white space"},
		{"al pine:3", "white space"},
		{"ghcr.io/a%b/c", "path component"},
	} {
		_, err := ParseReference(tc.in)
		if err == nil {
			t.Errorf("ParseReference(%q) succeeded", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseReference(%q) = %v, want an error mentioning %q", tc.in, err, tc.msg)
		}
	}
}
