package auth

import "net/http"

// Bearer is a client transport that sends Token with every request over
// Next: a client of the API holding a token (operators' tools, tests).
type Bearer struct {
	Token string
	Next  http.RoundTripper
}

func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Next.RoundTrip(r)
}
