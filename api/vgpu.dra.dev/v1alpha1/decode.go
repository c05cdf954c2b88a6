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
	stdjson "encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// scheme knows only VGPUConfig, so the decoder cannot be tricked into
// building any other type.
var scheme = newScheme()

// strictSerializer rejects unknown and duplicate fields.
var strictSerializer = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
	json.SerializerOptions{Strict: true})

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// AddToScheme only registers static types: it fails on programming
	// errors only, caught by every test of this package.
	utilruntime.Must(AddToScheme(s))
	return s
}

// Decode parses one opaque VGPUConfig strictly and validates it. It does
// not apply defaults: an empty field means "not set" so that Resolve can
// merge layers. Errors name the offending field.
func Decode(raw []byte) (*VGPUConfig, error) {
	if len(raw) == 0 {
		return nil, errors.New("decode VGPUConfig: empty parameters")
	}
	gvk, err := json.DefaultMetaFactory.Interpret(raw)
	if err != nil {
		return nil, fmt.Errorf("decode VGPUConfig: %w", err)
	}
	var typeErrs field.ErrorList
	switch {
	case gvk.Group == "" && gvk.Version == "":
		typeErrs = append(typeErrs, field.Required(field.NewPath("apiVersion"), "must be "+SchemeGroupVersion.String()))
	case gvk.GroupVersion() != SchemeGroupVersion:
		typeErrs = append(typeErrs, field.NotSupported(field.NewPath("apiVersion"), gvk.GroupVersion().String(), []string{SchemeGroupVersion.String()}))
	}
	switch gvk.Kind {
	case "":
		typeErrs = append(typeErrs, field.Required(field.NewPath("kind"), "must be "+Kind))
	case Kind:
	default:
		typeErrs = append(typeErrs, field.NotSupported(field.NewPath("kind"), gvk.Kind, []string{Kind}))
	}
	if len(typeErrs) > 0 {
		return nil, fmt.Errorf("decode VGPUConfig: %w", typeErrs.ToAggregate())
	}

	if err := checkQuantities(raw); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", SchemeGroupVersion, Kind, err)
	}
	cfg := &VGPUConfig{}
	// The version and kind are checked above, so the serializer decodes
	// into cfg itself.
	if _, _, err := strictSerializer.Decode(raw, nil, cfg); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", SchemeGroupVersion, Kind, err)
	}
	if errs := cfg.Validate(nil); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s %s: %w", SchemeGroupVersion, Kind, errs.ToAggregate())
	}
	return cfg, nil
}

// checkQuantities refuses a quantity field that is not a quantity, naming
// the field: the serializer's own error names neither the field nor the
// value. A quantity is a string such as "12Gi" or a JSON number.
func checkQuantities(raw []byte) error {
	var fields map[string]stdjson.RawMessage
	if err := stdjson.Unmarshal(raw, &fields); err != nil {
		return nil // not an object: the serializer says so
	}
	v, ok := fields["memoryLimit"]
	if !ok {
		return nil
	}
	path := field.NewPath("memoryLimit")
	var s string
	switch {
	case len(v) > 0 && v[0] == '"':
		if err := stdjson.Unmarshal(v, &s); err != nil {
			return field.Invalid(path, string(v), "must be a quantity such as \"12Gi\" or a whole number of bytes")
		}
	case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'):
		s = string(v)
	default:
		return field.Invalid(path, string(v), "must be a quantity such as \"12Gi\" or a whole number of bytes")
	}
	if _, err := resource.ParseQuantity(s); err != nil {
		return field.Invalid(path, s, fmt.Sprintf("must be a quantity such as \"12Gi\" or a whole number of bytes (%v)", err))
	}
	return nil
}
