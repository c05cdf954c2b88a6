package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	}, *cfg)
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
}

func layer(fromClass bool, fields string) Layer {
	raw := `{` + header
	if fields != "" {
		raw += "," + fields
	}
	return Layer{FromClass: fromClass, Raw: []byte(raw + `}`)}
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
		require.Equal(t, cfg, again)
	})
}
