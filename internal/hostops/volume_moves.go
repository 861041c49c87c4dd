package hostops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/transfer"
)

// ClaimTransfer is one stream of a claim's move: snapshot Snapshot of the
// claim's dataset, whole or (From set) what changed since snapshot From,
// through the control plane's relay.
type ClaimTransfer struct {
	Claim    ClaimVolume
	Snapshot string
	From     string `json:",omitempty"`
	Ticket   transfer.Ticket
	// Props are set on what a full stream makes (ClaimDatasetProps, for a
	// clone copied from another node's snapshot).
	Props map[string]string `json:",omitempty"`
}

// ClaimTransferResult says how much moved; Skipped: it was there already.
type ClaimTransferResult struct {
	Bytes   int64
	Skipped bool `json:",omitempty"`
}

// ClaimTransferProgress is what the transfers report as progress.
type ClaimTransferProgress struct {
	Transfer string
	Bytes    int64
}

func (t *ClaimTransfer) check() error {
	if t.Snapshot == "" || t.Ticket.URL == "" || t.Ticket.ID == "" {
		return errors.New("a claim transfer needs a snapshot and a ticket")
	}
	return nil
}

// transferSnapshot is the claim's dataset and the full name of the
// snapshot a transfer moves, or an InvalidError for a transfer no claim of
// this node's can make.
func (h *Host) transferSnapshot(in *ClaimTransfer) (ds, snap string, err error) {
	if ds, err = h.claimDataset(&in.Claim); err == nil {
		err = in.check()
	}
	if err != nil {
		return "", "", &InvalidError{Err: err}
	}
	return ds, ds + "@" + in.Snapshot, nil
}

// SendClaimVolume takes nothing: it streams the snapshot (zfs send, or
// send -i From) to the relay as zfs writes it, reporting the bytes sent.
// It can be run again from the start at any time: the relay keeps the
// last complete upload only.
func (h *Host) SendClaimVolume(ctx context.Context, in ClaimTransfer) (ClaimTransferResult, error) {
	_, snap, err := h.transferSnapshot(&in)
	if err != nil {
		return ClaimTransferResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	zfs := h.Host.ZFS()
	go func() {
		var err error
		if in.From == "" {
			err = zfs.Send(ctx, snap, pw)
		} else {
			err = zfs.SendIncremental(ctx, "@"+in.From, snap, pw)
		}
		pw.CloseWithError(err)
		sent <- err
	}()
	body := &countingReader{r: pr}
	stop := h.transferBeats(ctx, in.Ticket.ID, body)
	start := time.Now()
	err = transfer.Put(ctx, h.api(), in.Ticket, body)
	if err != nil {
		pr.CloseWithError(err)
		cancel()
	}
	serr := <-sent
	stop()
	if serr != nil && (err == nil || !errors.Is(serr, context.Canceled)) {
		err = serr // the send, not the upload it starved, is the cause
	}
	if err != nil {
		return ClaimTransferResult{}, &Error{What: fmt.Sprintf("send %s of claim %s from node %s", snap, in.Claim.Name, h.Node), Err: err}
	}
	n := body.n.Load()
	h.log().Info("claim volume sent", "claim", in.Claim.Name, "snapshot", snap, "incremental", in.From != "", "bytes", n,
		"took", time.Since(start).Round(time.Millisecond))
	return ClaimTransferResult{Bytes: n}, nil
}

// ReceiveClaimVolume downloads the stream from the relay into the claim's
// dataset, <VolumesDataset>/<claim uid> mounted at its own name as on the
// node it comes from. A snapshot already received is skipped. A full
// stream replaces a dataset left by an earlier attempt: the claim is not
// on this node yet, so no pod uses it. An incremental one rolls the
// dataset back to From first (-F).
func (h *Host) ReceiveClaimVolume(ctx context.Context, in ClaimTransfer) (ClaimTransferResult, error) {
	ds, snap, err := h.transferSnapshot(&in)
	if err != nil {
		return ClaimTransferResult{}, err
	}
	fail := func(err error) (ClaimTransferResult, error) {
		return ClaimTransferResult{}, &Error{What: fmt.Sprintf("receive %s of claim %s on node %s", snap, in.Claim.Name, h.Node), Err: err}
	}
	zfs := h.Host.ZFS()
	if ok, err := zfs.Exists(ctx, snap); err != nil {
		return fail(err)
	} else if ok {
		return ClaimTransferResult{Skipped: true}, nil
	}
	opts := illumos.ReceiveOptions{Force: true}
	if in.From == "" {
		if ok, err := zfs.Exists(ctx, ds); err != nil {
			return fail(err)
		} else if ok {
			h.log().Warn("replacing an earlier attempt's copy of a claim before receiving it", "claim", in.Claim.Name, "dataset", ds)
			if err := zfs.Destroy(ctx, ds); err != nil && !errors.Is(err, illumos.ErrNotFound) {
				return fail(err)
			}
		}
		opts.Props = map[string]string{}
		for k, v := range in.Props {
			opts.Props[k] = v
		}
		if !in.Claim.Block {
			// A stream carries no properties: the copy gets the mount
			// options of every claim's filesystem here.
			opts.Props = withVolumeMountProps(opts.Props)
			opts.Props["mountpoint"] = "/" + ds
		}
	}
	rc, _, err := transfer.Get(ctx, h.api(), in.Ticket)
	if err != nil {
		return fail(err)
	}
	defer rc.Close()
	body := &countingReader{r: rc}
	stop := h.transferBeats(ctx, in.Ticket.ID, body)
	start := time.Now()
	err = zfs.Receive(ctx, snap, body, opts)
	stop()
	if err != nil {
		return fail(err)
	}
	n := body.n.Load()
	h.log().Info("claim volume received", "claim", in.Claim.Name, "snapshot", snap, "incremental", in.From != "", "bytes", n,
		"took", time.Since(start).Round(time.Millisecond))
	return ClaimTransferResult{Bytes: n}, nil
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// transferBeats reports a transfer's bytes every heartbeat interval
// until stop is called.
func (h *Host) transferBeats(ctx context.Context, id string, c *countingReader) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(h.heartbeatInterval())
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat(ctx, ClaimTransferProgress{Transfer: id, Bytes: c.n.Load()})
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
