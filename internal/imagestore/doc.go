// Package imagestore is the control plane's image directory: it fetches an
// image's source (http, https or file URL) with resume, verifies its sha256,
// decompresses it into the artefact nodes install, and serves that artefact
// to nodes behind short-lived download tokens.
//
// # On-disk layout
//
// Every file of image <name> lives directly in Store.Dir:
//
//	<name>.download.partial       bytes received so far (kept across failures for resume)
//	<name>.download.partial.json  where the partial came from: URL, expected sha256, and
//	                              the source's validator (ETag or Last-Modified, or size
//	                              and mtime for file:// sources)
//	<name>.download               the verified download, exactly as the source serves it
//	<name>.artefact.tmp-*         a decompression in progress
//	<name>.artefact               the decompressed file nodes pull
//
// A file only ever appears under a final name (.download, .artefact) by
// rename after it is complete and synced, so a crash leaves either the
// previous state or the finished file, never half of one. Decompress keeps
// the download, so both steps can be repeated after a crash; an
// uncompressed download becomes the artefact by a hard link, not a copy.
// Remove deletes all of an image's files.
//
// # Resume rules
//
// Fetch continues a partial only when its sidecar names the same URL and
// sha256; otherwise it starts over. It first re-hashes the partial's bytes,
// then asks for the rest with "Range: bytes=<n>-" and, when the source gave
// one, "If-Range: <validator>" so a source that changed since answers with
// the whole new file instead of a tail to splice onto the old one:
//
//   - 206 whose Content-Range starts at n: append.
//   - 200: the source ignored or refused the range; truncate and take the body.
//   - 416 with the partial's size as the total: the partial is complete; verify it.
//     Any other 416 total: start over.
//   - the partial already has the expected size: no request, verify it.
//
// A download that fails verification after it was resumed is fetched once
// more from the start within the same call, because the mismatch may come
// from bytes of an earlier attempt; only a clean download that mismatches is
// a *DigestMismatchError. Errors of a transfer (dropped connection, stall,
// cancellation, 5xx) keep the partial, so the next call resumes; a digest
// mismatch removes it.
//
// # Slow versus stalled
//
// There is no overall deadline: a transfer that keeps delivering bytes,
// however slowly, runs until it is done or its context ends. A transfer
// that delivers nothing for StallTimeout (including waiting for response
// headers) is aborted with ErrStalled. Dialling and TLS handshakes have
// their own short timeouts.
//
// # What the store may read
//
// An import runs beside the control plane's database and Temporal, so
// Sources confines it: file:// only beneath Sources.FileDir, opened
// through os.Root (no "..", no symlink out, regular files only); http(s)
// only to public addresses unless a range is in Sources.AllowPrivate,
// checked on the address each connection actually dials (so DNS
// rebinding and redirects get no further than a literal address), with
// redirects re-checked and bounded and no proxy; never credentials in the
// URL. A refusal is a permanent *RefusedSourceError. MaxBytes bounds both
// the download and the decompressed artefact (ErrTooLarge; the partial
// files are removed). Errors carry full detail for the log; Reason is what
// a client may be told.
//
// # Concurrency
//
// Operations on one image are serialised within a Store: a second Fetch or
// Decompress of the same name waits for the first. Remove stops a running
// operation of that image (it fails with ErrRemoved) before deleting files.
// Two Store values must not share a directory.
package imagestore
