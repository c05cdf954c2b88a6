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
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
)

func klogContext(r *http.Request, logger logr.Logger) context.Context {
	return klog.NewContext(r.Context(), logger)
}

func TestHandlerRejectsMalformedRequests(t *testing.T) {
	called := false
	srv := serve(t, func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		called = true
		return allowed()
	})
	tests := []struct {
		name        string
		method      string
		contentType string
		body        string
		wantCode    int
		wantBody    string
	}{
		{name: "GET", method: http.MethodGet, contentType: "application/json", wantCode: http.StatusMethodNotAllowed, wantBody: "POST"},
		{name: "YAML", method: http.MethodPost, contentType: "application/yaml", body: "{}", wantCode: http.StatusUnsupportedMediaType, wantBody: "application/json"},
		{name: "no content type", method: http.MethodPost, body: "{}", wantCode: http.StatusUnsupportedMediaType},
		{name: "not JSON", method: http.MethodPost, contentType: "application/json", body: "request: x", wantCode: http.StatusBadRequest, wantBody: "decode AdmissionReview"},
		{name: "wrong kind", method: http.MethodPost, contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}`, wantCode: http.StatusBadRequest, wantBody: `"Pod"`},
		{name: "v1beta1", method: http.MethodPost, contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}`, wantCode: http.StatusBadRequest, wantBody: "v1beta1"},
		{name: "no request", method: http.MethodPost, contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, wantCode: http.StatusBadRequest, wantBody: "no request"},
		{name: "too large", method: http.MethodPost, contentType: "application/json", body: `{"x":"` + strings.Repeat("a", maxReviewBytes) + `"}`, wantCode: http.StatusRequestEntityTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL, strings.NewReader(tc.body))
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.wantCode, resp.StatusCode, string(body))
			assert.Contains(t, string(body), tc.wantBody)
		})
	}
	assert.False(t, called, "no malformed request reaches the admission logic")
}

func TestHandlerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	h := Handler("claims", func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return denied(http.StatusForbidden, "Forbidden", "no")
	}, m)
	srv := serve(t, func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return allowed()
	})
	srv.Config.Handler = h
	resp := post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "ns", map[string]string{}, false))
	assert.False(t, resp.Allowed)
	assert.Equal(t, 1, testutil.CollectAndCount(reg, "vgpu_dra_webhook_admission_duration_seconds"))
	_, err = NewMetrics(reg)
	assert.Error(t, err, "double registration is reported")
}
