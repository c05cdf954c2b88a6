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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
)

// writePair writes a fresh self-signed pair for 127.0.0.1 with the serial.
func writePair(t *testing.T, dir string, serial int64) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "vgpu-dra-controller"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// servedSerial connects and returns the serial of the certificate served.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test inspects whatever is served
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestServeRotatesCertificateWithoutRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, 1)

	// Pick a free port, then serve on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	done, err := Serve(ctx, ServerOptions{Address: addr, CertFile: certFile, KeyFile: keyFile, ReloadInterval: 20 * time.Millisecond, ShutdownGrace: time.Second},
		http.NotFoundHandler())
	require.NoError(t, err)
	assert.Equal(t, int64(1), servedSerial(t, addr))

	writePair(t, dir, 2)
	assert.Eventually(t, func() bool { return servedSerial(t, addr) == 2 }, 5*time.Second, 20*time.Millisecond)

	// A half-written rotation (certificate without its key) keeps the
	// previous pair.
	good, err := os.ReadFile(certFile)
	require.NoError(t, err)
	other := t.TempDir()
	writePair(t, other, 3)
	newCert, err := os.ReadFile(filepath.Join(other, "tls.crt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, newCert, 0o600))
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, int64(2), servedSerial(t, addr))
	require.NoError(t, os.WriteFile(certFile, good, 0o600))

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop")
	}
}

func TestCertReloaderErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := NewCertReloader(filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.crt")

	certFile, keyFile := writePair(t, dir, 1)
	require.NoError(t, os.WriteFile(keyFile, []byte("garbage"), 0o600))
	_, err = NewCertReloader(certFile, keyFile)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TLS key pair")

	certFile, keyFile = writePair(t, dir, 5)
	r, err := NewCertReloader(certFile, keyFile)
	require.NoError(t, err)
	changed, err := r.Reload()
	require.NoError(t, err)
	assert.False(t, changed, "same contents are not reloaded")
}
