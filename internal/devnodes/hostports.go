package devnodes

import (
	"net"
	"net/url"
)

// hostPorts are the host:port addresses of URLs and addresses as given.
func hostPorts(urls []string, addrs ...string) ([]string, error) {
	out := append([]string(nil), addrs...)
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, err
		}
		hp := u.Host
		if u.Port() == "" {
			hp = net.JoinHostPort(u.Hostname(), map[string]string{"https": "443", "http": "80"}[u.Scheme])
		}
		out = append(out, hp)
	}
	return out, nil
}
