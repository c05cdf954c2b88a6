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
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

const (
	// FileName is the file's name in the claim directory.
	FileName = "config"
	// Version is the value of version= of this format.
	Version = 1
	// MaxBytes bounds a config file.
	MaxBytes = 65536
	// MaxLineBytes bounds a line, without its newline.
	MaxLineBytes = 511
	// MaxClaimBytes bounds the claim= value.
	MaxClaimBytes = 127
	// MaxDevices bounds device.count: as many GPUs as a claim holds.
	MaxDevices = region.MaxDevices
	// MinDriverMemoryLimit is the smallest mps.driverMemoryLimit: the
	// driver reads whole MiB, and less would be no limit.
	MinDriverMemoryLimit = 1 << 20
)

// The values the enumerated keys take, in the order of the library's enums
// (VGPU_POLICY_*, enum vgpu_priority, enum vgpu_log_level, off/on).
var (
	ComputePolicies = []string{"strict", "workConserving", "disabled"}
	Priorities      = []string{"low", "high"}
	LogLevels       = []string{"error", "warning", "info", "debug"}
	Enforcements    = []string{"disabled", "enabled"}
)

// Config is what a config file says about a claim.
type Config struct {
	Claim         string
	ComputePolicy string // one of ComputePolicies; Parse's default "strict"
	Priority      string // one of Priorities; default "low"
	LogLevel      string // one of LogLevels, "" when unset
	Enforcement   string // one of Enforcements; default "enabled"
	Devices       []Device
}

// Device is the claim's limit on one GPU, by its index in the claim.
type Device struct {
	UUID             string // Parse keeps the hex digits in lower case, as the library does
	MemoryLimitBytes uint64 // 0 = unlimited
	SMLimitPercent   int64  // 0..100, 0 = unlimited
	MPS              *MPS   // nil: not an MPS client on this GPU
}

// MPS is the MPS client settings libvgpu.so sets before CUDA reads them
// (docs/mps.md).
type MPS struct {
	ActiveThreadPercent int64  // 1..100
	PinnedMemoryLimit   uint64 // bytes, 0 = none
	DriverMemoryLimit   uint64 // bytes, at least MinDriverMemoryLimit; 0 = not written
}

// Render returns the config file the plugin writes for c: every key of the
// claim as given, one per line, then device.count and each device's keys in
// the claim's GPU order, then the mps.* keys of the MPS devices.
func Render(c Config) []byte {
	var b strings.Builder
	line := func(key, value string) {
		b.WriteString(key)
		b.WriteByte('=')
		b.WriteString(value)
		b.WriteByte('\n')
	}
	line("version", strconv.Itoa(Version))
	line("claim", c.Claim)
	line("compute_policy", c.ComputePolicy)
	line("priority", c.Priority)
	line("log_level", c.LogLevel)
	line("enforcement", c.Enforcement)
	line("device.count", strconv.Itoa(len(c.Devices)))
	for k, d := range c.Devices {
		prefix := "device." + strconv.Itoa(k) + "."
		line(prefix+"uuid", d.UUID)
		line(prefix+"memory_limit_bytes", strconv.FormatUint(d.MemoryLimitBytes, 10))
		line(prefix+"sm_limit_percent", strconv.FormatInt(d.SMLimitPercent, 10))
	}
	for k, d := range c.Devices {
		if d.MPS == nil {
			continue
		}
		line("mps.activeThreadPercent."+strconv.Itoa(k), strconv.FormatInt(d.MPS.ActiveThreadPercent, 10))
		line("mps.pinnedMemoryLimit."+strconv.Itoa(k), strconv.FormatUint(d.MPS.PinnedMemoryLimit, 10))
		if d.MPS.DriverMemoryLimit != 0 {
			line("mps.driverMemoryLimit."+strconv.Itoa(k), strconv.FormatUint(d.MPS.DriverMemoryLimit, 10))
		}
	}
	return []byte(b.String())
}

// Bits of the keys seen of one device index.
const (
	devUUID = 1 << iota
	devMemory
	devSM
	devThreads
	devPinned
	devDriver

	devRequired = devUUID | devMemory | devSM
	devMPS      = devThreads | devPinned
)

