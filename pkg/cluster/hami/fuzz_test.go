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

package hami

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzTranslate checks that no pod makes Translate panic and that every
// accepted selector value stays inside its CEL string literal.
func FuzzTranslate(f *testing.F) {
	f.Add("1", "3000", "30", "", "0", "A100", "GPU-1234")
	f.Add("2", "", "", "50", "1", `x") || true || ("`, "")
	f.Add("0", "1.5", "-1", "101", "7", ",,", " , ")
	f.Fuzz(func(t *testing.T, count, memory, cores, percent, priority, gpuType, uuid string) {
		limits := corev1.ResourceList{}
		for name, v := range map[corev1.ResourceName]string{
			DefaultCountResource: count, DefaultMemoryResource: memory, DefaultCoresResource: cores,
			DefaultMemoryPercentageResource: percent, DefaultPriorityResource: priority,
		} {
			if q, err := resource.ParseQuantity(v); err == nil {
				limits[name] = q
			}
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationUseGPUType: gpuType, AnnotationNoUseGPUUUID: uuid}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: limits}}}},
		}
		tr, err := Translate("ns", pod, testConfig(), []Product{{Name: "NVIDIA H100", MemoryBytes: 80 << 30}})
		if err != nil || tr == nil {
			return
		}
		for _, tmpl := range tr.Templates {
			for _, req := range tmpl.Spec.Spec.Devices.Requests {
				if req.Exactly == nil {
					continue
				}
				for _, sel := range req.Exactly.Selectors {
					require.NotContains(t, sel.CEL.Expression, "||  ||", "empty alternative")
					require.NotContains(t, sel.CEL.Expression, `\"`, "an escaped quote means a value carried a quote")
				}
			}
		}
	})
}
