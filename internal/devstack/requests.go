package devstack

import (
	"context"
	"maps"
	"sync"

	"google.golang.org/grpc"
)

// requestCounter counts the calls the frontend serves, by full gRPC method
// name. It is a plain counter rather than the server's metrics, which
// would record in every service on every call: the count is wanted where
// the CPU of the same server is being measured.
type requestCounter struct {
	mu       sync.Mutex
	byMethod map[string]uint64
}

func newRequestCounter() *requestCounter {
	return &requestCounter{byMethod: map[string]uint64{}}
}

func (c *requestCounter) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c.mu.Lock()
	c.byMethod[info.FullMethod]++
	c.mu.Unlock()
	return handler(ctx, req)
}

func (c *requestCounter) snapshot() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byMethod)
}
