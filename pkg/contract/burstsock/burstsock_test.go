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

package burstsock

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstfile"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/contracttest"
)

const (
	gpu = "GPU-11111111-2222-3333-4444-555555555555"
	mig = "MIG-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"
)

// reasons are every refusal the server sends.
var reasons = []string{ReasonLimit, ReasonFull, ReasonReclaiming, ReasonNever, ReasonGPU, ReasonRequest, ReasonRate}

func TestParseRequest(t *testing.T) {
	for msg, want := range map[string]Request{
		"grow " + gpu + " 268435456\n":                            {GPU: gpu, Bytes: 268435456},
		"grow MIG-" + strings.ToUpper(mig[4:]) + " 1\n":           {GPU: "MIG-" + strings.ToUpper(mig[4:]), Bytes: 1},
		"grow " + mig + " 0\n":                                    {GPU: mig},
		fmt.Sprintf("grow %s %d\n", gpu, burstfile.MaxGrantBytes): {GPU: gpu, Bytes: burstfile.MaxGrantBytes},
	} {
		got, err := ParseRequest([]byte(msg))
		require.NoError(t, err, "%q", msg)
		assert.Equal(t, want, got, "%q", msg)
	}
}

// Any deviation is a malformed request (answered "refused request"): the
// server never guesses what a container meant.
func TestParseRequestRefusesHostileInput(t *testing.T) {
	for _, bad := range []string{
		"", "\n", "grow\n", "grow " + gpu + " 1", "grow " + gpu + " 01\n", "grow " + gpu + " -1\n", "grow " + gpu + " +1\n",
		"grow " + gpu + "  1\n", "grow " + gpu + " 1 \n", "Grow " + gpu + " 1\n", "grow " + gpu + " 1\r\n",
		"grow " + gpu + " 18446744073709551616\n", fmt.Sprintf("grow %s %d\n", gpu, burstfile.MaxGrantBytes+1),
		"grow gpu-x 1\n", "grow GPU- 1\n", "grow GPU-xyz 1\n", "grow " + gpu + " 1\n\n", "shrink " + gpu + " 1\n",
		"grow " + gpu + "\x00 1\n", strings.Repeat("x", 200), "grow " + gpu + " " + strings.Repeat("1", 100) + "\n",
		"grow GPU-" + strings.Repeat("a", 61) + " 1\n", "grow " + gpu + " 1\x00\n",
	} {
		got, err := ParseRequest([]byte(bad))
		assert.Error(t, err, "%q", bad)
		assert.Equal(t, Request{}, got, "%q", bad)
	}
}

// replies returns golden replies (what the server sends), hostile ones and
// single-byte mutations of both kinds.
func replies() map[string][]byte {
	in := map[string][]byte{
		"golden/granted 0":        Granted(0),
		"golden/granted max":      Granted(burstfile.MaxGrantBytes),
		"hostile/empty":           {},
		"hostile/newline":         []byte("\n"),
		"hostile/no newline":      []byte("granted 1"),
		"hostile/granted no n":    []byte("granted\n"),
		"hostile/granted sign":    []byte("granted +1\n"),
		"hostile/granted zero":    []byte("granted 01\n"),
		"hostile/granted two":     []byte("granted 1 2\n"),
		"hostile/granted space":   []byte("granted  1\n"),
		"hostile/granted CR":      []byte("granted 1\r\n"),
		"hostile/granted NUL":     []byte("granted 1\x00\n"),
		"hostile/Granted":         []byte("Granted 1\n"),
		"hostile/two lines":       []byte("granted 1\ngranted 2\n"),
		"hostile/refused no n":    []byte("refused full\n"),
		"hostile/refused bad n":   []byte("refused full x\n"),
		"hostile/too long":        []byte("granted " + strings.Repeat("1", MaxMessageBytes) + "\n"),
		"hostile/refused NUL":     []byte("refused fu\x00ll 0\n"),
		"edge/long number":        []byte("granted " + strings.Repeat("9", 100) + "\n"),
		"edge/empty reason":       []byte("refused  0\n"),
		"edge/long reason":        []byte("refused " + strings.Repeat("r", 80) + " 7\n"),
		"edge/reason with spaces": []byte("refused a b c 0\n"),
		"edge/largest":            []byte("granted " + strings.Repeat("1", MaxMessageBytes-9) + "\n"),
	}
	for _, r := range reasons {
		in["golden/refused "+r] = Refused(r, 3<<28)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i, valid := range [][]byte{Granted(805306368), Refused(ReasonFull, 268435456)} {
		for j := range 150 {
			m := bytes.Clone(valid)
			m[rng.IntN(len(m))] = byte(rng.IntN(256))
			in[fmt.Sprintf("mutation %d.%d", i, j)] = m
		}
	}
	return in
}

// The library reads every reply as ParseReply does: granted, refused for
// the same reason, or malformed (a refusal too). The server's replies are
// all read as meant.
func TestGoAndCReplyParsersAgree(t *testing.T) {
	c := contracttest.Build(t)
	for name, msg := range replies() {
		got, goErr := ParseReply(msg)
		lines, reason := c.Parse(t, "burstreply", msg)
		if !assert.Equal(t, goErr == nil, reason == "", "%s %q: Go error %v, C reason %q", name, msg, goErr, reason) {
			continue
		}
		if goErr == nil {
			want := "granted"
			if !got.Granted {
				want = "refused " + got.Reason
			}
			assert.Equal(t, want, strings.Join(lines, "\n"), "%s %q", name, msg)
		}
		switch {
		case strings.HasPrefix(name, "golden/granted"):
			assert.True(t, got.Granted, name)
		case strings.HasPrefix(name, "golden/refused "):
			assert.Equal(t, Reply{Reason: strings.TrimPrefix(name, "golden/refused ")}, got, name)
		case strings.HasPrefix(name, "hostile/"):
			assert.Error(t, goErr, name)
		}
	}
}

// The longest reason the library logs is cut, not refused.
func TestParseReplyCutsLongReasons(t *testing.T) {
	got, err := ParseReply([]byte("refused " + strings.Repeat("r", 80) + " 7\n"))
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("r", 40), got.Reason)
}

// The server's replies fit a message, whatever the grant.
func TestRepliesFitAMessage(t *testing.T) {
	for _, r := range reasons {
		assert.LessOrEqual(t, len(Refused(r, burstfile.MaxGrantBytes)), MaxMessageBytes, r)
	}
	assert.LessOrEqual(t, len(Granted(burstfile.MaxGrantBytes)), MaxMessageBytes)
}

// The limit is the header's.
func TestLimitsMatchCHeader(t *testing.T) {
	assert.EqualValues(t, MaxMessageBytes, contracttest.Build(t).Constants(t)["VGPU_BURST_MSG_MAX"])
}
