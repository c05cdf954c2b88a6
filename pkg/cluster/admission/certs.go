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
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// CertReloader serves a TLS certificate from files and picks up new file
// contents without a restart. It compares contents rather than modification
// times because Kubernetes updates a mounted Secret by swapping a symlink,
// which leaves the files' own times unreliable.
type CertReloader struct {
	certFile, keyFile string

	mu      sync.RWMutex
	cert    *tls.Certificate
	certPEM []byte
	keyPEM  []byte
}

// NewCertReloader loads the key pair once; an unusable pair is an error
// naming the files.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate is the tls.Config hook.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

// Reload reads the files and switches to their key pair if it changed.
// While a rotation is half written (new certificate, old key) the pair does
// not parse: the error is returned and the previous pair stays in use.
func (r *CertReloader) Reload() (bool, error) {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return false, fmt.Errorf("read TLS certificate %s: %w", r.certFile, err)
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return false, fmt.Errorf("read TLS key %s: %w", r.keyFile, err)
	}
	r.mu.RLock()
	unchanged := bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM)
	r.mu.RUnlock()
	if unchanged {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("TLS key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	r.mu.Lock()
	r.cert, r.certPEM, r.keyPEM = &cert, certPEM, keyPEM
	r.mu.Unlock()
	return true, nil
}

// Run checks the files every interval until ctx ends.
func (r *CertReloader) Run(ctx context.Context, interval time.Duration) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			changed, err := r.Reload()
			switch {
			case err != nil:
				logger.Error(err, "Keeping the previous TLS certificate")
			case changed:
				logger.Info("Loaded new TLS certificate", "cert", r.certFile)
			}
		}
	}
}
