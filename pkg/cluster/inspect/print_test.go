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
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shortWriter accepts limit bytes, then fails, like a closed pipe.
type shortWriter struct{ limit int }

var errShort = errors.New("pipe closed")

func (w *shortWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		n := w.limit
		w.limit = 0
		return n, errShort
	}
	w.limit -= len(p)
	return len(p), nil
}

// Every printer reports a failed write, wherever in the output it happens.
func TestPrintersReportWriteErrors(t *testing.T) {
	exp, err := Why(t.Context(), cluster(), "team-b", "big")
	require.NoError(t, err)
	require.NotEmpty(t, exp.Suggestion, "the fixture's explanation ends with a suggestion")
	snap := cluster()
	printers := map[string]func(out io.Writer) error{
		"why":    func(out io.Writer) error { return PrintWhy(out, exp, true) },
		"nodes":  func(out io.Writer) error { return PrintNodes(out, Nodes(snap), true) },
		"claims": func(out io.Writer) error { return PrintClaims(out, Claims(snap, ""), true, true) },
	}
	for name, print := range printers {
		var full bytes.Buffer
		require.NoError(t, print(&full))
		size := full.Len()
		for _, limit := range []int{0, size / 2, size - 1} {
			assert.ErrorIs(t, print(&shortWriter{limit: limit}), errShort, "%s with %d of %d bytes written", name, limit, size)
		}
	}
}
