package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/portforward"
)

// forward is one LOCAL:REMOTE pair of port-forward.
type forward struct{ local, remote int }

// parseForward reads REMOTE, LOCAL:REMOTE or :REMOTE (a free local port).
func parseForward(s string) (forward, error) {
	local, remote, paired := strings.Cut(s, ":")
	if !paired {
		local, remote = s, s
	}
	port := func(p string, zeroOK bool) (int, error) {
		n, err := strconv.Atoi(p)
		if p == "" && zeroOK {
			return 0, nil
		}
		if err != nil || n < 0 || n > 65535 || (n == 0 && !zeroOK) {
			return 0, fmt.Errorf("%q: want [LOCAL_PORT:]REMOTE_PORT, ports from 1 to 65535", s)
		}
		return n, nil
	}
	r, err := port(remote, false)
	if err != nil {
		return forward{}, err
	}
	l, err := port(local, paired)
	if err != nil {
		return forward{}, err
	}
	return forward{local: l, remote: r}, nil
}

func (a *app) portForwardCommand() *cobra.Command {
	var address string
	cmd := &cobra.Command{
		Use:   "port-forward POD [LOCAL_PORT:]REMOTE_PORT [...]",
		Short: "Forward local ports to a pod's ports, through the API and the pod's node",
		Long: `Forward local ports to a pod's ports until interrupted. Each connection
to a local port is carried by the API to the pod's node, which connects to
the pod: a pod's address is reachable only from its node and other pods.`,
		Example: `  zwctl port-forward web 8080          # localhost:8080 to the pod's 8080
  zwctl port-forward pod/web 9000:80   # localhost:9000 to the pod's 80
  zwctl port-forward web :80           # a free local port, printed`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: a.completeNames("pods"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := podName(args[0])
			if err != nil {
				return err
			}
			var forwards []forward
			for _, s := range args[1:] {
				f, err := parseForward(s)
				if err != nil {
					return err
				}
				forwards = append(forwards, f)
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Refuse at once what every connection would be refused for.
			var pod model.Pod
			if err := c.Do(ctx, "GET", podPath(a.namespace(), name, ""), nil, nil, &pod); err != nil {
				return err
			}
			if pod.Status.Phase != model.PodRunning {
				return fmt.Errorf("pod %s is %s, not Running: nothing to forward to", name, cmp.Or(pod.Status.Phase, model.PodPending))
			}
			var listeners []net.Listener
			defer func() {
				for _, l := range listeners {
					l.Close()
				}
			}()
			for _, f := range forwards {
				l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(f.local)))
				if err != nil {
					return fmt.Errorf("listen for port %d: %w", f.remote, err)
				}
				listeners = append(listeners, l)
				fmt.Fprintf(a.out, "Forwarding from %s -> %d\n", l.Addr(), f.remote)
				u := c.URL(podPath(a.namespace(), name, "portforward"), url.Values{"port": {strconv.Itoa(f.remote)}})
				go a.serveForward(ctx, l, c.HTTP1Client(), u, f.remote)
			}
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "the local address to listen on")
	return cmd
}

// serveForward carries each connection l accepts to the pod's port.
func (a *app) serveForward(ctx context.Context, l net.Listener, client *http.Client, u string, remote int) {
	for {
		local, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer local.Close()
			fmt.Fprintf(a.out, "Handling connection for %d\n", remote)
			pod, err := portforward.Dial(ctx, client, u)
			if err != nil {
				fmt.Fprintf(a.errOut, "error forwarding port %d: %v\n", remote, refusal(err))
				return
			}
			portforward.Join(local, pod, ctx.Done())
		}()
	}
}
