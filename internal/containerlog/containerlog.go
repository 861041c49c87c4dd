// Package containerlog reads a container's output from its SMF service
// log, as `kubectl logs` reads a container's: the lines of its current run
// (or the previous one), without svc.startd's own lines unless asked, the
// last N of them or those of the last seconds, and, when following, the
// lines written afterwards until the run ends.
//
// A service log (illumos-cli-spec 15.7) holds the method's output
// unprefixed and svc.startd's lines "[ Jan  5 10:12:30 MESSAGE ]". A run
// begins at a line "Executing start method (...)."; the previous run is
// the segment before the last such line.
//
// Times: svc.startd's lines carry their time (to the second, no year, in
// the host's time zone). A container's line carries none, so it is given
// the latest time it can have been written: that of the next svc.startd
// line after it, or, after the last one, the file's modification time.
// SinceTime keeps the lines whose time is not before it, so it may show
// older lines but never hides a newer one. Lines read while following
// carry the time they were read.
package containerlog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// MaxLineBytes is the longest line handled as one: a longer one is cut
// into pieces of this length.
const MaxLineBytes = 64 << 10

// PollInterval is how often a followed log is looked at again.
const PollInterval = 200 * time.Millisecond

// ErrNoPrevious is the answer for the previous run of a container that
// has run only once.
var ErrNoPrevious = errors.New("the container has no previous run")

