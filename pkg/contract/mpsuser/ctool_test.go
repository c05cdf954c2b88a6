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

package mpsuser

import (
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

// coreDir is vgpu-core, relative to this package.
const coreDir = "../../../vgpu-core"

// cParser compiles vgpu-core/tools/mps-user-reply.c with libvgpu.so's
// reply parser; tests skip without gcc (fail under CI).
func cParser(t *testing.T) string {
	t.Helper()
	gcc := regiontest.Compiler(t, "the Go side cannot be checked against vgpu_mps_user.h")
	bin := filepath.Join(t.TempDir(), "mps-user-reply")
	out, err := exec.Command(gcc, "-std=gnu11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
		"-I", filepath.Join(coreDir, "include"), "-I", filepath.Join(coreDir, "src"), "-o", bin,
		filepath.Join(coreDir, "tools", "mps-user-reply.c"), filepath.Join(coreDir, "src", "mps_user_reply.c")).CombinedOutput()
	require.NoError(t, err, "compile vgpu-core/tools/mps-user-reply.c: %s", out)
	return bin
}

// goRead is what the Go side reads in msg, in the C tool's words.
func goRead(msg []byte) string {
	r, err := ParseReply(msg)
	if err != nil {
		return "invalid"
	}
	return strings.TrimSuffix(string(r.Encode()), "\n") + " | " + r.Message()
}

var (
	gpu = "GPU-00000000-1111-2222-3333-444444444444"
	// goldenReplies are what the plugin sends.
	goldenReplies = []Reply{
		{Allowed: true, AskerUID: 0},
		{Allowed: true, AskerUID: 4294967295},
		{Reason: ReasonUser, GPU: gpu, ServedUID: 1000, AskerUID: 2000},
		{Reason: ReasonUser, GPU: "GPU-ABCDEF", ServedUID: 0, AskerUID: 65534},
		{Reason: ReasonRequest},
		{Reason: ReasonLimit, Limit: 64},
	}
	// hostileReplies break the protocol; both sides must refuse every one.
	hostileReplies = []string{
		"",
		"\n",
		"allowed 1000",
		"allowed 1000\n\n",
		"allowed  1000\n",
		"allowed 01000\n",
		"allowed -1\n",
		"allowed +1\n",
		"allowed 4294967296\n",
		"allowed 99999999999\n",
		"allowed 1000 \n",
		" allowed 1000\n",
		"allowed 10\x0000\n",
		"allowed\n",
		"Allowed 1000\n",
		"granted 1000\n",
		"refused\n",
		"refused user\n",
		"refused user " + gpu + " 1000\n",
		"refused user " + gpu + " 1000 2000 3000\n",
		"refused user MIG-0123 1000 2000\n",
		"refused user GPU- 1000 2000\n",
		"refused user GPU-xyz0 1000 2000\n",
		"refused user GPU-" + strings.Repeat("a", 61) + " 1 2\n",
		"refused user gpu-0123 1000 2000\n",
		"refused limit\n",
		"refused limit 064\n",
		"refused request 1\n",
		"refused rate\n",
		"allowed 1000\r\n",
		"allowed 1" + strings.Repeat("0", 200) + "\n",
		strings.Repeat("x", 128) + "\n",
	}
)

// Both sides read every golden reply the same, and refuse every hostile
// one; the library sends the request the plugin accepts.
func TestCAndGoAgree(t *testing.T) {
	bin := cParser(t)
	var msgs [][]byte
	for _, r := range goldenReplies {
		msgs = append(msgs, r.Encode())
	}
	for _, h := range hostileReplies {
		msgs = append(msgs, []byte(h))
	}
	args := make([]string, len(msgs))
	for i, m := range msgs {
		args[i] = hex.EncodeToString(m)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, lines, len(msgs))
	for i, m := range msgs {
		want := goRead(m)
		assert.Equal(t, want, lines[i], "message %q", m)
		if i < len(goldenReplies) {
			assert.NotEqual(t, "invalid", want, "golden %q", m)
		} else {
			assert.Equal(t, "invalid", want, "hostile %q", m)
		}
	}
	req, err := exec.Command(bin, "--request").Output()
	require.NoError(t, err)
	sent, err := hex.DecodeString(strings.TrimSpace(string(req)))
	require.NoError(t, err)
	assert.NoError(t, ParseRequest(sent))
}

// The refusal of another user names the GPU, the served uid and the asker's.
func TestUserRefusalMessage(t *testing.T) {
	r, err := ParseReply([]byte("refused user " + gpu + " 1000 2000\n"))
	require.NoError(t, err)
	assert.Equal(t, "MPS on "+gpu+" serves uid 1000 until its clients end; this process runs as uid 2000", r.Message())
}

func TestParseRequest(t *testing.T) {
	require.NoError(t, ParseRequest([]byte("use\n")))
	for _, bad := range []string{"", "use", "use\n\n", "USE\n", "use 1\n", "grow GPU-1 1\n", strings.Repeat("u", 1000)} {
		assert.ErrorIs(t, ParseRequest([]byte(bad)), ErrMalformed, "%q", bad)
	}
}

func FuzzParseReply(f *testing.F) {
	for _, r := range goldenReplies {
		f.Add(r.Encode())
	}
	for _, h := range hostileReplies {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := ParseReply(msg)
		if err != nil {
			return
		}
		// What parses is written back unchanged.
		assert.Equal(t, string(msg), string(r.Encode()))
	})
}
