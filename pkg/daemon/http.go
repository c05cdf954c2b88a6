package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// ServeHTTP serves handler on addr until ctx ends. The returned function
// shuts the server down, giving in-flight requests up to grace.
func ServeHTTP(ctx context.Context, addr string, handler http.Handler) (func(grace time.Duration), error) {
	logger := klog.FromContext(ctx)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http-address %q: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "HTTP server failed", "address", addr)
		}
	}()
	logger.Info("Serving HTTP", "address", ln.Addr().String())
	return func(grace time.Duration) {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			logger.Error(err, "HTTP server shutdown")
		}
	}, nil
}
