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

// Checkpoint versions. Version 1 holds claims only; version 2 adds the MIG
// instances the plugin owns. A checkpoint without instances is still
// written as version 1, so a node that uses no MIG can go back to a plugin
// that reads only version 1.
const (
	checkpointVersion1 = 1
	checkpointVersion2 = 2
	checkpointVersion  = checkpointVersion2
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
	// Instances are the MIG instances the plugin owns, by the UUID of
	// their GPU (version 2).
	Instances map[string][]*instanceRecord
}

// checkpointFile is the JSON encoding. Checksum is the SHA-256 of the
// compact JSON encoding of Claims, which is canonical because encoding/json
// sorts map keys; in version 2 that of Claims, a newline and Instances.
type checkpointFile struct {
	Version   int             `json:"version"`
	Checksum  string          `json:"checksum"`
	BootID    string          `json:"bootID"`
	Claims    json.RawMessage `json:"claims"`
	Instances json.RawMessage `json:"instances,omitempty"`
}

func newCheckpoint(bootID string) *checkpoint {
	return &checkpoint{BootID: bootID, Claims: map[types.UID]*claimRecord{}}
}

func checksum(claims []byte, instances ...[]byte) string {
	h := sha256.New()
	h.Write(claims)
	for _, b := range instances {
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
	file := checkpointFile{
		Version:  checkpointVersion1,
		Checksum: checksum(claims),
		BootID:   c.BootID,
		Claims:   claims,
	}
	if len(c.Instances) > 0 {
		instances, err := json.Marshal(c.Instances)
		if err != nil {
			return nil, fmt.Errorf("encode checkpoint instances: %w", err)
		}
		file.Version, file.Checksum, file.Instances = checkpointVersion2, checksum(claims, instances), instances
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
	var file checkpointFile
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if file.Version != checkpointVersion1 && file.Version != checkpointVersion2 {
		return nil, fmt.Errorf("version: unsupported value %d, this plugin reads versions %d and %d", file.Version, checkpointVersion1, checkpointVersion2)
	}
	if file.Version == checkpointVersion1 && len(file.Instances) > 0 {
		return nil, errors.New("instances: version 1 has none")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, file.Claims); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	claims := map[types.UID]*claimRecord{}
	dec := json.NewDecoder(bytes.NewReader(compact.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&claims); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	// Re-encoding gives the canonical form even if the file was reformatted.
	canonical, err := json.Marshal(claims)
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	var instances map[string][]*instanceRecord
	sum := checksum(canonical)
	if file.Version == checkpointVersion2 {
		if instances, err = decodeStrict[map[string][]*instanceRecord](file.Instances); err != nil {
			return nil, fmt.Errorf("instances: %w", err)
		}
		canonicalInstances, err := json.Marshal(instances)
		if err != nil {
			return nil, fmt.Errorf("instances: %w", err)
		}
		sum = checksum(canonical, canonicalInstances)
	}
	if sum != file.Checksum {
		return nil, fmt.Errorf("checksum: have %q, the content hashes to %q", file.Checksum, sum)
	}
	if claims == nil {
		claims = map[types.UID]*claimRecord{}
	}
	for uid, rec := range claims {
		if err := rec.validate(field.NewPath("claims").Key(string(uid)), uid); err != nil {
			return nil, err
		}
	}
	cp := &checkpoint{BootID: file.BootID, Claims: claims, Instances: instances}
	if err := cp.validateInstances(); err != nil {
		return nil, err
	}
	return cp, nil
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
		if g.MIG != nil && g.MIG.UUID != "" && (!strings.HasPrefix(g.MIG.UUID, "MIG-") || strings.ContainsAny(g.MIG.UUID, "\n=")) {
			errs = append(errs, field.Invalid(path.Child("gpus").Index(i).Child("mig", "uuid"), g.MIG.UUID, "must be a MIG UUID"))
		}
		if g.BurstLimitBytes != 0 && (g.BurstLimitBytes <= g.MemoryLimitBytes || g.MIG != nil) {
			errs = append(errs, field.Invalid(path.Child("gpus").Index(i).Child("burstLimitBytes"), g.BurstLimitBytes, "must be 0 or above memoryLimitBytes, and 0 in a MIG instance"))
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
