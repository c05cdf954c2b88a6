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

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	o, err := parse([]string{"--output", "img.tar", "--tag", "example.com/vgpu:1", "--version", "v1"})
	require.NoError(t, err)
	assert.Equal(t, int64(1700000000), o.epoch, "SOURCE_DATE_EPOCH is the default timestamp")
	assert.Equal(t, "bin/dra-kubelet-plugin", o.inputs.Plugin)
	assert.Empty(t, o.inputs.Controller)

	o, err = parse([]string{"--rootfs-dir", "/tmp/x", "--source-date-epoch", "5"})
	require.NoError(t, err)
	assert.Equal(t, int64(5), o.epoch, "the flag wins over the environment")

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"nothing to write":  {nil, "give --output and/or --rootfs-dir"},
		"output needs tag":  {[]string{"--output", "img.tar"}, "tag: required with --output"},
		"bad epoch":         {[]string{"--rootfs-dir", "d", "--source-date-epoch", "yesterday"}, `source-date-epoch: "yesterday"`},
		"negative epoch":    {[]string{"--rootfs-dir", "d", "--source-date-epoch", "-1"}, `source-date-epoch: "-1"`},
		"stray argument":    {[]string{"--rootfs-dir", "d", "extra"}, `unexpected arguments ["extra"]`},
		"unknown flag name": {[]string{"--rootfs", "d"}, "flag provided but not defined: -rootfs"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(tc.args)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
