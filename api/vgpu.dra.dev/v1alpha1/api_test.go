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

package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

const header = `"apiVersion":"vgpu.dra.dev/v1alpha1","kind":"VGPUConfig"`

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    VGPUConfig
		wantErr []string // substrings that must all appear in the error
	}{
		{
			name: "all fields",
			raw:  `{` + header + `,"computePolicy":"workConserving","priority":"high","logLevel":"debug","enforcement":"disabled"}`,
			want: VGPUConfig{ComputePolicy: ComputePolicyWorkConserving, Priority: PriorityHigh, LogLevel: LogLevelDebug, Enforcement: EnforcementDisabled},
		},
		{
			name: "empty object keeps fields unset",
			raw:  `{` + header + `}`,
			want: VGPUConfig{},
		},
		{name: "empty input", raw: ``, wantErr: []string{"empty"}},
		{name: "not json", raw: `computePolicy: strict`, wantErr: []string{"decode VGPUConfig"}},
		{name: "json array", raw: `[]`, wantErr: []string{"decode VGPUConfig"}},
		{name: "missing apiVersion", raw: `{"kind":"VGPUConfig"}`, wantErr: []string{"apiVersion: Required value"}},
		{name: "missing kind", raw: `{"apiVersion":"vgpu.dra.dev/v1alpha1"}`, wantErr: []string{"kind: Required value"}},
		{
			name:    "wrong apiVersion",
			raw:     `{"apiVersion":"vgpu.dra.dev/v1","kind":"VGPUConfig"}`,
			wantErr: []string{"apiVersion", `"vgpu.dra.dev/v1"`, `supported values: "vgpu.dra.dev/v1alpha1"`},
		},
		{
			name:    "wrong kind",
			raw:     `{"apiVersion":"vgpu.dra.dev/v1alpha1","kind":"GpuConfig"}`,
			wantErr: []string{"kind", `"GpuConfig"`, `supported values: "VGPUConfig"`},
		},
		{name: "unknown field", raw: `{` + header + `,"memory":"4Gi"}`, wantErr: []string{`unknown field "memory"`}},
		{name: "field name is case sensitive", raw: `{` + header + `,"ComputePolicy":"strict"}`, wantErr: []string{`unknown field "ComputePolicy"`}},
		{
			name:    "duplicate field",
			raw:     `{` + header + `,"priority":"high","priority":"low"}`,
			wantErr: []string{`duplicate field "priority"`},
		},
		{name: "wrong type", raw: `{` + header + `,"priority":0}`, wantErr: []string{"priority"}},
		{
			name:    "bad computePolicy lists allowed values",
			raw:     `{` + header + `,"computePolicy":"force"}`,
			wantErr: []string{"computePolicy", `"force"`, `"strict", "workConserving", "disabled"`},
		},
		{name: "bad logLevel", raw: `{` + header + `,"logLevel":"trace"}`, wantErr: []string{"logLevel", `"trace"`, `"debug"`}},
		{name: "bad enforcement", raw: `{` + header + `,"enforcement":"off"}`, wantErr: []string{"enforcement", `"off"`, `"enabled", "disabled"`}},
		{
			name: "burst fields",
			raw:  `{` + header + `,"memoryLimit":"12Gi","burst":"never","reclaimGracePeriodSeconds":0}`,
			want: VGPUConfig{MemoryLimit: ptr.To(resource.MustParse("12Gi")), Burst: BurstNever, ReclaimGracePeriodSeconds: ptr.To[int64](0)},
		},
		{name: "memoryLimit as a number of bytes", raw: `{` + header + `,"memoryLimit":1073741824}`, want: VGPUConfig{MemoryLimit: ptr.To(resource.MustParse("1073741824"))}},
		{name: "memoryLimit zero", raw: `{` + header + `,"memoryLimit":"0"}`, wantErr: []string{"memoryLimit", "positive whole number of bytes"}},
		{name: "memoryLimit negative", raw: `{` + header + `,"memoryLimit":"-4Gi"}`, wantErr: []string{"memoryLimit", `"-4Gi"`, "positive"}},
		{name: "memoryLimit fraction of a byte", raw: `{` + header + `,"memoryLimit":"1500m"}`, wantErr: []string{"memoryLimit", "whole number"}},
		// The quantity parser clamps values beyond int64; admission and
		// prepare refuse such a limit as larger than any GPU.
		{name: "memoryLimit beyond int64 is clamped", raw: `{` + header + `,"memoryLimit":"100Ei"}`, want: VGPUConfig{MemoryLimit: ptr.To(resource.MustParse("9223372036854775807"))}},
		{name: "memoryLimit not a quantity", raw: `{` + header + `,"memoryLimit":"lots"}`, wantErr: []string{"memoryLimit: Invalid value: \"lots\"", "quantities must match"}},
		{name: "memoryLimit with a bad suffix", raw: `{` + header + `,"memoryLimit":"12Gx"}`, wantErr: []string{"memoryLimit: Invalid value: \"12Gx\": must be a quantity such as \"12Gi\""}},
		{name: "memoryLimit an object", raw: `{` + header + `,"memoryLimit":{"value":"12Gi"}}`, wantErr: []string{`memoryLimit: Invalid value: "{\"value\":\"12Gi\"}": must be a quantity`}},
		{name: "memoryLimit a bool", raw: `{` + header + `,"memoryLimit":true}`, wantErr: []string{`memoryLimit: Invalid value: "true"`}},
		{name: "bad burst", raw: `{` + header + `,"burst":"Never"}`, wantErr: []string{"burst", `"Never"`, `"allowed", "never"`}},
		{name: "negative grace period", raw: `{` + header + `,"reclaimGracePeriodSeconds":-1}`, wantErr: []string{"reclaimGracePeriodSeconds", "between 0 and 3600"}},
		{name: "grace period too long", raw: `{` + header + `,"reclaimGracePeriodSeconds":3601}`, wantErr: []string{"reclaimGracePeriodSeconds", "between 0 and 3600"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.raw))
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			tc.want.APIVersion = SchemeGroupVersion.String()
			tc.want.Kind = Kind
			if tc.want.MemoryLimit != nil {
				// Quantities are equal by value, not by representation.
				require.NotNil(t, got.MemoryLimit)
				assert.Zero(t, tc.want.MemoryLimit.Cmp(*got.MemoryLimit), "memoryLimit %s, want %s", got.MemoryLimit, tc.want.MemoryLimit)
				tc.want.MemoryLimit, got.MemoryLimit = nil, nil
			}
			assert.Equal(t, tc.want, *got)
		})
	}
}

