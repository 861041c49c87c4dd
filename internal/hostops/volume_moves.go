package hostops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/progress"
	"github.com/zonewright/zonewright/internal/transfer"
)

func checkTransfer(t *hostapi.ClaimTransfer) error {
	if t.Snapshot == "" || t.Ticket.URL == "" || t.Ticket.ID == "" {
		return errors.New("a claim transfer needs a snapshot and a ticket")
	}
	return nil
}

// transferSnapshot is the claim's dataset and the full name of the
// snapshot a transfer moves, or an InvalidError for a transfer no claim of
// this node's can make.
func (h *Host) transferSnapshot(in *hostapi.ClaimTransfer) (ds, snap string, err error) {
	if ds, err = h.claimDataset(&in.Claim); err == nil {
		err = checkTransfer(in)
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
func (h *Host) SendClaimVolume(ctx context.Context, in hostapi.ClaimTransfer) (hostapi.ClaimTransferResult, error) {
	_, snap, err := h.transferSnapshot(&in)
	if err != nil {
		return hostapi.ClaimTransferResult{}, err
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
		return hostapi.ClaimTransferResult{}, &Error{What: fmt.Sprintf("send %s of claim %s from node %s", snap, in.Claim.Name, h.Node), Err: err}
	}
	n := body.n.Load()
	h.log().Info("claim volume sent", "claim", in.Claim.Name, "snapshot", snap, "incremental", in.From != "", "bytes", n,
		"took", time.Since(start).Round(time.Millisecond))
	return hostapi.ClaimTransferResult{Bytes: n}, nil
}

// ReceiveClaimVolume downloads the stream from the relay into the claim's
// dataset, <VolumesDataset>/<claim uid> mounted at its own name as on the
// node it comes from. A snapshot already received is skipped. A full
// stream replaces a dataset left by an earlier attempt: the claim is not
// on this node yet, so no pod uses it. An incremental one rolls the
// dataset back to From first (-F).
func (h *Host) ReceiveClaimVolume(ctx context.Context, in hostapi.ClaimTransfer) (hostapi.ClaimTransferResult, error) {
	ds, snap, err := h.transferSnapshot(&in)
	if err != nil {
		return hostapi.ClaimTransferResult{}, err
	}
	fail := func(err error) (hostapi.ClaimTransferResult, error) {
		return hostapi.ClaimTransferResult{}, &Error{What: fmt.Sprintf("receive %s of claim %s on node %s", snap, in.Claim.Name, h.Node), Err: err}
	}
	zfs := h.Host.ZFS()
	if ok, err := zfs.Exists(ctx, snap); err != nil {
		return fail(err)
	} else if ok {
		return hostapi.ClaimTransferResult{Skipped: true}, nil
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
	return hostapi.ClaimTransferResult{Bytes: n}, nil
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
	return progress.Every(ctx, h.heartbeatInterval(), func() {
		beat(ctx, hostapi.ClaimTransferProgress{Transfer: id, Bytes: c.n.Load()})
	})
}
