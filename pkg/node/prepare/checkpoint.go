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

package prepare

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/atomicfile"
)

// Checkpoint versions. Version 1 holds claims only; each later version
// adds a sharing mode's section (version 2: MIG's instances, version 3:
// MPS's control daemons). A checkpoint
// is written with the lowest version its sections allow, so a node that
// does not use a mode can go back to a plugin that predates it.
const (
	checkpointVersion1 = 1
	checkpointVersion2 = 2
	checkpointVersion3 = 3
	checkpointVersion  = checkpointVersion3
)

// claimState is the progress of a claim recorded in the checkpoint.
type claimState string

const (
	// statePrepareStarted: files may exist partially; recovery removes them.
	statePrepareStarted claimState = "PrepareStarted"
	// statePrepareCompleted: every file exists; recovery recreates missing ones.
	statePrepareCompleted claimState = "PrepareCompleted"
)

// claimRecord is one checkpoint entry; PreparedClaim's fields are stored
// inline next to the state.
type claimRecord struct {
	State claimState `json:"state"`
	PreparedClaim
}

// checkpoint is the manager's durable state, StateRoot/checkpoint.json.
type checkpoint struct {
	// BootID is the kernel boot ID when the checkpoint was last written; a
	// different one on load means the node rebooted (tmpfs CDI specs gone).
	BootID string
	Claims map[types.UID]*claimRecord
	// Instances are the MIG mode's records (migSection).
	Instances map[string][]*instanceRecord
	// Daemons are the MPS mode's records (mpsSection).
	Daemons map[string]*daemonRecord
}

// checkpointSection is a sharing mode's part of the checkpoint: its
// records, under a key of their own next to "claims", read and written by
// the mode's functions. The file's checksum covers the claims and every
// section present, in checkpointSections' order.
type checkpointSection struct {
	mode modeName
	key  string
	// version is the checkpoint version that added the section; a file
	// holding the section has at least this version.
	version int
	// encode returns the section's JSON, nil when it holds nothing (the
	// key is then left out).
	encode func(*checkpoint) ([]byte, error)
	// decode sets the section's records from its JSON, refusing unknown
	// fields.
	decode func(*checkpoint, []byte) error
	// validateLimit checks a claim's limit of the mode (path: the limit).
	validateLimit func(path *field.Path, g GPULimit) field.ErrorList
	// validate checks the records against the claims.
	validate func(*checkpoint) error
}

// checkpointSections are the sections of every sharing mode, in the
// order of the checksum.
var checkpointSections = []checkpointSection{migSection, mpsSection}

// sectionOf returns the checkpoint section of mode.
func sectionOf(mode modeName) *checkpointSection {
	for i := range checkpointSections {
		if checkpointSections[i].mode == mode {
			return &checkpointSections[i]
		}
	}
	return nil
}

// Keys of the checkpoint file besides the sections'.
const (
	keyVersion  = "version"
	keyChecksum = "checksum"
	keyBootID   = "bootID"
	keyClaims   = "claims"
)

func newCheckpoint(bootID string) *checkpoint {
	return &checkpoint{BootID: bootID, Claims: map[types.UID]*claimRecord{}}
}

// checksum is the SHA-256 of the compact JSON encoding of the claims,
// which is canonical because encoding/json sorts map keys, followed by a
// newline and the compact encoding of each section present.
func checksum(claims []byte, sections ...[]byte) string {
	h := sha256.New()
	h.Write(claims)
	for _, b := range sections {
		h.Write([]byte("\n"))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// encode returns the file content of the checkpoint.
func (c *checkpoint) encode() ([]byte, error) {
	claims, err := json.Marshal(c.Claims)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint claims: %w", err)
	}
	file := map[string]json.RawMessage{keyClaims: claims}
	version := checkpointVersion1
	var sections [][]byte
	for _, sec := range checkpointSections {
		data, err := sec.encode(c)
		if err != nil {
			return nil, fmt.Errorf("encode checkpoint %s: %w", sec.key, err)
		}
		if data == nil {
			continue
		}
		file[sec.key] = data
		sections = append(sections, data)
		version = max(version, sec.version)
	}
	for key, v := range map[string]any{keyVersion: version, keyChecksum: checksum(claims, sections...), keyBootID: c.BootID} {
		if file[key], err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("encode checkpoint %s: %w", key, err)
		}
	}
	data, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return append(data, '\n'), nil
}

