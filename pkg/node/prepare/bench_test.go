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

package prepare

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// BenchmarkPrepare measures one PrepareResourceClaims call with n new claims
// (config, region, CDI spec with GPU edits from a vendor spec, two
// checkpoint writes per call). Unprepare runs outside the timer.
func BenchmarkPrepare(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			env := newTestEnv(b)
			m := env.newManager(b)
			ctx := context.Background() // klog defaults: no per-claim debug logging in the measurement
			claims := make([]*resourceapi.ResourceClaim, n)
			objs := make([]kubeletplugin.NamespacedObject, n)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for i := range claims {
					claims[i] = newClaim(uuid.NewString(), "bench").result("r", "gpu-0", "256Mi", "1", uuid.NewString()).obj()
					objs[i] = kubeletplugin.NamespacedObject{UID: claims[i].UID}
				}
				b.StartTimer()
				results, err := m.PrepareResourceClaims(ctx, claims)
				b.StopTimer()
				require.NoError(b, err)
				for _, r := range results {
					require.NoError(b, r.Err)
				}
				_, err = m.UnprepareResourceClaims(ctx, objs)
				require.NoError(b, err)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/claim")
		})
	}
}
