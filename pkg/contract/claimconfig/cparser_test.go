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

package claimconfig

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/contracttest"
)

// canonical is c as contract-parse prints what the library read.
func canonical(c Config) []string {
	logLevel := "-"
	if c.LogLevel != "" {
		logLevel = fmt.Sprint(slices.Index(LogLevels, c.LogLevel))
	}
	lines := []string{
		"claim " + c.Claim,
		fmt.Sprintf("compute_policy %d", slices.Index(ComputePolicies, c.ComputePolicy)),
		fmt.Sprintf("priority %d", slices.Index(Priorities, c.Priority)),
		"log_level " + logLevel,
		fmt.Sprintf("enforcement %d", slices.Index(Enforcements, c.Enforcement)),
	}
	for k, d := range c.Devices {
		l := fmt.Sprintf("device %d %s %d %d", k, d.UUID, d.MemoryLimitBytes, d.SMLimitPercent)
		if d.MPS != nil {
			l += fmt.Sprintf(" mps %d %d %d", d.MPS.ActiveThreadPercent, d.MPS.PinnedMemoryLimit, d.MPS.DriverMemoryLimit)
		}
		lines = append(lines, l)
	}
	return lines
}

// randomConfig is a config the plugin could write.
func randomConfig(rng *rand.Rand) Config {
	pick := func(names []string) string { return names[rng.IntN(len(names))] }
	c := Config{Claim: fmt.Sprintf("%08x-%04x", rng.Uint32(), rng.IntN(0x10000)), ComputePolicy: pick(ComputePolicies),
		Priority: pick(Priorities), LogLevel: pick(LogLevels), Enforcement: pick(Enforcements)}
	for range 1 + rng.IntN(MaxDevices) {
		prefix := pick([]string{"GPU", "MIG"})
		d := Device{UUID: fmt.Sprintf("%s-%08x-%04x-4000-8000-%012x", prefix, rng.Uint32(), rng.IntN(0x10000), rng.Uint64N(1<<48)),
			MemoryLimitBytes: rng.Uint64() >> rng.IntN(64), SMLimitPercent: rng.Int64N(101)}
		if rng.IntN(2) == 0 {
			d.MPS = &MPS{ActiveThreadPercent: 1 + rng.Int64N(100), PinnedMemoryLimit: d.MemoryLimitBytes}
			if rng.IntN(2) == 0 {
				d.MPS.DriverMemoryLimit = MinDriverMemoryLimit + rng.Uint64N(1<<40)
			}
		}
		c.Devices = append(c.Devices, d)
	}
	return c
}

// mutate changes data the ways a hostile or broken writer could: a byte
// replaced, inserted or removed, a line removed, repeated or moved.
func mutate(rng *rand.Rand, data []byte) []byte {
	alphabet := []byte("019.=# -\r\n\x00\x7f\xffabcdefxGPUMIG")
	lines := bytes.SplitAfter(data, []byte("\n"))
	i := rng.IntN(len(data))
	switch rng.IntN(6) {
	case 0:
		m := bytes.Clone(data)
		m[i] = alphabet[rng.IntN(len(alphabet))]
		return m
	case 1:
		return slices.Insert(bytes.Clone(data), i, alphabet[rng.IntN(len(alphabet))])
	case 2:
		return slices.Delete(bytes.Clone(data), i, i+1)
	case 3:
		return bytes.Join(slices.Delete(slices.Clone(lines), i%len(lines), i%len(lines)+1), nil)
	case 4:
		l := lines[i%len(lines)]
		return bytes.Join(slices.Insert(slices.Clone(lines), rng.IntN(len(lines)), l), nil)
	default:
		m := slices.Clone(lines)
		j := rng.IntN(len(lines))
		m[i%len(lines)], m[j] = m[j], m[i%len(lines)]
		return bytes.Join(m, nil)
	}
}

// The library reads exactly what the plugin writes, and refuses what the
// Go parser refuses: the two sides of the claim config agree, with the
// values read, on the golden and hostile files, the odd files both accept,
// random files the plugin could write and mutations of them.
func TestGoAndCParsersAgree(t *testing.T) {
	c := contracttest.Build(t)
	inputs := map[string][]byte{}
	for name, data := range goldenFiles(t) {
		inputs["golden/"+name] = data
	}
	for name, tc := range hostileFiles() {
		inputs["hostile/"+name] = []byte(tc.data)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var valid [][]byte
	for i := range 40 {
		data := Render(randomConfig(rng))
		valid = append(valid, data)
		inputs[fmt.Sprintf("random %d", i)] = data
	}
	for i := range 600 {
		data := valid[rng.IntN(len(valid))]
		for range 1 + rng.IntN(3) {
			data = mutate(rng, data)
		}
		inputs[fmt.Sprintf("mutation %d", i)] = data
	}
	parse := func(data []byte) ([]string, error) {
		cfg, err := Parse(data)
		if err != nil {
			return nil, err
		}
		return canonical(cfg), nil
	}
	accepted := contracttest.Agree(t, c, "config", inputs, parse, func(_ *testing.T, lines []string) []string { return lines })
	var mutationsAccepted, mutationsRefused int
	for name, ok := range accepted {
		switch {
		case strings.HasPrefix(name, "random "):
			assert.True(t, ok, name)
		case strings.HasPrefix(name, "mutation ") && ok:
			mutationsAccepted++
		case strings.HasPrefix(name, "mutation "):
			mutationsRefused++
		}
	}
	// The mutations reach both outcomes, or they test little.
	assert.Greater(t, mutationsAccepted, 50)
	assert.Greater(t, mutationsRefused, 50)
}

// The limits are the header's.
func TestLimitsMatchCHeader(t *testing.T) {
	consts := contracttest.Build(t).Constants(t)
	assert.EqualValues(t, Version, consts["VGPU_CONFIG_VERSION"])
	assert.EqualValues(t, MaxBytes, consts["VGPU_CONFIG_MAX_BYTES"])
	assert.EqualValues(t, MaxLineBytes, consts["VGPU_CONFIG_LINE_MAX"])
	assert.EqualValues(t, MaxClaimBytes+1, consts["VGPU_CLAIM_UID_MAX"])
	assert.EqualValues(t, MinDriverMemoryLimit, consts["VGPU_CONFIG_MPS_DRIVER_MIN"])
	assert.EqualValues(t, MaxDevices, consts["VGPU_REGION_MAX_DEVICES"])
}
