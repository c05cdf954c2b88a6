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
	"strconv"
)

// FormatBytes writes a byte count in binary units the way kubectl top
// does, with one decimal where it matters: 512Mi, 1.5Gi, 80Gi.
func FormatBytes(v int64) string {
	const (
		mi = int64(1) << 20
		gi = int64(1) << 30
		ti = int64(1) << 40
	)
	neg := ""
	if v < 0 {
		neg, v = "-", -v
	}
	switch {
	case v >= ti:
		return neg + trim(float64(v)/float64(ti)) + "Ti"
	case v >= gi:
		return neg + trim(float64(v)/float64(gi)) + "Gi"
	case v >= mi:
		return neg + strconv.FormatInt((v+mi/2)/mi, 10) + "Mi"
	case v == 0:
		return "0"
	default:
		return neg + strconv.FormatInt(v, 10)
	}
}

// trim prints one decimal, none when it is zero.
func trim(f float64) string {
	s := strconv.FormatFloat(f, 'f', 1, 64)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}

// formatCores writes cores, percent of one GPU's SM time, as a number.
func formatCores(v int64) string { return strconv.FormatInt(v, 10) }
