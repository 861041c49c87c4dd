package host

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/interceptor"

	"github.com/zonewright/zonewright/internal/progress"
)

// KeepaliveEvery is how often a node's worker heartbeats the activities
// it runs (Keepalive): well inside the shortest heartbeat timeout the
// workflows give a host step (15 s).
const KeepaliveEvery = 5 * time.Second

// Keepalive heartbeats every activity of the worker every interval while
// it runs, repeating the details the activity last recorded itself, so
// that a step that reports no progress (a zone boot) can still carry a
// heartbeat timeout: a task whose worker died, or that never reached its
// worker (Temporal marks a task started when it hands it to a poll whose
// answer may be lost), is then retried after that timeout instead of
// holding its pod until StartToClose.
func Keepalive(every time.Duration) interceptor.WorkerInterceptor {
	return &keepalive{every: every}
}

type keepalive struct {
	interceptor.WorkerInterceptorBase
	every time.Duration
}

func (k *keepalive) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &keepaliveInbound{every: k.every}
	i.Next = next
	return i
}

// keepaliveInbound runs one activity with its keepalive beside it.
type keepaliveInbound struct {
	interceptor.ActivityInboundInterceptorBase
	every time.Duration
	out   interceptor.ActivityOutboundInterceptor // the next outbound: heartbeats sent as is

	mu      sync.Mutex
	details []any // the activity's last own heartbeat's
}

func (i *keepaliveInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	i.out = outbound
	o := &keepaliveOutbound{in: i}
	o.Next = outbound
	return i.Next.Init(o)
}

func (i *keepaliveInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	stop := progress.Every(ctx, i.every, func() {
		i.mu.Lock()
		details := i.details
		i.mu.Unlock()
		// The SDK throttles what is sent (at most every 0.8 of the
		// heartbeat timeout) and keeps the newest details.
		i.out.RecordHeartbeat(ctx, details...)
	})
	// No beat after the activity's answer: it would find the task gone.
	defer stop()
	return i.Next.ExecuteActivity(ctx, in)
}

// keepaliveOutbound notes the details of the activity's own heartbeats.
type keepaliveOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	in *keepaliveInbound
}

func (o *keepaliveOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	o.in.mu.Lock()
	o.in.details = details
	o.in.mu.Unlock()
	o.Next.RecordHeartbeat(ctx, details...)
}
