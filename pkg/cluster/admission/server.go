/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Paths the webhook configurations point at.
const (
	ValidateClaimsPath = "/validate-resourceclaims"
	MutatePodsPath     = "/mutate-pods"
)

// ServerOptions configure the HTTPS server.
type ServerOptions struct {
	Address        string
	CertFile       string
	KeyFile        string
	ReloadInterval time.Duration
	ShutdownGrace  time.Duration
}

// Serve serves handler over HTTPS until ctx ends, then drains in-flight
// requests for the shutdown grace period. It returns once the listener is
// up; the returned channel reports the server's end.
func Serve(ctx context.Context, o ServerOptions, handler http.Handler) (<-chan error, error) {
	logger := klog.FromContext(ctx)
	certs, err := NewCertReloader(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return nil, fmt.Errorf("webhook address %q: %w", o.Address, err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate},
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go certs.Run(ctx, o.ReloadInterval)
	done := make(chan error, 1)
	go func() {
		err := srv.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownGrace)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			logger.Error(err, "Webhook server shutdown")
		}
	}()
	logger.Info("Serving admission webhooks", "address", ln.Addr().String(), "cert", o.CertFile)
	return done, nil
}
