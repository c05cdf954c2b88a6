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
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// mib is HAMi's unit of GPU memory and the rounding step for percentages.
const mib = 1 << 20

// PatchOp is one RFC 6902 JSON patch operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Translation is what a HAMi pod needs in DRA.
type Translation struct {
	// Templates must exist in the pod's namespace before the pod's claims
	// are created. Distinct and sorted by name.
	Templates []*resourceapi.ResourceClaimTemplate
	// Patch turns the pod into its DRA form: HAMi resources removed from
	// the containers, one pod resource claim per GPU container.
	Patch []PatchOp
}

// gpuRequest is what one container asks for in HAMi terms.
type gpuRequest struct {
	count         int64
	memoryMiB     int64 // 0: not given
	memoryPercent int64 // 0: not given
	cores         int64
	priority      api.Priority // "": not given
}

// Translate converts the HAMi requests of pod (in namespace) into DRA. It
// returns nil when the pod asks for no HAMi resource, and an error naming
// each offending field when the pod asks for something that cannot be
// expressed; it never passes such a pod through half translated.
// products are the GPU products present in the cluster (see Products);
// only gpumem-percentage needs them.
func Translate(namespace string, pod *corev1.Pod, cfg Config, products []Product) (*Translation, error) {
	f, errs := parseFilters(pod.Annotations)
	existing := map[string]bool{}
	for _, c := range pod.Spec.ResourceClaims {
		existing[c.Name] = true
	}

	templates := map[string]*resourceapi.ResourceClaimTemplate{}
	var claims []corev1.PodResourceClaim
	var patch []PatchOp
	for _, group := range []struct {
		field      string
		containers []corev1.Container
	}{
		{"initContainers", pod.Spec.InitContainers},
		{"containers", pod.Spec.Containers},
	} {
		for i := range group.containers {
			c := &group.containers[i]
			path := field.NewPath("spec", group.field).Index(i)
			req, found, cErrs := containerRequest(c, cfg.Resources, path.Child("resources"))
			errs = append(errs, cErrs...)
			if !found || len(cErrs) > 0 {
				continue
			}
			spec, sErrs := claimSpec(req, f, cfg, products, path)
			errs = append(errs, sErrs...)
			if len(sErrs) > 0 {
				continue
			}
			tmpl, err := template(namespace, spec)
			if err != nil {
				errs = append(errs, field.InternalError(path, err))
				continue
			}
			claimName := podClaimName(c.Name)
			if existing[claimName] {
				errs = append(errs, field.Invalid(field.NewPath("spec", "resourceClaims"), claimName,
					"the pod already has a resource claim with the name that the translation of container "+strconv.Quote(c.Name)+" needs"))
				continue
			}
			templates[tmpl.Name] = tmpl
			claims = append(claims, corev1.PodResourceClaim{Name: claimName, ResourceClaimTemplateName: ptr.To(tmpl.Name)})
			patch = append(patch, PatchOp{
				Op:    "replace",
				Path:  fmt.Sprintf("/spec/%s/%d/resources", group.field, i),
				Value: translatedResources(c.Resources, cfg.Resources, claimName),
			})
		}
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if len(claims) == 0 {
		return nil, nil
	}
	if len(pod.Spec.ResourceClaims) == 0 {
		patch = append(patch, PatchOp{Op: "add", Path: "/spec/resourceClaims", Value: claims})
	} else {
		for _, c := range claims {
			patch = append(patch, PatchOp{Op: "add", Path: "/spec/resourceClaims/-", Value: c})
		}
	}
	out := &Translation{Patch: patch}
	for _, name := range slices.Sorted(maps.Keys(templates)) {
		out.Templates = append(out.Templates, templates[name])
	}
	return out, nil
}

// containerRequest reads the HAMi resources of c. found is false when c
// asks for none of them.
func containerRequest(c *corev1.Container, resNames ResourceNames, path *field.Path) (gpuRequest, bool, field.ErrorList) {
	var errs field.ErrorList
	found := false
	value := func(name corev1.ResourceName, lo, hi int64) (int64, bool) {
		q, ok := c.Resources.Limits[name]
		p := path.Child("limits").Key(string(name))
		if !ok {
			// Extended resources must be limits, but a request alone is
			// still the user's intent; read it rather than drop it.
			if q, ok = c.Resources.Requests[name]; !ok {
				return 0, false
			}
			p = path.Child("requests").Key(string(name))
		}
		found = true
		v, isInt := q.AsInt64()
		switch {
		case !isInt:
			errs = append(errs, field.Invalid(p, q.String(), "must be a whole number"))
		case v < lo || v > hi:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be between %d and %d", lo, hi)))
		default:
			return v, true
		}
		return 0, false
	}
	var r gpuRequest
	count, hasCount := value(resNames.Count, 1, resourceapi.AllocationResultsMaxSize)
	r.memoryMiB, _ = value(resNames.Memory, 1, 1<<30)
	r.memoryPercent, _ = value(resNames.MemoryPercentage, 1, 100)
	r.cores, _ = value(resNames.Cores, 0, names.CoresCapacity)
	if prio, ok := value(resNames.Priority, 0, 1); ok {
		// HAMi: 0 is high priority, 1 low.
		r.priority = api.PriorityLow
		if prio == 0 {
			r.priority = api.PriorityHigh
		}
	}
	// HAMi's own webhook assumes one GPU when only memory or cores are given.
	r.count = 1
	if hasCount {
		r.count = count
	}
	return r, found, errs
}

// claimSpec builds the claim for one container's request.
func claimSpec(r gpuRequest, f filters, cfg Config, products []Product, path *field.Path) (resourceapi.ResourceClaimSpec, field.ErrorList) {
	class := cfg.DeviceClassName
	switch f.mode {
	case VGPUModeMIG:
		return migClaimSpec(r, f, cfg, products, path)
	case VGPUModeMPS:
		if r.priority != "" {
			hamiPriority := map[api.Priority]int{api.PriorityHigh: 0, api.PriorityLow: 1}[r.priority]
			return resourceapi.ResourceClaimSpec{}, field.ErrorList{field.Invalid(path.Child("resources", "limits").Key(string(cfg.Resources.Priority)), hamiPriority,
				"nvidia.com/vgpu-mode mps runs the GPU's claims at the same time, each on its share of the SMs; a priority orders time-sliced claims and does not apply")}
		}
		class = cfg.MPSDeviceClassName
		if r.cores == 0 {
			// An MPS client always has a share of the SMs: no cores (or
			// HAMi's 0) means all of them, as the MPS device's default.
			r.cores = names.CoresCapacity
		}
	}
	selectors := celSelectors(f.selectors(cfg.DriverName, names.AttrUUID))
	capacity := func(memory int64) *resourceapi.CapacityRequirements {
		reqs := map[resourceapi.QualifiedName]resource.Quantity{}
		if memory > 0 {
			reqs[names.CapacityMemory] = *resource.NewQuantity(memory, resource.BinarySI)
		}
		if r.cores > 0 {
			reqs[names.CapacityCores] = *resource.NewQuantity(r.cores, resource.DecimalSI)
		}
		if len(reqs) == 0 {
			return nil
		}
		return &resourceapi.CapacityRequirements{Requests: reqs}
	}

	request := resourceapi.DeviceRequest{Name: requestName}
	// gpumem wins over gpumem-percentage, as in HAMi.
	if r.memoryMiB == 0 && r.memoryPercent > 0 {
		var subs []resourceapi.DeviceSubRequest
		for _, p := range products {
			if p.Profile != "" || !f.allowsProduct(p.Name) {
				continue
			}
			// Round down to whole MiB, HAMi's unit; the device's request
			// policy may round up again to its own step.
			memory := p.MemoryBytes * r.memoryPercent / 100 / mib * mib
			if r.memoryPercent == 100 {
				memory = p.MemoryBytes
			}
			productSelector := fmt.Sprintf("device.attributes[%s].%s == %s",
				strconv.Quote(cfg.DriverName), names.AttrProductName, strconv.Quote(p.Name))
			subs = append(subs, resourceapi.DeviceSubRequest{
				Name:            fmt.Sprintf("%s-%d", requestName, len(subs)),
				DeviceClassName: class,
				Selectors:       append(celSelectors([]string{productSelector}), selectors...),
				AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
				Count:           r.count,
				Capacity:        capacity(memory),
			})
		}
		percentPath := path.Child("resources", "limits").Key(string(cfg.Resources.MemoryPercentage))
		switch {
		case len(subs) == 0:
			return resourceapi.ResourceClaimSpec{}, field.ErrorList{field.Invalid(percentPath, r.memoryPercent,
				"no GPU product that the pod may use is published in the cluster's ResourceSlices, so the percentage has no size; use "+string(cfg.Resources.Memory)+" instead")}
		case len(subs) > resourceapi.FirstAvailableDeviceRequestMaxSize:
			return resourceapi.ResourceClaimSpec{}, field.ErrorList{field.Invalid(percentPath, r.memoryPercent,
				fmt.Sprintf("the cluster has %d GPU products but a request can list at most %d; narrow them with the %s annotation or use %s",
					len(subs), resourceapi.FirstAvailableDeviceRequestMaxSize, AnnotationUseGPUType, cfg.Resources.Memory))}
		}
		request.FirstAvailable = subs
	} else {
		request.Exactly = &resourceapi.ExactDeviceRequest{
			DeviceClassName: class,
			Selectors:       selectors,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           r.count,
			Capacity:        capacity(r.memoryMiB * mib),
		}
	}

	return finishSpec(r, request, cfg, names.AttrUUID, path)
}

// finishSpec makes the claim of request: N different GPUs for a count of N
// (distinct on uuidAttr), and HAMi's priority as the opaque config.
func finishSpec(r gpuRequest, request resourceapi.DeviceRequest, cfg Config, uuidAttr resourceapi.QualifiedName, path *field.Path) (resourceapi.ResourceClaimSpec, field.ErrorList) {
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{request}}}
	if r.count > 1 {
		// HAMi gives N different GPUs; without this constraint shares of
		// one GPU could be allocated several times.
		spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
			Requests:          []string{requestName},
			DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(cfg.DriverName + "/" + string(uuidAttr))),
		}}
	}
	if r.priority != "" {
		raw, err := json.Marshal(api.VGPUConfig{
			TypeMeta: metav1.TypeMeta{APIVersion: api.SchemeGroupVersion.String(), Kind: api.Kind},
			Priority: r.priority,
		})
		if err != nil {
			return resourceapi.ResourceClaimSpec{}, field.ErrorList{field.InternalError(path, err)}
		}
		spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{
			DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: cfg.DriverName, Parameters: runtime.RawExtension{Raw: raw}},
			},
		}}
	}
	return spec, nil
}