func TestValidate(t *testing.T) {
	path := field.NewPath("spec", "config").Index(2).Child("opaque", "parameters")
	cfg := VGPUConfig{ComputePolicy: "fast", Priority: "urgent", LogLevel: LogLevelInfo, Enforcement: EnforcementEnabled}
	errs := cfg.Validate(path)
	require.Len(t, errs, 2)
	assert.Equal(t, "spec.config[2].opaque.parameters.computePolicy", errs[0].Field)
	assert.Equal(t, "spec.config[2].opaque.parameters.priority", errs[1].Field)
	assert.Equal(t, field.ErrorTypeNotSupported, errs[1].Type)
	assert.Contains(t, errs[1].Error(), `"high", "low"`)

	assert.Empty(t, (&VGPUConfig{}).Validate(path), "empty fields mean unset")

	claimErrs := (&VGPUConfig{Enforcement: EnforcementEnabled}).ValidateClaimConfig(path)
	require.Len(t, claimErrs, 1)
	assert.Equal(t, field.ErrorTypeForbidden, claimErrs[0].Type)
	assert.Equal(t, "spec.config[2].opaque.parameters.enforcement", claimErrs[0].Field)

	claimErrs = (&VGPUConfig{Burst: BurstAllowed, ReclaimGracePeriodSeconds: ptr.To[int64](5), MemoryLimit: ptr.To(resource.MustParse("8Gi"))}).ValidateClaimConfig(path)
	require.Len(t, claimErrs, 2, "burst and the grace period are class-only, memoryLimit is not")
	assert.Equal(t, "spec.config[2].opaque.parameters.burst", claimErrs[0].Field)
	assert.Equal(t, "spec.config[2].opaque.parameters.reclaimGracePeriodSeconds", claimErrs[1].Field)

	classErrs := (&VGPUConfig{Burst: BurstNever, ReclaimGracePeriodSeconds: ptr.To[int64](5), MemoryLimit: ptr.To(resource.MustParse("8Gi"))}).ValidateClassConfig(path)
	require.Len(t, classErrs, 1, "memoryLimit is claim-only")
	assert.Equal(t, field.ErrorTypeForbidden, classErrs[0].Type)
	assert.Equal(t, "spec.config[2].opaque.parameters.memoryLimit", classErrs[0].Field)
}

func TestWholeBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4Gi", 4 << 30, true},
		{"1.5Gi", 3 << 29, true},
		{"1e3", 1000, true},
		{"1", 1, true},
		{"0", 0, true},
		{"1500m", 0, false},
		{"0.5", 0, false},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
	} {
		got, ok := WholeBytes(resource.MustParse(tc.in))
		assert.Equal(t, tc.ok, ok, tc.in)
		if tc.ok {
			assert.Equal(t, tc.want, got, tc.in)
		}
	}
}

func TestSchemeDefaulting(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))
	obj, err := s.New(SchemeGroupVersion.WithKind(Kind))
	require.NoError(t, err)
	cfg, ok := obj.(*VGPUConfig)
	require.True(t, ok, "scheme builds %T", obj)
	cfg.Priority = PriorityHigh
	s.Default(cfg)
	assert.Equal(t, VGPUConfig{
		TypeMeta:      cfg.TypeMeta,
		ComputePolicy: DefaultComputePolicy,
		Priority:      PriorityHigh,
		LogLevel:      DefaultLogLevel,
		Enforcement:   DefaultEnforcement,
		Burst:         DefaultBurst,

		ReclaimGracePeriodSeconds: ptr.To(DefaultReclaimGracePeriodSeconds),
	}, *cfg)
	assert.Nil(t, cfg.MemoryLimit, "no memoryLimit means the guarantee")
	assert.Equal(t, SchemeGroupVersion.String(), cfg.APIVersion)
	assert.Equal(t, Kind, cfg.Kind)
	assert.Empty(t, cfg.Validate(nil), "defaults are valid")
}

func TestDeepCopy(t *testing.T) {
	orig := &VGPUConfig{Priority: PriorityHigh}
	cp, ok := orig.DeepCopyObject().(*VGPUConfig)
	require.True(t, ok)
	cp.Priority = PriorityLow
	assert.Equal(t, PriorityHigh, orig.Priority)
	var nilCfg *VGPUConfig
	assert.Nil(t, nilCfg.DeepCopy())

	withPointers := &VGPUConfig{MemoryLimit: ptr.To(resource.MustParse("8Gi")), ReclaimGracePeriodSeconds: ptr.To[int64](5)}
	cp = withPointers.DeepCopy()
	cp.MemoryLimit.Add(resource.MustParse("1Gi"))
	*cp.ReclaimGracePeriodSeconds = 6
	assert.Equal(t, "8Gi", withPointers.MemoryLimit.String(), "the copy does not share the quantity")
	assert.EqualValues(t, 5, *withPointers.ReclaimGracePeriodSeconds)
}

func layer(fromClass bool, fields string) Layer {
	raw := `{` + header
	if fields != "" {
		raw += "," + fields
	}
	return Layer{FromClass: fromClass, Raw: []byte(raw + `}`)}
}

