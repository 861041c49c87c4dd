package containerlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// DefaultMaxRunBytes bounds each run a node keeps of a container's log
// (kubelet's default containerLogMaxSize).
const DefaultMaxRunBytes = 10 << 20

// Kept is a node's copy of its containers' logs outside their zones, so
// that a container's output outlives its zone until its pod is deleted:
// <Dir>/<pod UID>/<container>.log holds, in the service log's own form,
// the container's last run and the one before it (the previous), each
// cut to its last MaxRunBytes. Keeping a newer run of the container
// rotates the last one kept to previous, as kubelet does on a restart.
type Kept struct {
	Dir string
	// MaxRunBytes bounds each run kept; zero: DefaultMaxRunBytes.
	MaxRunBytes int64
}

// keptRuns is how many runs of a container are kept: the last and the
// previous.
const keptRuns = 2

// path is where the container's log is kept.
func (k *Kept) path(uid, container string) (string, error) {
	for _, part := range []string{uid, container} {
		if part == "" || part == "." || part == ".." || filepath.Base(part) != part {
			return "", fmt.Errorf("kept log of pod %q container %q: not a name", uid, container)
		}
	}
	return filepath.Join(k.Dir, uid, container+".log"), nil
}

// Open opens the container's kept log (fs.ErrNotExist when none).
func (k *Kept) Open(uid, container string) (*os.File, error) {
	p, err := k.path(uid, container)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// Keep copies the last runs of the container's service log src into the
// kept log. The runs already kept that src does not hold (those of an
// earlier zone of the pod) stay as the previous ones. Keeping the same
// log again changes nothing.
func (k *Kept) Keep(uid, container string, src *os.File) error {
	p, err := k.path(uid, container)
	if err != nil {
		return err
	}
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("keep the log of container %s: %w", container, err)
	}
	runs, err := k.runs(src, fi.Size())
	if err != nil {
		return fmt.Errorf("keep the log of container %s: %w", container, err)
	}
	if len(runs) == 0 {
		return nil
	}
	if len(runs) < keptRuns {
		old, err := os.Open(p)
		switch {
		case err == nil:
			defer old.Close() // read until the new file is written
			older, err := k.olderRuns(old, runs[0].head)
			if err != nil {
				return fmt.Errorf("keep the log of container %s: %w", container, err)
			}
			runs = append(older, runs...)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("keep the log of container %s: %w", container, err)
		}
	}
	runs = runs[max(len(runs)-keptRuns, 0):]

	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("keep the log of container %s: %w", container, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+container+".log-*")
	if err != nil {
		return fmt.Errorf("keep the log of container %s: %w", container, err)
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing there
	for _, r := range runs {
		if err := r.copyTo(tmp); err != nil {
			tmp.Close()
			return fmt.Errorf("keep the log of container %s: %w", container, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("keep the log of container %s: %w", container, err)
	}
	// Its lines after svc.startd's last take the file's time (see the
	// package comment): the time of the log they were written to.
	if err := os.Chtimes(tmp.Name(), fi.ModTime(), fi.ModTime()); err != nil {
		return fmt.Errorf("keep the log of container %s: %w", container, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("keep the log of container %s: %w", container, err)
	}
	return nil
}

// olderRuns are the runs of the kept log f before the one that begins
// with head (all of them when none does).
func (k *Kept) olderRuns(f *os.File, head []byte) ([]run, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	kept, err := k.runs(f, fi.Size())
	if err != nil {
		return nil, err
	}
	for i, r := range kept {
		if bytes.Equal(r.head, head) {
			return kept[:i], nil
		}
	}
	return kept, nil
}

// run is one run of a service log: its first line (the start method's,
// which tells it apart from other runs) and the rest, cut to the bound.
type run struct {
	head []byte
	rest *io.SectionReader
}

func (r run) copyTo(w io.Writer) error {
	if _, err := w.Write(r.head); err != nil {
		return err
	}
	_, err := io.Copy(w, r.rest)
	return err
}

// runs reads f's runs, each cut to its last MaxRunBytes at a line's start;
// a log with no start method's line is one run.
func (k *Kept) runs(f *os.File, size int64) ([]run, error) {
	limit := k.MaxRunBytes
	if limit <= 0 {
		limit = DefaultMaxRunBytes
	}
	ms, err := index(f, size, Options{Location: time.Local, Now: time.Now})
	if err != nil {
		return nil, err
	}
	var starts []marker
	for _, m := range ms {
		if IsRunStart(m.msg) {
			starts = append(starts, m)
		}
	}
	if len(starts) == 0 {
		if size == 0 {
			return nil, nil
		}
		end := lineEnd(f, 0, size)
		starts = []marker{{off: 0, end: end}}
	}
	// Only the last runs are read.
	starts = starts[max(len(starts)-keptRuns, 0):]
	out := make([]run, 0, len(starts))
	for i, s := range starts {
		end := size
		if i+1 < len(starts) {
			end = starts[i+1].off
		}
		head := make([]byte, s.end-s.off)
		if _, err := f.ReadAt(head, s.off); err != nil {
			return nil, err
		}
		from := s.end
		if end-from > limit {
			from = lineEnd(f, end-limit, end)
		}
		out = append(out, run{head: head, rest: io.NewSectionReader(f, from, end-from)})
	}
	return out, nil
}

// lineEnd is where the line holding off ends (end when it does not).
func lineEnd(f *os.File, off, end int64) int64 {
	buf := make([]byte, 4096)
	for pos := off; pos < end; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return pos + int64(i) + 1
		}
		if err != nil {
			return end
		}
		pos += int64(n)
	}
	return end
}

// Pods are the UIDs of the pods whose logs are kept.
func (k *Kept) Pods() ([]string, error) {
	ents, err := os.ReadDir(k.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the kept logs: %w", err)
	}
	var uids []string
	for _, e := range ents {
		if e.IsDir() {
			uids = append(uids, e.Name())
		}
	}
	return uids, nil
}

// Remove removes the pod's kept logs.
func (k *Kept) Remove(uid string) error {
	p, err := k.path(uid, "x")
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Dir(p)); err != nil {
		return fmt.Errorf("remove the kept logs of pod %s: %w", uid, err)
	}
	return nil
}
