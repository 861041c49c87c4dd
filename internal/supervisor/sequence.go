package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SequenceFile is the file in the agent's state directory that keeps the
// highest report number the node may have issued.
const SequenceFile = "report-seq"

// sequenceBlock is how many numbers are reserved by one write of the
// file: the file is written once per block, not once per report.
const sequenceBlock = 1 << 20

// Sequence numbers a node's reports and watches. Every number is above
// every number issued before, across agent restarts and a wall clock
// stepped back: the numbers it may issue are reserved in its file before
// they are issued, a block at a time, and a restart continues above the
// reservation. Its methods are safe for concurrent use.
type Sequence struct {
	path  string // "" keeps nothing
	block uint64

	mu      sync.Mutex
	last    uint64 // the last number issued
	ceiling uint64 // the highest number reserved in the file
}

// OpenSequence continues the numbers kept in path (made when missing).
// now is the clock's reading: numbers start above it too, so a node whose
// numbers came from the clock before this file existed continues above
// them.
func OpenSequence(path string, now time.Time) (*Sequence, error) {
	var kept uint64
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read the report sequence: %w", err)
	default:
		if kept, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return nil, fmt.Errorf("report sequence %s holds %q, not a number: %w", path, b, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("report sequence: %w", err)
	}
	q := &Sequence{path: path, block: sequenceBlock, last: max(kept, clockSeq(now))}
	if err := q.reserve(); err != nil {
		return nil, err
	}
	return q, nil
}

// ClockSequence numbers from the clock and keeps nothing: a restart after
// the clock stepped back issues numbers below earlier ones. For a
// supervisor with no state directory.
func ClockSequence(now time.Time) *Sequence {
	return &Sequence{last: clockSeq(now)}
}

func clockSeq(now time.Time) uint64 { return uint64(max(now.UnixNano(), 0)) }

// Next issues the next number. The number is always good for this
// process; an error says it could not be reserved in the file, so a
// restart might issue it again (the reservation is tried again on the
// next call).
func (q *Sequence) Next() (uint64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.last++
	if q.path == "" || q.last <= q.ceiling {
		return q.last, nil
	}
	return q.last, q.reserve()
}

// reserve writes a new ceiling a block above the last number, atomically
// and durably, before any number under it is issued. Callers hold q.mu
// (or own q).
func (q *Sequence) reserve() error {
	ceiling := q.last + q.block
	dir := filepath.Dir(q.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(q.path)+".*")
	if err != nil {
		return fmt.Errorf("reserve report numbers: %w", err)
	}
	defer os.Remove(tmp.Name()) // once renamed, there is nothing to remove
	_, err = tmp.WriteString(strconv.FormatUint(ceiling, 10) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), q.path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("reserve report numbers in %s: %w", q.path, err)
	}
	q.ceiling = ceiling
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