// decodeCheckpoint parses and verifies checkpoint file content. Any
// inconsistency is an error: a checkpoint that cannot be trusted must not be
// acted on.
func decodeCheckpoint(data []byte) (*checkpoint, error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var version int
	var sum, bootID string
	for key, into := range map[string]any{keyVersion: &version, keyChecksum: &sum, keyBootID: &bootID} {
		if raw, ok := file[key]; ok {
			if err := json.Unmarshal(raw, into); err != nil {
				return nil, fmt.Errorf("parse: %s: %w", key, err)
			}
		}
	}
	if version < checkpointVersion1 || version > checkpointVersion {
		return nil, fmt.Errorf("version: unsupported value %d, this plugin reads versions %d to %d", version, checkpointVersion1, checkpointVersion)
	}
	claims, err := decodeStrict[map[types.UID]*claimRecord](file[keyClaims])
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	// Re-encoding gives the canonical form even if the file was reformatted.
	canonical, err := json.Marshal(claims)
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	cp := &checkpoint{BootID: bootID, Claims: claims}
	var sections [][]byte
	for _, sec := range checkpointSections {
		raw, ok := file[sec.key]
		if !ok || isJSONNull(raw) {
			continue
		}
		if version < sec.version {
			return nil, fmt.Errorf("%s: version %d has none", sec.key, version)
		}
		if err := sec.decode(cp, raw); err != nil {
			return nil, fmt.Errorf("%s: %w", sec.key, err)
		}
		canonicalSection, err := sec.encode(cp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sec.key, err)
		}
		if canonicalSection == nil {
			// An empty section is written as none; hash what was read.
			canonicalSection, _ = json.Marshal(raw)
		}
		sections = append(sections, canonicalSection)
	}
	if want := checksum(canonical, sections...); want != sum {
		return nil, fmt.Errorf("checksum: have %q, the content hashes to %q", sum, want)
	}
	if cp.Claims == nil {
		cp.Claims = map[types.UID]*claimRecord{}
	}
	for uid, rec := range cp.Claims {
		if err := rec.validate(field.NewPath("claims").Key(string(uid)), uid); err != nil {
			return nil, err
		}
	}
	for _, sec := range checkpointSections {
		if err := sec.validate(cp); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// isJSONNull reports whether raw is JSON null (what an omitted section may
// have been hand-edited to).
func isJSONNull(raw json.RawMessage) bool {
	return strings.TrimSpace(string(raw)) == "null"
}

// decodeStrict decodes data into a T, refusing unknown fields.
func decodeStrict[T any](data []byte) (T, error) {
	var out T
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return out, err
	}
	dec := json.NewDecoder(&compact)
	dec.DisallowUnknownFields()
	err := dec.Decode(&out)
	return out, err
}

// validate checks what recovery relies on; the checksum already rules out
// accidental damage, this catches a hand-edited file.
func (r *claimRecord) validate(path *field.Path, key types.UID) error {
	var errs field.ErrorList
	if r == nil {
		return field.Required(path, "entry is null")
	}
	if err := validateUID(key); err != nil {
		errs = append(errs, field.Invalid(path, key, "must be a canonical UUID"))
	}
	if r.UID != key {
		errs = append(errs, field.Invalid(path.Child("uid"), r.UID, "must equal the entry's key"))
	}
	if r.State != statePrepareStarted && r.State != statePrepareCompleted {
		errs = append(errs, field.NotSupported(path.Child("state"), r.State, []claimState{statePrepareStarted, statePrepareCompleted}))
	}
	cfg := api.VGPUConfig{
		ComputePolicy: r.Settings.ComputePolicy,
		Priority:      r.Settings.Priority,
		LogLevel:      r.Settings.LogLevel,
		Enforcement:   r.Settings.Enforcement,
	}
	errs = append(errs, cfg.Validate(path.Child("settings"))...)
	for i, g := range r.GPUs {
		if g.UUID == "" || strings.ContainsAny(g.UUID, "\n=") {
			errs = append(errs, field.Invalid(path.Child("gpus").Index(i).Child("uuid"), g.UUID, "must be a GPU UUID"))
		}
		if g.BurstLimitBytes != 0 && g.BurstLimitBytes <= g.MemoryLimitBytes {
			errs = append(errs, field.Invalid(path.Child("gpus").Index(i).Child("burstLimitBytes"), g.BurstLimitBytes, "must be 0 or above memoryLimitBytes"))
		}
		if mode := g.mode(); mode != "" {
			errs = append(errs, sectionOf(mode).validateLimit(path.Child("gpus").Index(i), g)...)
		}
		if g.SMLimitPercent < 0 || g.SMLimitPercent > maxCores {
			errs = append(errs, field.Invalid(path.Child("gpus").Index(i).Child("smLimitPercent"), g.SMLimitPercent, "must be 0..100"))
		}
	}
	if len(r.Devices) == 0 {
		errs = append(errs, field.Required(path.Child("devices"), "a prepared claim has devices"))
	}
	for i, d := range r.Devices {
		if d.GPU < 0 || d.GPU >= len(r.GPUs) {
			errs = append(errs, field.Invalid(path.Child("devices").Index(i).Child("gpu"), d.GPU, "must index gpus"))
		}
	}
	return errs.ToAggregate()
}

// loadCheckpoint reads path; a missing file is an empty checkpoint.
func loadCheckpoint(path string) (*checkpoint, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newCheckpoint(""), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	cp, err := decodeCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s is corrupt: %w", path, err)
	}
	return cp, nil
}

// save writes the checkpoint atomically.
func (c *checkpoint) save(path string) error {
	data, err := c.encode()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data, checkpointFileMode, atomicfile.Durable); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

func (m *Manager) saveCheckpoint() error {
	return m.cp.save(m.layout.checkpointPath())
}
