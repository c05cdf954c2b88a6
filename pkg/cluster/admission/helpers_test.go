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
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// reviewBody is a real admission.k8s.io/v1 AdmissionReview as the API
// server sends it.
func reviewBody(t testing.TB, kind metav1.GroupVersionKind, op admissionv1.Operation, namespace string, obj any, dryRun bool) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("review-uid"),
			Kind:      kind,
			Resource:  metav1.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: "things"},
			Namespace: namespace,
			Name:      "obj",
			Operation: op,
			Object:    runtime.RawExtension{Raw: raw},
			DryRun:    ptr.To(dryRun),
		},
	}
	body, err := json.Marshal(review)
	require.NoError(t, err)
	return body
}

// serve starts an httptest server for one webhook.
func serve(t testing.TB, admit AdmitFunc) *httptest.Server {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	if _, ok := t.(*testing.B); ok {
		// Per-request test logs would dominate the measured latency.
		logger = logr.Discard()
	}
	h := Handler("test", admit, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(klogContext(r, logger)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// post sends a review and decodes the response review.
func post(t testing.TB, srv *httptest.Server, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var review admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&review))
	require.Equal(t, "AdmissionReview", review.Kind)
	require.NotNil(t, review.Response)
	require.Equal(t, types.UID("review-uid"), review.Response.UID, "response must echo the request UID")
	return review.Response
}