// migClaimSpec builds the claim of a request in MIG mode: HAMi picks the
// smallest MIG profile whose memory holds nvidia.com/gpumem. The request
// lists the fitting profiles the cluster publishes, smallest first, as
// alternatives of the MIG class (the scheduler takes the first one with a
// free placement), each asking an instance to itself. Cores do not apply:
// an instance's compute is its slices, as in HAMi.
func migClaimSpec(r gpuRequest, f filters, cfg Config, products []Product, path *field.Path) (resourceapi.ResourceClaimSpec, field.ErrorList) {
	limits := path.Child("resources", "limits")
	if r.memoryMiB == 0 {
		return resourceapi.ResourceClaimSpec{}, field.ErrorList{field.Required(limits.Key(string(cfg.Resources.Memory)),
			"nvidia.com/vgpu-mode mig picks the MIG profile by memory; "+string(cfg.Resources.MemoryPercentage)+" is not supported there")}
	}
	var fitting []Product
	for _, p := range products {
		if p.Profile != "" && p.MemoryBytes >= r.memoryMiB*mib && f.allowsProduct(p.Name) {
			fitting = append(fitting, p)
		}
	}
	slices.SortStableFunc(fitting, func(a, b Product) int { return cmp.Compare(a.MemoryBytes, b.MemoryBytes) })
	if len(fitting) == 0 {
		return resourceapi.ResourceClaimSpec{}, field.ErrorList{field.Invalid(limits.Key(string(cfg.Resources.Memory)), r.memoryMiB,
			"no MIG profile with this much memory, of a GPU the pod may use, is published in the cluster's ResourceSlices")}
	}
	// Larger profiles past the limit of alternatives would be tried last anyway.
	fitting = fitting[:min(len(fitting), resourceapi.FirstAvailableDeviceRequestMaxSize)]
	filters := f.selectors(cfg.DriverName, names.AttrParentUUID)
	var subs []resourceapi.DeviceSubRequest
	for _, p := range fitting {
		profile := fmt.Sprintf("device.attributes[%s].%s == %s && device.attributes[%s].%s == %s",
			strconv.Quote(cfg.DriverName), names.AttrProfile, strconv.Quote(p.Profile),
			strconv.Quote(cfg.DriverName), names.AttrProductName, strconv.Quote(p.Name))
		subs = append(subs, resourceapi.DeviceSubRequest{
			Name:            fmt.Sprintf("%s-%d", requestName, len(subs)),
			DeviceClassName: cfg.MIGDeviceClassName,
			Selectors:       celSelectors(append([]string{profile}, filters...)),
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           r.count,
		})
	}
	return finishSpec(r, resourceapi.DeviceRequest{Name: requestName, FirstAvailable: subs}, cfg, names.AttrParentUUID, path)
}

