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
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// maxReviewBytes bounds a request body. The API server caps objects at
// 3 MiB and a review carries at most the object and its old version.
const maxReviewBytes = 7 << 20

// AdmitFunc decides one admission request. It never returns nil.
type AdmitFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Metrics observes admissions.
type Metrics struct {
	duration *prometheus.HistogramVec
}

// NewMetrics registers the webhook metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vgpu_dra_webhook_admission_duration_seconds",
		Help:    "Time to decide one admission request, by webhook and outcome.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"webhook", "allowed"})}
	if err := reg.Register(m.duration); err != nil {
		return nil, fmt.Errorf("register webhook metrics: %w", err)
	}
	return m, nil
}

// Handler serves AdmissionReview (admission.k8s.io/v1) requests with admit.
// Malformed requests get an HTTP error, never a panic; name labels logs and
// metrics. metrics may be nil.
func Handler(name string, admit AdmitFunc, metrics *Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		logger := klog.FromContext(r.Context()).WithName(name)
		if r.Method != http.MethodPost {
			http.Error(w, "admission reviews must be POSTed", http.StatusMethodNotAllowed)
			return
		}
		if mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mediaType != "application/json" {
			http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
		if err != nil {
			http.Error(w, fmt.Sprintf("read request body: %v", err), http.StatusRequestEntityTooLarge)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil {
			http.Error(w, fmt.Sprintf("decode AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		if gvk := review.GroupVersionKind(); gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
			http.Error(w, fmt.Sprintf("expected admission.k8s.io/v1 AdmissionReview, got %q %q", review.APIVersion, review.Kind), http.StatusBadRequest)
			return
		}
		if review.Request == nil {
			http.Error(w, "AdmissionReview has no request", http.StatusBadRequest)
			return
		}
		req := review.Request
		logger = logger.WithValues("uid", req.UID, "kind", req.Kind.Kind, "object", klog.KRef(req.Namespace, req.Name), "operation", req.Operation)
		ctx := klog.NewContext(r.Context(), logger)

		resp := admit(ctx, req)
		resp.UID = req.UID
		out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
		if err != nil {
			http.Error(w, fmt.Sprintf("encode AdmissionReview: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write(out); err != nil {
			logger.V(2).Info("Writing admission response failed", "err", err)
		}
		elapsed := time.Since(start)
		if metrics != nil {
			metrics.duration.WithLabelValues(name, strconv.FormatBool(resp.Allowed)).Observe(elapsed.Seconds())
		}
		if resp.Allowed {
			logger.V(4).Info("Admitted", "patched", len(resp.Patch) > 0, "duration", elapsed)
		} else {
			logger.V(2).Info("Denied", "reason", resp.Result.Message, "duration", elapsed)
		}
	})
}

func allowed(warnings ...string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

func denied(code int32, reason metav1.StatusReason, message string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message},
	}
}
