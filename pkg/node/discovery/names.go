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

package discovery

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

var architectureNames = map[nvml.DeviceArchitecture]string{
	nvml.DEVICE_ARCH_KEPLER:    "Kepler",
	nvml.DEVICE_ARCH_MAXWELL:   "Maxwell",
	nvml.DEVICE_ARCH_PASCAL:    "Pascal",
	nvml.DEVICE_ARCH_VOLTA:     "Volta",
	nvml.DEVICE_ARCH_TURING:    "Turing",
	nvml.DEVICE_ARCH_AMPERE:    "Ampere",
	nvml.DEVICE_ARCH_ADA:       "Ada",
	nvml.DEVICE_ARCH_HOPPER:    "Hopper",
	nvml.DEVICE_ARCH_BLACKWELL: "Blackwell",
	nvml.DEVICE_ARCH_RUBIN:     "Rubin",
}

// architectureName maps the NVML architecture enum to its name; values this
// build does not know (newer drivers) become "Unknown" rather than an error
// so that a new GPU generation is still published.
func architectureName(a nvml.DeviceArchitecture) string {
	if name, ok := architectureNames[a]; ok {
		return name
	}
	return "Unknown"
}

var brandNames = map[nvml.BrandType]string{
	nvml.BRAND_QUADRO:              "Quadro",
	nvml.BRAND_TESLA:               "Tesla",
	nvml.BRAND_NVS:                 "NVS",
	nvml.BRAND_GRID:                "GRID",
	nvml.BRAND_GEFORCE:             "GeForce",
	nvml.BRAND_TITAN:               "Titan",
	nvml.BRAND_NVIDIA_VAPPS:        "NVIDIA Virtual Applications",
	nvml.BRAND_NVIDIA_VPC:          "NVIDIA Virtual PC",
	nvml.BRAND_NVIDIA_VCS:          "NVIDIA Virtual Compute Server",
	nvml.BRAND_NVIDIA_VWS:          "NVIDIA RTX Virtual Workstation",
	nvml.BRAND_NVIDIA_CLOUD_GAMING: "NVIDIA Cloud Gaming",
	nvml.BRAND_QUADRO_RTX:          "Quadro RTX",
	nvml.BRAND_NVIDIA_RTX:          "NVIDIA RTX",
	nvml.BRAND_NVIDIA:              "NVIDIA",
	nvml.BRAND_GEFORCE_RTX:         "GeForce RTX",
	nvml.BRAND_TITAN_RTX:           "Titan RTX",
}

// brandName maps the NVML brand enum to its name, "Unknown" when unknown.
func brandName(b nvml.BrandType) string {
	if name, ok := brandNames[b]; ok {
		return name
	}
	return "Unknown"
}

// cudaVersion renders NVML's CUDA driver version integer (1000*major +
// 10*minor, e.g. 12090) as "12.9".
func cudaVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
}

// pciBusIDPattern matches NVML's domain:bus:device.function with a domain
// of up to 8 hex digits.
var pciBusIDPattern = regexp.MustCompile(`^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$`)

// normalizePCIBusID turns NVML's bus id ("00000000:3B:00.0", a 32-bit
// domain) into the form sysfs and Kubernetes use ("0000:3b:00.0"). Domains
// above 0xffff (e.g. Intel VMD) keep all their digits, as sysfs does.
func normalizePCIBusID(raw string) (string, error) {
	m := pciBusIDPattern.FindStringSubmatch(raw)
	if m == nil {
		return "", fmt.Errorf("malformed PCI bus id %q, want domain:bus:device.function in hex", raw)
	}
	domain, err := strconv.ParseUint(m[1], 16, 32)
	if err != nil {
		return "", fmt.Errorf("malformed PCI domain in bus id %q: %w", raw, err)
	}
	device, err := strconv.ParseUint(m[3], 16, 8)
	if err != nil || device > 0x1f {
		return "", fmt.Errorf("PCI device number out of range 00-1f in bus id %q", raw)
	}
	return fmt.Sprintf("%04x:%s:%s.%s", domain, strings.ToLower(m[2]), strings.ToLower(m[3]), m[4]), nil
}

// cString converts a NUL-terminated C char array as go-nvml returns it.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