func celSelectors(exprs []string) []resourceapi.DeviceSelector {
	out := make([]resourceapi.DeviceSelector, len(exprs))
	for i, e := range exprs {
		out[i] = resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// template names a claim spec by its content: equal shapes in a namespace
// share one template, and the name is stable across webhook replicas.
func template(namespace string, spec resourceapi.ResourceClaimSpec) (*resourceapi.ResourceClaimTemplate, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode claim spec: %w", err)
	}
	sum := sha256.Sum256(raw)
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ClaimNamePrefix + hex.EncodeToString(sum[:])[:20],
			Namespace: namespace,
			Labels:    map[string]string{ManagedByLabel: ManagedByValue, TemplateLabel: "true"},
		},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec},
	}, nil
}

// podClaimName is the pod-level claim name for a container. Container names
// are DNS labels like claim names; a name too long for the prefix is hashed.
func podClaimName(container string) string {
	name := ClaimNamePrefix + container
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(container))
	return ClaimNamePrefix + hex.EncodeToString(sum[:])[:20]
}

// translatedResources drops the HAMi resources and adds the claim.
func translatedResources(in corev1.ResourceRequirements, resNames ResourceNames, claim string) corev1.ResourceRequirements {
	out := *in.DeepCopy()
	for _, name := range resNames.all() {
		delete(out.Limits, name)
		delete(out.Requests, name)
	}
	if len(out.Limits) == 0 {
		out.Limits = nil
	}
	if len(out.Requests) == 0 {
		out.Requests = nil
	}
	out.Claims = append(out.Claims, corev1.ResourceClaim{Name: claim})
	return out
}
