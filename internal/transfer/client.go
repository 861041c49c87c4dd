package transfer

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// URL is where transfer id's stream is uploaded and downloaded, below
// the API's base URL.
func URL(base, id string) string {
	return strings.TrimSuffix(base, "/") + "/api/v1/volumetransfers/" + url.PathEscape(id)
}

// Ticket is what a node needs to move one stream through the relay; its
// certificate on the client is what the API authorises.
type Ticket struct {
	ID  string
	URL string
}

// Put uploads r as the ticket's stream; it returns once the relay holds
// it whole.
func Put(ctx context.Context, c *http.Client, t Ticket, r io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, t.URL, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := client(c).Do(req)
	if err != nil {
		return fmt.Errorf("upload volume transfer %s: %w", t.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return statusError("upload", t.ID, resp)
	}
	return nil
}

// Get opens the ticket's stream for reading. A stream not uploaded yet is
// an error like any other: the caller retries.
func Get(ctx context.Context, c *http.Client, t Ticket) (io.ReadCloser, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := client(c).Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("download volume transfer %s: %w", t.ID, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, 0, statusError("download", t.ID, resp)
	}
	return resp.Body, resp.ContentLength, nil
}

func client(c *http.Client) *http.Client {
	if c == nil {
		return http.DefaultClient
	}
	return c
}

func statusError(verb, id string, resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("%s volume transfer %s: %s: %s", verb, id, resp.Status, strings.TrimSpace(string(msg)))
}
