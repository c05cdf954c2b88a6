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

package hami

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// Values end up inside CEL string literals. Restricting them to the
// characters real product names and UUIDs use rules out injection without
// relying on escaping rules that differ between Go and CEL.
var (
	gpuTypePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$`)
	uuidPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
)

// filters are the GPU restrictions of HAMi's pod annotations, and its
// sharing mode.
type filters struct {
	useTypes, noUseTypes []string
	useUUIDs, noUseUUIDs []string
	// mode is nvidia.com/vgpu-mode, VGPUModeHAMiCore when not given.
	mode string
}

func parseFilters(annotations map[string]string) (filters, field.ErrorList) {
	path := field.NewPath("metadata", "annotations")
	var f filters
	var errs field.ErrorList
	parse := func(key string, pattern *regexp.Regexp, what string) []string {
		raw, ok := annotations[key]
		if !ok {
			return nil
		}
		var values []string
		bad := 0
		for v := range strings.SplitSeq(raw, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			if !pattern.MatchString(v) {
				errs = append(errs, field.Invalid(path.Key(key), v, fmt.Sprintf("not a %s: up to 64 characters of %s", what, pattern.String())))
				bad++
				continue
			}
			values = append(values, v)
		}
		if len(values) == 0 && bad == 0 {
			errs = append(errs, field.Invalid(path.Key(key), raw, "lists no "+what))
		}
		return values
	}
	f.useTypes = parse(AnnotationUseGPUType, gpuTypePattern, "GPU type")
	f.noUseTypes = parse(AnnotationNoUseGPUType, gpuTypePattern, "GPU type")
	f.useUUIDs = parse(AnnotationUseGPUUUID, uuidPattern, "GPU UUID")
	f.noUseUUIDs = parse(AnnotationNoUseGPUUUID, uuidPattern, "GPU UUID")
	switch mode := annotations[AnnotationVGPUMode]; mode {
	case "":
		f.mode = VGPUModeHAMiCore
	case VGPUModeHAMiCore, VGPUModeMIG, VGPUModeMPS:
		f.mode = mode
	default:
		errs = append(errs, field.NotSupported(path.Key(AnnotationVGPUMode), mode, []string{VGPUModeHAMiCore, VGPUModeMIG, VGPUModeMPS}))
	}
	if f.mode == VGPUModeMPS {
		// MPS serves whole GPUs not in MIG mode: a MIG instance's UUID
		// could never match, and the pod would stay pending.
		for _, u := range f.useUUIDs {
			if strings.HasPrefix(u, "MIG-") {
				errs = append(errs, field.Invalid(path.Key(AnnotationUseGPUUUID), u,
					"names a MIG instance, but nvidia.com/vgpu-mode mps runs on whole GPUs that are not in MIG mode; name the GPU's UUID (GPU-…) or use nvidia.com/vgpu-mode mig"))
			}
		}
	}
	return f, errs
}

// selectors renders the filters as CEL. GPU types match as HAMi does: a
// case-insensitive substring of the product name ("A100" matches "NVIDIA
// A100-SXM4-40GB"). UUIDs match exactly, on uuidAttr: the GPU's uuid, or a
// MIG device's parentUUID.
func (f filters) selectors(driver string, uuidAttr resourceapi.QualifiedName) []string {
	product := fmt.Sprintf("device.attributes[%s].%s.lowerAscii()", strconv.Quote(driver), names.AttrProductName)
	uuid := fmt.Sprintf("device.attributes[%s].%s", strconv.Quote(driver), uuidAttr)
	anyType := func(types []string) string {
		terms := make([]string, len(types))
		for i, t := range types {
			terms[i] = fmt.Sprintf("%s.contains(%s)", product, strconv.Quote(strings.ToLower(t)))
		}
		return strings.Join(terms, " || ")
	}
	anyUUID := func(uuids []string) string {
		quoted := make([]string, len(uuids))
		for i, u := range uuids {
			quoted[i] = strconv.Quote(u)
		}
		return fmt.Sprintf("%s in [%s]", uuid, strings.Join(quoted, ", "))
	}
	var out []string
	if len(f.useTypes) > 0 {
		out = append(out, anyType(f.useTypes))
	}
	if len(f.noUseTypes) > 0 {
		out = append(out, "!("+anyType(f.noUseTypes)+")")
	}
	if len(f.useUUIDs) > 0 {
		out = append(out, anyUUID(f.useUUIDs))
	}
	if len(f.noUseUUIDs) > 0 {
		out = append(out, "!("+anyUUID(f.noUseUUIDs)+")")
	}
	return out
}

// allowsProduct applies the type filters to a product name, so that
// percentage requests only list products the pod may get.
func (f filters) allowsProduct(name string) bool {
	lower := strings.ToLower(name)
	matches := func(types []string) bool {
		for _, t := range types {
			if strings.Contains(lower, strings.ToLower(t)) {
				return true
			}
		}
		return false
	}
	if len(f.useTypes) > 0 && !matches(f.useTypes) {
		return false
	}
	return !matches(f.noUseTypes)
}
