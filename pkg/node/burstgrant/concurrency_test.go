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

package burstgrant

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// Claims asking at once (each over its own socket) never get more than the
// GPU has between them.
func TestConcurrentGrants(t *testing.T) {
	f := newFixture(t)
	const n = 8
	uids := make([]types.UID, n)
	for i := range uids {
		uids[i] = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		require.NoError(t, f.book.AddClaim(Claim{UID: uids[i], Path: filepath.Join(f.dir, string(uids[i])),
			Shares: map[string]Share{uuid0: {Guarantee: gib, Limit: 16 * gib}}}))
	}
	var wg sync.WaitGroup
	for i, uid := range uids {
		wg.Go(func() {
			for j := range 200 {
				if j%3 == 2 {
					_, _ = f.book.Shrink(uid, uuid0, gib+uint64(j%5)*ChunkBytes, time.Now(), nil)
					continue
				}
				_, _ = f.book.Grant(uid, uuid0, uint64(1+(i+j)%24)*ChunkBytes)
			}
		})
	}
	wg.Wait()
	booked, usable := f.book.Booked(uuid0)
	assert.LessOrEqual(t, booked, usable)
	var sum uint64
	for _, uid := range uids {
		var inFile uint64 // no file: never granted
		if _, err := os.Stat(filepath.Join(f.dir, string(uid))); err == nil {
			inFile = f.file(uid)[uuid0]
		}
		sum += gib + inFile
		assert.Equal(t, inFile, f.book.Grants(uid)[uuid0], "the last file written is the book's grant")
	}
	assert.LessOrEqual(t, sum, usable)
}
