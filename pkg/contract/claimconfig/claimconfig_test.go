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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	uuid0 = "GPU-8b2c4e6a-1f3d-4a5b-9c7e-0d2f4a6b8c1e"
	uuid1 = "GPU-1a3c5e7b-9d2f-4b6a-8c0e-2f4a6c8e0b3d"
	// head is a valid file's keys of the whole claim.
	head = "version=1\nclaim=c\ndevice.count=1\n"
	// dev0 is device 0's required keys.
	dev0 = "device.0.uuid=" + uuid0 + "\ndevice.0.memory_limit_bytes=100\ndevice.0.sm_limit_percent=50\n"
)

// goldenFiles returns the files of testdata/golden by name: files the
// plugin writes.
func goldenFiles(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	files := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		files[filepath.Base(p)] = data
	}
	return files
}

// hostileFiles are files the library refuses, each with a part of Parse's
// error naming what is wrong.
func hostileFiles() map[string]struct{ data, err string } {
	return map[string]struct{ data, err string }{
		"empty":                     {"", "version: missing"},
		"no version":                {"claim=c\ndevice.count=1\n" + dev0, "version: missing"},
		"no claim":                  {"version=1\ndevice.count=1\n" + dev0, "claim: missing"},
		"no device.count":           {"version=1\nclaim=c\n" + dev0, "device.count: missing"},
		"version 2":                 {strings.Replace(head, "version=1", "version=2", 1) + dev0, "version"},
		"version 01":                {strings.Replace(head, "version=1", "version=01", 1) + dev0, "version"},
		"version twice":             {"version=1\n" + head + dev0, "duplicate key version"},
		"claim empty":               {strings.Replace(head, "claim=c", "claim=", 1) + dev0, "claim"},
		"claim 128 bytes":           {strings.Replace(head, "claim=c", "claim="+strings.Repeat("c", 128), 1) + dev0, "claim"},
		"claim twice":               {head + "claim=d\n" + dev0, "duplicate key claim"},
		"policy unknown":            {head + dev0 + "compute_policy=Strict\n", "compute_policy"},
		"priority twice":            {head + dev0 + "priority=low\npriority=low\n", "duplicate key priority"},
		"log_level empty":           {head + dev0 + "log_level=\n", "log_level"},
		"enforcement padded":        {head + dev0 + "enforcement=enabled \n", "enforcement"},
		"count 0":                   {strings.Replace(head, "count=1", "count=0", 1), "device.count"},
		"count 17":                  {strings.Replace(head, "count=1", "count=17", 1) + dev0, "device.count"},
		"count negative":            {strings.Replace(head, "count=1", "count=-1", 1) + dev0, "device.count"},
		"count twice":               {head + "device.count=1\n" + dev0, "duplicate key device.count"},
		"device missing":            {strings.Replace(head, "count=1", "count=2", 1) + dev0, "device.1: missing"},
		"device without sm":         {head + "device.0.uuid=" + uuid0 + "\ndevice.0.memory_limit_bytes=1\n", "device.0: missing"},
		"index 16":                  {head + dev0 + "device.16.uuid=" + uuid1 + "\n", "device.16.uuid: device index"},
		"index empty":               {head + dev0 + "device..uuid=" + uuid1 + "\n", "device index"},
		"index hex":                 {head + dev0 + "device.0x1.foo=1\n", "device index"},
		"index not below count":     {head + dev0 + "device.1.uuid=" + uuid1 + "\n", "index not below device.count"},
		"uuid bad":                  {strings.Replace(head+dev0, uuid0, "GPU-xyz", 1), "not a GPU UUID"},
		"uuid lower-case prefix":    {strings.Replace(head+dev0, "GPU-", "gpu-", 1), "not a GPU UUID"},
		"uuid twice":                {head + dev0 + "device.0.uuid=" + uuid1 + "\n", "duplicate key device.0.uuid"},
		"same GPU twice":            {strings.Replace(head, "count=1", "count=2", 1) + dev0 + strings.ReplaceAll(strings.ReplaceAll(dev0, "device.0", "device.1"), "8b2c", "8B2C"), "same GPU as device.0"},
		"memory negative":           {strings.Replace(head+dev0, "bytes=100", "bytes=-100", 1), "memory_limit_bytes"},
		"memory overflow":           {strings.Replace(head+dev0, "bytes=100", "bytes=18446744073709551616", 1), "memory_limit_bytes"},
		"memory with unit":          {strings.Replace(head+dev0, "bytes=100", "bytes=100M", 1), "memory_limit_bytes"},
		"sm 101":                    {strings.Replace(head+dev0, "percent=50", "percent=101", 1), "sm_limit_percent"},
		"sm leading zero":           {strings.Replace(head+dev0, "percent=50", "percent=050", 1), "sm_limit_percent"},
		"mps threads alone":         {head + dev0 + "mps.activeThreadPercent.0=10\n", "mps.*.0"},
		"mps pinned alone":          {head + dev0 + "mps.pinnedMemoryLimit.0=10\n", "mps.*.0"},
		"mps threads 0":             {head + dev0 + "mps.activeThreadPercent.0=0\nmps.pinnedMemoryLimit.0=1\n", "mps.activeThreadPercent.0"},
		"mps driver alone":          {head + dev0 + "mps.driverMemoryLimit.0=1048576\n", "mps.driverMemoryLimit.0: set without"},
		"mps driver under 1 MiB":    {head + dev0 + "mps.activeThreadPercent.0=10\nmps.pinnedMemoryLimit.0=1\nmps.driverMemoryLimit.0=1048575\n", "mps.driverMemoryLimit.0"},
		"mps index not below count": {head + dev0 + "mps.activeThreadPercent.1=10\nmps.pinnedMemoryLimit.1=1\n", "index not below device.count"},
		"mps index with a dot":      {head + dev0 + "mps.pinnedMemoryLimit.0.0=1\n", "device index"},
		"mps twice":                 {head + dev0 + "mps.activeThreadPercent.0=10\nmps.pinnedMemoryLimit.0=1\nmps.pinnedMemoryLimit.0=1\n", "duplicate key mps.pinnedMemoryLimit.0"},
		"line without =":            {head + dev0 + "garbage\n", "no '='"},
		"indented comment":          {head + dev0 + " # note\n", "no '='"},
		"NUL":                       {head + dev0 + "x=\x00\n", "0x00"},
		"tab":                       {head + dev0 + "x=\t1\n", "0x09"},
		"lone carriage return":      {head + "x=\r1\n" + dev0, "0x0d"},
		"UTF-8":                     {head + dev0 + "claim.note=\u00e9\n", "0xc3"},
		"line of 512 bytes":         {head + dev0 + "x=" + strings.Repeat("y", 510) + "\n", "longer than 511"},
		"file over the limit":       {head + dev0 + strings.Repeat("#\n", MaxBytes/2), "more than 65536"},
	}
}