// gpuUUID is a GPU or MIG-instance UUID (the library's vgpu_uuid_valid).
var gpuUUID = regexp.MustCompile(`^(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

type parser struct {
	cfg     Config
	seen    map[string]bool // keys of the whole claim
	count   int             // device.count, 0 until read
	devSeen [MaxDevices]int
	devices [MaxDevices]Device
	mps     [MaxDevices]MPS
}

// Parse parses a config file as libvgpu.so does and refuses it wherever
// the library does, naming the line and key: more than MaxBytes, a byte
// that is not printable ASCII, a line over MaxLineBytes or without '=', a
// duplicate key or GPU, a value out of its range or list, a number with a
// sign or leading zeros, a missing required key, a device key of an index
// not below device.count, one of the two mps.* keys of a device without the
// other, or mps.driverMemoryLimit without them. Unknown keys are ignored.
func Parse(data []byte) (Config, error) {
	if len(data) > MaxBytes {
		return Config{}, fmt.Errorf("claim config: %d bytes, more than %d", len(data), MaxBytes)
	}
	p := parser{
		cfg:  Config{ComputePolicy: ComputePolicies[0], Priority: Priorities[0], Enforcement: Enforcements[1]},
		seen: map[string]bool{},
	}
	text := string(data)
	for n := 1; text != ""; n++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		line = strings.TrimSuffix(line, "\r")
		if err := p.line(line); err != nil {
			return Config{}, fmt.Errorf("claim config: line %d: %w", n, err)
		}
	}
	if err := p.finish(); err != nil {
		return Config{}, fmt.Errorf("claim config: %w", err)
	}
	return p.cfg, nil
}

func (p *parser) line(line string) error {
	for i := range len(line) {
		if c := line[i]; c < 0x20 || c >= 0x7f {
			return fmt.Errorf("byte 0x%02x at column %d is not printable ASCII", c, i+1)
		}
	}
	if len(line) > MaxLineBytes {
		return fmt.Errorf("longer than %d bytes", MaxLineBytes)
	}
	if line == "" || line[0] == '#' {
		return nil
	}
	key, val, ok := strings.Cut(line, "=")
	if !ok {
		return fmt.Errorf("no '=' in %q", line)
	}
	switch key {
	case "version":
		if err := p.once(key); err != nil {
			return err
		}
		if v, err := parseUint(val, math.MaxUint32); err != nil || v != Version {
			return fmt.Errorf("version: unsupported value %q (want %d)", val, Version)
		}
	case "claim":
		if err := p.once(key); err != nil {
			return err
		}
		if val == "" || len(val) > MaxClaimBytes {
			return fmt.Errorf("claim: empty or longer than %d bytes", MaxClaimBytes)
		}
		p.cfg.Claim = val
	case "compute_policy":
		return p.enum(key, val, ComputePolicies, &p.cfg.ComputePolicy)
	case "priority":
		return p.enum(key, val, Priorities, &p.cfg.Priority)
	case "log_level":
		return p.enum(key, val, LogLevels, &p.cfg.LogLevel)
	case "enforcement":
		return p.enum(key, val, Enforcements, &p.cfg.Enforcement)
	default:
		if rest, ok := strings.CutPrefix(key, "device."); ok {
			return p.deviceKey(key, rest, val)
		}
		if rest, ok := strings.CutPrefix(key, "mps."); ok {
			return p.mpsKey(key, rest, val)
		}
	}
	return nil
}

// once fails on the second occurrence of a key of the whole claim.
func (p *parser) once(key string) error {
	if p.seen[key] {
		return fmt.Errorf("duplicate key %s", key)
	}
	p.seen[key] = true
	return nil
}

// onceDevice fails on the second occurrence of a key of device k.
func (p *parser) onceDevice(key string, k uint64, bit int) error {
	if p.devSeen[k]&bit != 0 {
		return fmt.Errorf("duplicate key %s", key)
	}
	p.devSeen[k] |= bit
	return nil
}

func (p *parser) enum(key, val string, names []string, out *string) error {
	if err := p.once(key); err != nil {
		return err
	}
	if !slices.Contains(names, val) {
		return fmt.Errorf("%s: unknown value %q", key, val)
	}
	*out = val
	return nil
}

// deviceKey reads device.count and device.<k>.{uuid,memory_limit_bytes,sm_limit_percent};
// other device.* keys are ignored once their index is valid.
func (p *parser) deviceKey(key, rest, val string) error {
	if rest == "count" {
		if err := p.once(key); err != nil {
			return err
		}
		v, err := parseUint(val, MaxDevices)
		if err != nil || v == 0 {
			return fmt.Errorf("device.count: %q is not an integer in 1..%d", val, MaxDevices)
		}
		p.count = int(v)
		return nil
	}
	idx, suffix, ok := strings.Cut(rest, ".")
	if !ok || len(idx) >= 16 {
		return nil // the library's index buffer: a longer one is an unknown key
	}
	k, err := parseUint(idx, MaxDevices-1)
	if err != nil {
		return fmt.Errorf("%s: device index is not an integer in 0..%d", key, MaxDevices-1)
	}
	d := &p.devices[k]
	switch suffix {
	case "uuid":
		if err := p.onceDevice(key, k, devUUID); err != nil {
			return err
		}
		if !gpuUUID.MatchString(val) {
			return fmt.Errorf("%s: %q is not a GPU UUID", key, val)
		}
		d.UUID = val[:4] + strings.ToLower(val[4:])
	case "memory_limit_bytes":
		if err := p.onceDevice(key, k, devMemory); err != nil {
			return err
		}
		v, err := parseUint(val, math.MaxUint64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a decimal byte count", key, val)
		}
		d.MemoryLimitBytes = v
	case "sm_limit_percent":
		if err := p.onceDevice(key, k, devSM); err != nil {
			return err
		}
		v, err := parseUint(val, 100)
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer in 0..100", key, val)
		}
		d.SMLimitPercent = int64(v)
	}
	return nil
}

// mpsKey reads mps.{activeThreadPercent,pinnedMemoryLimit,driverMemoryLimit}.<k>;
// other mps.* keys are ignored.
func (p *parser) mpsKey(key, rest, val string) error {
	name, idx, ok := strings.Cut(rest, ".")
	if !ok {
		return nil
	}
	bit := map[string]int{"activeThreadPercent": devThreads, "pinnedMemoryLimit": devPinned, "driverMemoryLimit": devDriver}[name]
	if bit == 0 {
		return nil
	}
	k, err := parseUint(idx, MaxDevices-1)
	if err != nil {
		return fmt.Errorf("%s: device index is not an integer in 0..%d", key, MaxDevices-1)
	}
	if err := p.onceDevice(key, k, bit); err != nil {
		return err
	}
	m := &p.mps[k]
	switch bit {
	case devThreads:
		v, err := parseUint(val, 100)
		if err != nil || v == 0 {
			return fmt.Errorf("%s: %q is not an integer in 1..100", key, val)
		}
		m.ActiveThreadPercent = int64(v)
	case devPinned:
		v, err := parseUint(val, math.MaxUint64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a decimal byte count", key, val)
		}
		m.PinnedMemoryLimit = v
	default:
		v, err := parseUint(val, math.MaxUint64)
		if err != nil || v < MinDriverMemoryLimit {
			return fmt.Errorf("%s: %q is not a decimal byte count of at least %d", key, val, MinDriverMemoryLimit)
		}
		m.DriverMemoryLimit = v
	}
	return nil
}

// finish checks what concerns the whole file and builds the devices.
func (p *parser) finish() error {
	for _, key := range []string{"version", "claim", "device.count"} {
		if !p.seen[key] {
			return fmt.Errorf("%s: missing", key)
		}
	}
	for k := range p.count {
		for j := range k {
			if p.devices[k].UUID != "" && p.devices[k].UUID == p.devices[j].UUID {
				return fmt.Errorf("device.%d.uuid: same GPU as device.%d", k, j)
			}
		}
	}
	for k, seen := range p.devSeen {
		switch {
		case k < p.count && seen&devRequired != devRequired:
			return fmt.Errorf("device.%d: missing one of uuid, memory_limit_bytes, sm_limit_percent", k)
		case k < p.count && seen&devMPS != 0 && seen&devMPS != devMPS:
			return fmt.Errorf("mps.*.%d: mps.activeThreadPercent.%d and mps.pinnedMemoryLimit.%d come together", k, k, k)
		case k < p.count && seen&devDriver != 0 && seen&devMPS != devMPS:
			return fmt.Errorf("mps.driverMemoryLimit.%d: set without mps.activeThreadPercent.%d and mps.pinnedMemoryLimit.%d", k, k, k)
		case k >= p.count && seen != 0:
			return fmt.Errorf("device %d: index not below device.count %d", k, p.count)
		}
	}
	for k := range p.count {
		d := p.devices[k]
		if p.devSeen[k]&devMPS == devMPS {
			m := p.mps[k]
			d.MPS = &m
		}
		p.cfg.Devices = append(p.cfg.Devices, d)
	}
	return nil
}

// parseUint is the library's vgpu_parse_uint: decimal digits without sign
// or leading zeros, spaces around them allowed, at most limit.
func parseUint(s string, limit uint64) (uint64, error) {
	digits := strings.Trim(s, " \t\n\r\v\f")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, fmt.Errorf("%q is not a decimal integer", s)
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || v > limit {
		return 0, fmt.Errorf("%q is more than %d", s, limit)
	}
	return v, nil
}