// Options say which lines to write and how.
type Options struct {
	// Previous selects the run before the current one.
	Previous bool
	// TailLines keeps the last N selected lines; negative: all.
	TailLines int64
	// SinceTime keeps the lines written at or after it (see the package
	// comment); zero: all.
	SinceTime time.Time
	// Timestamps prefixes each line with its time (RFC 3339) and a space.
	Timestamps bool
	// SMFLines keeps svc.startd's own lines.
	SMFLines bool
	// Follow keeps writing the lines written afterwards, until the run
	// ends, ctx ends, or Ended says so.
	Follow bool
	// Ended is asked at each look while following (the zone stopped, the
	// file was replaced); nil: never.
	Ended func() bool
	// Location is the time zone of svc.startd's lines; nil: time.Local.
	Location *time.Location
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// marker is one of svc.startd's lines.
type marker struct {
	off, end int64
	t        time.Time
	msg      string
}

// Write writes the log in f as opts ask to w, flushing w (when it can
// be) after each batch.
func Write(ctx context.Context, w io.Writer, f *os.File, opts Options) error {
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	markers, err := index(f, size, opts)
	if err != nil {
		return err
	}
	start, end, err := segment(markers, size, opts.Previous)
	if err != nil {
		return err
	}
	follow := opts.Follow && !opts.Previous && !ended(markers, start)
	if follow {
		end = lastLineEnd(f, start, end)
	}
	mtime := fi.ModTime()
	out := bufio.NewWriterSize(w, 32<<10)
	skip := int64(0)
	if opts.TailLines >= 0 {
		n, err := each(f, start, end, markers, mtime, opts, func([]byte, time.Time) error { return nil })
		if err != nil {
			return err
		}
		skip = max(n-opts.TailLines, 0)
	}
	_, err = each(f, start, end, markers, mtime, opts, func(line []byte, t time.Time) error {
		if skip > 0 {
			skip--
			return nil
		}
		return writeLine(out, line, t, opts.Timestamps)
	})
	if err != nil {
		return err
	}
	if err := flush(out, w); err != nil || !follow {
		return err
	}
	return followFrom(ctx, out, w, f, end, opts)
}

// index finds svc.startd's lines.
func index(f *os.File, size int64, opts Options) ([]marker, error) {
	var ms []marker
	err := scan(f, 0, size, func(line []byte, off, end int64) error {
		if msg, t, ok := ParseStartdLine(line, opts.Now(), opts.Location); ok {
			ms = append(ms, marker{off: off, end: end, t: t, msg: msg})
		}
		return nil
	})
	return ms, err
}

// IsRunStart says whether a svc.startd message begins a run.
func IsRunStart(msg string) bool { return strings.HasPrefix(msg, "Executing start method") }

// IsRunEnd says whether a svc.startd message ends a run: the start
// method (the container) exited or was stopped, or the next run began.
func IsRunEnd(msg string) bool {
	return strings.HasPrefix(msg, `Method "start" exited`) || strings.HasPrefix(msg, `Method "start" failed`) ||
		strings.HasPrefix(msg, "Stopping because") || IsRunStart(msg)
}

// segment is the byte range of the current run (or the previous one).
func segment(ms []marker, size int64, previous bool) (start, end int64, err error) {
	var runs []int64
	for _, m := range ms {
		if IsRunStart(m.msg) {
			runs = append(runs, m.off)
		}
	}
	if !previous {
		if len(runs) == 0 {
			return 0, size, nil
		}
		return runs[len(runs)-1], size, nil
	}
	if len(runs) < 2 {
		return 0, 0, ErrNoPrevious
	}
	return runs[len(runs)-2], runs[len(runs)-1], nil
}

// ended says whether the run starting at start has already ended.
func ended(ms []marker, start int64) bool {
	for _, m := range ms {
		if m.off > start && IsRunEnd(m.msg) {
			return true
		}
	}
	return false
}

// lastLineEnd is where the last complete line before end ends: a line
// still being written is left to the follower.
func lastLineEnd(f *os.File, start, end int64) int64 {
	buf := make([]byte, 4096)
	for pos := end; pos > start; {
		n := min(int64(len(buf)), pos-start)
		if _, err := f.ReadAt(buf[:n], pos-n); err != nil {
			return end
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return pos - n + int64(i) + 1
		}
		pos -= n
	}
	return start
}

// each calls fn for every selected line of [start, end) with its time,
// and returns how many it selected.
func each(f *os.File, start, end int64, ms []marker, mtime time.Time, opts Options, fn func([]byte, time.Time) error) (int64, error) {
	var n int64
	next := 0 // the first marker at or after the line
	err := scan(f, start, end, func(line []byte, off, _ int64) error {
		for next < len(ms) && ms[next].off < off {
			next++
		}
		var t time.Time
		isMarker := next < len(ms) && ms[next].off == off
		switch {
		case isMarker:
			if !opts.SMFLines {
				return nil
			}
			t = ms[next].t
		case next < len(ms):
			t = ms[next].t.Add(time.Second) // startd's times are cut to the second
		default:
			t = mtime
		}
		if !opts.SinceTime.IsZero() && t.Before(opts.SinceTime) {
			return nil
		}
		n++
		return fn(line, t)
	})
	return n, err
}

// scan calls fn for every line of [start, end), without its newline,
// with its offset and the offset after it.
func scan(f *os.File, start, end int64, fn func(line []byte, off, end int64) error) error {
	r := bufio.NewReaderSize(io.NewSectionReader(f, start, end-start), MaxLineBytes)
	off := start
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 {
			next := off + int64(len(line))
			if ferr := fn(bytes.TrimSuffix(line, []byte("\n")), off, next); ferr != nil {
				return ferr
			}
			off = next
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// followFrom writes the lines appended after off until the run ends.
func followFrom(ctx context.Context, out *bufio.Writer, w io.Writer, f *os.File, off int64, opts Options) error {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	buf := make([]byte, 32<<10)
	var partial []byte
	for {
		n, err := f.ReadAt(buf, off)
		if n > 0 {
			off += int64(n)
			data := append(partial, buf[:n]...)
			partial = nil
			done := false
			for len(data) > 0 && !done {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					if len(data) < MaxLineBytes {
						partial = append([]byte(nil), data...)
						break
					}
					i = MaxLineBytes
				}
				line := data[:i]
				data = data[min(i+1, len(data)):]
				now := opts.Now()
				if msg, t, ok := ParseStartdLine(line, now, opts.Location); ok {
					if opts.SMFLines {
						if err := writeLine(out, line, t, opts.Timestamps); err != nil {
							return err
						}
					}
					done = IsRunEnd(msg)
					continue
				}
				if err := writeLine(out, line, now, opts.Timestamps); err != nil {
					return err
				}
			}
			if err := flush(out, w); err != nil || done {
				return err
			}
			if n == len(buf) {
				continue // more may be waiting
			}
		} else if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if opts.Ended != nil && opts.Ended() {
			return nil
		}
	}
}

func writeLine(out *bufio.Writer, line []byte, t time.Time, timestamps bool) error {
	if timestamps {
		out.WriteString(t.UTC().Format(time.RFC3339Nano))
		out.WriteByte(' ')
	}
	out.Write(line)
	return out.WriteByte('\n')
}

func flush(out *bufio.Writer, w io.Writer) error {
	if err := out.Flush(); err != nil {
		return err
	}
	if fl, ok := w.(interface{ Flush() }); ok {
		fl.Flush()
	}
	return nil
}

// startdTime is the layout of svc.startd's time: "%b %e %T".
const startdTime = "Jan _2 15:04:05"

// ParseStartdLine reads one of svc.startd's lines, "[ Jan  5 10:12:30
// MESSAGE ]": its message and time (in loc, in the year that puts it
// no later than a day after now).
func ParseStartdLine(line []byte, now time.Time, loc *time.Location) (msg string, t time.Time, ok bool) {
	const head = len("[ ") + len(startdTime) + len(" ")
	if len(line) < head+len(" ]") || !bytes.HasPrefix(line, []byte("[ ")) || !bytes.HasSuffix(line, []byte(" ]")) || line[head-1] != ' ' {
		return "", time.Time{}, false
	}
	t, err := time.ParseInLocation(startdTime, string(line[2:head-1]), loc)
	if err != nil {
		return "", time.Time{}, false
	}
	year := now.In(loc).Year()
	t = time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, loc)
	if t.After(now.Add(24 * time.Hour)) {
		t = t.AddDate(-1, 0, 0)
	}
	return string(line[head : len(line)-2]), t, true
}

// Path is the service log of SMF service svc (without "svc:/"), instance
// default, relative to a zone's root (spec 15.7).
func Path(service string) string {
	return fmt.Sprintf("var/svc/log/%s:default.log", strings.ReplaceAll(service, "/", "-"))
}
