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

package inspect

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A caller bounds an explanation with its context (kubectl vgpu ui gives
// each a deadline): Why stops and says so instead of going through every
// node.
func TestWhyStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Why(ctx, cluster(), "team-b", "big")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "explain pod team-b/big")
}
