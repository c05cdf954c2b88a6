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

package burstfile

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

const (
	// Version is the format version of host/burst.
	Version = 1
	// MaxBytes bounds a host/burst file: a version line and one line
	// per GPU a claim can hold, with room to spare.
	MaxBytes = 4096
	// MaxGrantBytes bounds one grant in a file (1 PiB): far above any GPU,
	// low enough that sums of grants cannot overflow.
	MaxGrantBytes = uint64(1) << 50
	// MaxGPUs bounds the GPUs of a file: as many as a claim holds.
	MaxGPUs = region.MaxDevices
)

// gpuUUID is a GPU or MIG-instance UUID as the claim config names it (the library's
// vgpu_uuid_valid).
var gpuUUID = regexp.MustCompile(`^(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ValidUUID reports whether s names a GPU as the file does: "GPU-" or
// "MIG-" and 8-4-4-4-12 hex digits in either case.
func ValidUUID(s string) bool {
	return gpuUUID.MatchString(s)
}

// Render returns the host/burst content for grants (bytes by GPU UUID):
//
//	version=1
//	gpu <uuid> <grant bytes>
//
// one line per GPU, sorted by UUID, each ending in a newline.
func Render(grants map[string]uint64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "version=%d\n", Version)
	for _, uuid := range slices.Sorted(maps.Keys(grants)) {
		fmt.Fprintf(&b, "gpu %s %d\n", uuid, grants[uuid])
	}
	return b.Bytes()
}

// Parse parses a host/burst file strictly and refuses the whole file on
// any deviation: more than MaxBytes, a first line other than
// version=1, a missing final newline, empty lines, carriage returns, other
// separators than one space, a malformed UUID, a GPU twice (in any hex
// case), a number with a sign, leading zeros or beyond MaxGrantBytes, or
// more GPUs than a claim can hold.
func Parse(data []byte) (map[string]uint64, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("burst file: %d bytes, more than %d", len(data), MaxBytes)
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("burst file: empty or not ending in a newline")
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if want := "version=" + strconv.Itoa(Version); lines[0] != want {
		return nil, fmt.Errorf("burst file: first line %q, want %q", truncate(lines[0]), want)
	}
	grants := map[string]uint64{}
	seen := map[string]bool{}
	for i, line := range lines[1:] {
		n := i + 2
		fields := strings.Split(line, " ")
		if len(fields) != 3 || fields[0] != "gpu" {
			return nil, fmt.Errorf("burst file: line %d: want \"gpu <uuid> <bytes>\", got %q", n, truncate(line))
		}
		uuid, num := fields[1], fields[2]
		if !ValidUUID(uuid) {
			return nil, fmt.Errorf("burst file: line %d: %q is not a GPU UUID", n, truncate(uuid))
		}
		v, err := parseBytes(num)
		if err != nil {
			return nil, fmt.Errorf("burst file: line %d: %w", n, err)
		}
		if seen[strings.ToLower(uuid)] {
			// Case-insensitively: UUIDs name GPUs whatever the hex case.
			return nil, fmt.Errorf("burst file: line %d: GPU %s listed twice", n, uuid)
		}
		seen[strings.ToLower(uuid)] = true
		if len(grants) == MaxGPUs {
			return nil, fmt.Errorf("burst file: more than %d GPUs", MaxGPUs)
		}
		grants[uuid] = v
	}
	return grants, nil
}

// parseBytes accepts decimal digits without sign or leading zeros, up to
// MaxGrantBytes.
func parseBytes(s string) (uint64, error) {
	if s == "" || len(s) > 20 || strings.TrimLeft(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("grant %q is not a decimal number of bytes", truncate(s))
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > MaxGrantBytes {
		return 0, fmt.Errorf("grant %q is more than %d bytes", truncate(s), MaxGrantBytes)
	}
	return v, nil
}

// truncate keeps error messages about hostile input short.
func truncate(s string) string {
	const n = 64
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