// defaulted fills the defaults of the burst fields into a want.
func defaulted(c VGPUConfig) VGPUConfig {
	if c.Burst == "" {
		c.Burst = DefaultBurst
	}
	if c.ReclaimGracePeriodSeconds == nil {
		c.ReclaimGracePeriodSeconds = ptr.To(DefaultReclaimGracePeriodSeconds)
	}
	return c
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		layers  []Layer
		want    VGPUConfig
		wantErr []string
	}{
		{
			name: "no layers gives defaults",
			want: VGPUConfig{ComputePolicy: ComputePolicyStrict, Priority: PriorityLow, LogLevel: LogLevelWarning, Enforcement: EnforcementEnabled},
		},
		{
			name: "claim overrides class per field",
			layers: []Layer{
				layer(true, `"computePolicy":"workConserving","logLevel":"info"`),
				layer(false, `"logLevel":"debug","priority":"high"`),
			},
			want: VGPUConfig{ComputePolicy: ComputePolicyWorkConserving, Priority: PriorityHigh, LogLevel: LogLevelDebug, Enforcement: EnforcementEnabled},
		},
		{
			name: "later class layer wins",
			layers: []Layer{
				layer(true, `"computePolicy":"disabled"`),
				layer(true, `"computePolicy":"strict"`),
			},
			want: VGPUConfig{ComputePolicy: ComputePolicyStrict, Priority: PriorityLow, LogLevel: LogLevelWarning, Enforcement: EnforcementEnabled},
		},
		{
			name:   "class may disable enforcement",
			layers: []Layer{layer(true, `"enforcement":"disabled"`), layer(false, `"priority":"high"`)},
			want:   VGPUConfig{ComputePolicy: ComputePolicyStrict, Priority: PriorityHigh, LogLevel: LogLevelWarning, Enforcement: EnforcementDisabled},
		},
		{
			name:    "claim may not touch enforcement",
			layers:  []Layer{layer(true, ""), layer(false, `"enforcement":"disabled"`)},
			wantErr: []string{"config 1 (from claim)", "enforcement: Forbidden"},
		},
		{
			name:    "claim may not even re-enable enforcement",
			layers:  []Layer{layer(false, `"enforcement":"enabled"`)},
			wantErr: []string{"config 0 (from claim)", "enforcement"},
		},
		{
			name: "claim sets memoryLimit, class the burst policy",
			layers: []Layer{
				layer(true, `"burst":"allowed","reclaimGracePeriodSeconds":120`),
				layer(false, `"memoryLimit":"8Gi"`),
				layer(false, `"memoryLimit":"12Gi"`),
			},
			want: VGPUConfig{ComputePolicy: ComputePolicyStrict, Priority: PriorityLow, LogLevel: LogLevelWarning, Enforcement: EnforcementEnabled,
				MemoryLimit: ptr.To(resource.MustParse("12Gi")), Burst: BurstAllowed, ReclaimGracePeriodSeconds: ptr.To[int64](120)},
		},
		{
			name:   "burst never without a memoryLimit",
			layers: []Layer{layer(true, `"burst":"never"`), layer(false, `"priority":"high"`)},
			want:   VGPUConfig{ComputePolicy: ComputePolicyStrict, Priority: PriorityHigh, LogLevel: LogLevelWarning, Enforcement: EnforcementEnabled, Burst: BurstNever},
		},
		{
			name:    "memoryLimit under burst never",
			layers:  []Layer{layer(true, `"burst":"never"`), layer(false, `"priority":"high"`), layer(false, `"memoryLimit":"8Gi"`)},
			wantErr: []string{"config 2 (from claim)", "memoryLimit: Forbidden", "burst: never"},
		},
		{
			name:    "a later class layer cannot forbid burst after the fact either",
			layers:  []Layer{layer(false, `"memoryLimit":"8Gi"`), layer(true, `"burst":"never"`)},
			wantErr: []string{"config 0 (from claim)", "memoryLimit: Forbidden"},
		},
		{
			name:    "claim may not choose its burst policy",
			layers:  []Layer{layer(true, `"burst":"never"`), layer(false, `"burst":"allowed"`)},
			wantErr: []string{"config 1 (from claim)", "burst: Forbidden"},
		},
		{
			name:    "claim may not choose its grace period",
			layers:  []Layer{layer(false, `"reclaimGracePeriodSeconds":3600`)},
			wantErr: []string{"config 0 (from claim)", "reclaimGracePeriodSeconds: Forbidden"},
		},
		{
			name:    "class may not set a memoryLimit",
			layers:  []Layer{layer(true, `"memoryLimit":"8Gi"`)},
			wantErr: []string{"config 0 (from class)", "memoryLimit: Forbidden", "ResourceClaim"},
		},
		{
			name:    "malformed layer names its index",
			layers:  []Layer{layer(true, ""), {FromClass: true, Raw: []byte(`{` + header + `,"cores":30}`)}},
			wantErr: []string{"config 1 (from class)", `unknown field "cores"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.layers)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			tc.want = defaulted(tc.want)
			tc.want.APIVersion = SchemeGroupVersion.String()
			tc.want.Kind = Kind
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzDecode checks that Decode never panics, that whatever it accepts is
// valid, and that accepted configs survive an encode/decode round trip.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{` + header + `}`))
	f.Add([]byte(`{` + header + `,"computePolicy":"workConserving","priority":"high","logLevel":"debug","enforcement":"disabled"}`))
	f.Add([]byte(`{` + header + `,"priority":"high","priority":"low"}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod"}`))
	f.Add([]byte(`{` + header + `,"logLevel":null}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"kind":7}`))
	f.Add([]byte(`{` + header + `,"memoryLimit":"1.5Gi","burst":"never","reclaimGracePeriodSeconds":30}`))
	f.Add([]byte(`{` + header + `,"memoryLimit":"1e40"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := Decode(raw)
		if err != nil {
			require.Nil(t, cfg)
			return
		}
		require.Empty(t, cfg.Validate(nil), "accepted config must validate")
		encoded, err := json.Marshal(cfg)
		require.NoError(t, err)
		again, err := Decode(encoded)
		require.NoError(t, err, "re-decoding %s", encoded)
		// A quantity's internal form may change in the round trip
		// (1.5Gi becomes 1536Mi); its encoding must not.
		reencoded, err := json.Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(encoded), string(reencoded))
	})
}
