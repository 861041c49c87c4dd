// Package oci speaks to OCI and Docker registries, so a pod may name a
// registry image ("nginx:1.27", "ghcr.io/org/app@sha256:...") instead of a
// catalog image. The control plane uses it; nodes only unpack layers
// (package ocilayer). Two files, one job each:
//
//   - reference.go parses a registry reference as Docker does
//     (ParseReference; model.IsRegistryReference tells one from a catalog
//     name), so that every spelling of one image normalises to the same
//     Reference.
//
//   - registry.go resolves a reference to a linux/amd64 image
//     (Client.Resolve: the manifest, picked from a manifest list or OCI
//     index, its layers and the config that says how to run it) and gives
//     what fetches its blobs (Client.RepositoryTransport and BlobURL, for
//     the image store's resumable fetch; Client.Blob reads one directly).
//     It speaks the distribution API through go-containerregistry's
//     authenticating transport (anonymous, basic, or bearer tokens from
//     the registry's challenge), with credentials from a pull secret
//     (ParseDockerConfigJSON), and reports failures as ErrNotFound,
//     ErrUnauthorized, ErrNoPlatform and ErrUnsupported for the caller to
//     turn into Kubernetes reasons. Every manifest and config is checked
//     against its digest; layers are the caller's to check, as it stores
//     them.
//
// The package holds no state on disk.
package oci