// Odd files the library accepts, with what Parse must read.
func TestParseAcceptsWhatTheLibraryAccepts(t *testing.T) {
	want := func(mutate func(*Config)) Config {
		c := Config{Claim: "c", ComputePolicy: "strict", Priority: "low", Enforcement: "enabled",
			Devices: []Device{{UUID: uuid0, MemoryLimitBytes: 100, SMLimitPercent: 50}}}
		if mutate != nil {
			mutate(&c)
		}
		return c
	}
	for name, tc := range map[string]struct {
		data string
		want Config
	}{
		"defaults":             {head + dev0, want(nil)},
		"CRLF and comments":    {"# plugin\r\n\r\n" + strings.ReplaceAll(head+dev0, "\n", "\r\n"), want(nil)},
		"no final newline":     {strings.TrimSuffix(head+dev0, "\n"), want(nil)},
		"spaces around values": {strings.Replace(head+dev0, "percent=50", "percent=  50 ", 1), want(nil)},
		"unknown keys":         {head + dev0 + "future=1\ndevice.0.future=x\nmps.future.0=1\nmps.x=1\ndevice.x=1\n", want(nil)},
		"long unknown index":   {head + dev0 + "device.0000000000000000.uuid=x\n", want(nil)},
		"claim with = and spaces": {strings.Replace(head, "claim=c", "claim=a =b", 1) + dev0,
			want(func(c *Config) { c.Claim = "a =b" })},
		"claim of 127 bytes": {strings.Replace(head, "claim=c", "claim="+strings.Repeat("c", 127), 1) + dev0,
			want(func(c *Config) { c.Claim = strings.Repeat("c", 127) })},
		"upper-case hex": {strings.Replace(head+dev0, uuid0, strings.ToUpper(uuid0), 1), want(nil)},
		"MPS": {head + dev0 + "mps.activeThreadPercent.0=7\nmps.pinnedMemoryLimit.0=0\n",
			want(func(c *Config) { c.Devices[0].MPS = &MPS{ActiveThreadPercent: 7} })},
		"settings": {head + dev0 + "compute_policy=workConserving\npriority=high\nlog_level=info\nenforcement=disabled\n",
			want(func(c *Config) {
				c.ComputePolicy, c.Priority, c.LogLevel, c.Enforcement = "workConserving", "high", "info", "disabled"
			})},
		"line of 511 bytes": {head + dev0 + "x=" + strings.Repeat("y", 509) + "\n", want(nil)},
	} {
		got, err := Parse([]byte(tc.data))
		if assert.NoError(t, err, name) {
			assert.Equal(t, tc.want, got, name)
		}
	}
}

func TestParseRefusesHostileFiles(t *testing.T) {
	for name, tc := range hostileFiles() {
		_, err := Parse([]byte(tc.data))
		assert.ErrorContains(t, err, tc.err, name)
	}
}

// The golden files are what Render writes.
func TestGoldenFilesRoundTrip(t *testing.T) {
	for name, data := range goldenFiles(t) {
		c, err := Parse(data)
		require.NoError(t, err, name)
		assert.Equal(t, string(data), string(Render(c)), name)
	}
}

func TestRenderWritesEveryKey(t *testing.T) {
	got := Render(Config{Claim: "c", ComputePolicy: "strict", Priority: "low", LogLevel: "info", Enforcement: "enabled",
		Devices: []Device{
			{UUID: uuid0, MemoryLimitBytes: 5, SMLimitPercent: 0, MPS: &MPS{ActiveThreadPercent: 30, PinnedMemoryLimit: 5}},
			{UUID: uuid1, MemoryLimitBytes: 1 << 30, SMLimitPercent: 40},
		}})
	assert.Equal(t, "version=1\nclaim=c\ncompute_policy=strict\npriority=low\nlog_level=info\nenforcement=enabled\ndevice.count=2\n"+
		"device.0.uuid="+uuid0+"\ndevice.0.memory_limit_bytes=5\ndevice.0.sm_limit_percent=0\n"+
		"device.1.uuid="+uuid1+"\ndevice.1.memory_limit_bytes=1073741824\ndevice.1.sm_limit_percent=40\n"+
		"mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=5\n", string(got))
}
