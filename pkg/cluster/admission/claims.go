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

package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/quota"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// QuotaAdmitter charges a new claim to its namespace's GPU quota.
type QuotaAdmitter interface {
	Admit(ctx context.Context, claim *resourceapi.ResourceClaim, dryRun bool) error
}

var (
	claimKind    = metav1.GroupVersionKind{Group: resourceapi.GroupName, Version: "v1", Kind: "ResourceClaim"}
	templateKind = metav1.GroupVersionKind{Group: resourceapi.GroupName, Version: "v1", Kind: "ResourceClaimTemplate"}
)

// ClaimValidator is the validating webhook for ResourceClaims and
// ResourceClaimTemplates. It judges creates only: claim and template specs
// are immutable, and refusing an update would also block the removal of
// finalizers from objects admitted under older rules.
type ClaimValidator struct {
	DriverName string
	Classes    *ClassMatcher
	// AdminOnlyClasses may only be used in AdminNamespaces.
	AdminOnlyClasses sets.Set[string]
	AdminNamespaces  sets.Set[string]
	// MaxMemoryBytes is the largest memory request accepted for one
	// device; larger ones are typos (e.g. "4G" meant as MiB count).
	MaxMemoryBytes int64
	// LargestGPUMemory returns the largest memory capacity published, 0
	// when none; requests above it get a warning (a bigger GPU may join).
	LargestGPUMemory func() int64
	// Quota may be nil (no quota enforcement).
	Quota QuotaAdmitter
	// Grants sizes requests the way the allocator rounds them, for the
	// rounding warning; nil means no such warning.
	Grants quota.Granter
}

// roundingWarnThreshold is how much larger than asked a grant may be
// before admission warns: the device's minimum or step makes the
// claim (and the namespace's quota) pay for more than it asked.
const roundingWarnThreshold = 1.10

// Admit implements AdmitFunc.
func (v *ClaimValidator) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create {
		return allowed()
	}
	switch req.Kind {
	case claimKind:
		var claim resourceapi.ResourceClaim
		if err := json.Unmarshal(req.Object.Raw, &claim); err != nil {
			return denied(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("decode ResourceClaim: %v", err))
		}
		errs, warnings := v.validateSpec(ctx, req.Namespace, &claim.Spec, field.NewPath("spec"))
		if len(errs) > 0 {
			return invalid(req, errs)
		}
		if v.Quota != nil {
			// The API server fills namespace and UID before validating
			// admission; take them from the request where the object
			// lacks them (e.g. in a dry run).
			if claim.Namespace == "" {
				claim.Namespace = req.Namespace
			}
			if err := v.Quota.Admit(ctx, &claim, ptr.Deref(req.DryRun, false)); err != nil {
				if errors.Is(err, quota.ErrExceeded) {
					return denied(http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
				}
				klog.FromContext(ctx).Error(err, "GPU quota check failed")
				return denied(http.StatusForbidden, metav1.StatusReasonForbidden, "GPU quota: "+err.Error())
			}
		}
		return allowed(warnings...)
	case templateKind:
		var tmpl resourceapi.ResourceClaimTemplate
		if err := json.Unmarshal(req.Object.Raw, &tmpl); err != nil {
			return denied(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("decode ResourceClaimTemplate: %v", err))
		}
		errs, warnings := v.validateSpec(ctx, req.Namespace, &tmpl.Spec.Spec, field.NewPath("spec", "spec"))
		if len(errs) > 0 {
			return invalid(req, errs)
		}
		return allowed(warnings...)
	default:
		return denied(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("this webhook validates resource.k8s.io/v1 ResourceClaims and ResourceClaimTemplates, not %s; check the webhook configuration", req.Kind.String()))
	}
}

func invalid(req *admissionv1.AdmissionRequest, errs field.ErrorList) *admissionv1.AdmissionResponse {
	return denied(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		fmt.Sprintf("%s %q is invalid: %v", req.Kind.Kind, req.Name, errs.ToAggregate()))
}

// validateSpec checks the parts of a claim spec that concern this driver.
func (v *ClaimValidator) validateSpec(ctx context.Context, namespace string, spec *resourceapi.ResourceClaimSpec, path *field.Path) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	devicesPath := path.Child("devices")
	var ourRequests []string
	for i, req := range spec.Devices.Requests {
		reqPath := devicesPath.Child("requests").Index(i)
		ours := false
		if e := req.Exactly; e != nil {
			if v.Classes.IsOurs(e.DeviceClassName) {
				ours = true
				reqErrs := v.validateRequest(namespace, spec, req.Name, e.DeviceClassName, e.AllocationMode, e.Count, e.Capacity, reqPath.Child("exactly"))
				errs = append(errs, reqErrs...)
				if len(reqErrs) == 0 {
					warnings = append(warnings, v.roundingWarnings(ctx, req.Name, e.DeviceClassName, e.Selectors, e.Capacity)...)
				}
			}
		}
		for j, sub := range req.FirstAvailable {
			if v.Classes.IsOurs(sub.DeviceClassName) {
				ours = true
				reqErrs := v.validateRequest(namespace, spec, req.Name, sub.DeviceClassName, sub.AllocationMode, sub.Count, sub.Capacity, reqPath.Child("firstAvailable").Index(j))
				errs = append(errs, reqErrs...)
				if len(reqErrs) == 0 {
					warnings = append(warnings, v.roundingWarnings(ctx, req.Name+"/"+sub.Name, sub.DeviceClassName, sub.Selectors, sub.Capacity)...)
				}
			}
		}
		if ours {
			ourRequests = append(ourRequests, req.Name)
		}
	}
	if len(ourRequests) > 1 && !distinct(spec, ourRequests...) {
		// Two requests on one GPU are legitimate (two containers each with
		// its own slice), so this is only a warning.
		warnings = append(warnings, fmt.Sprintf("requests %q may be allocated on the same GPU; if they must be different GPUs add a constraint {distinctAttribute: %s/%s}",
			ourRequests, v.DriverName, names.AttrUUID))
	}
	for i, cfg := range spec.Devices.Config {
		if cfg.Opaque == nil || cfg.Opaque.Driver != v.DriverName {
			continue
		}
		p := devicesPath.Child("config").Index(i).Child("opaque", "parameters")
		parsed, err := api.Decode(cfg.Opaque.Parameters.Raw)
		var fieldErr *field.Error
		switch {
		case errors.As(err, &fieldErr):
			// A field the decoder names (a memoryLimit that is no
			// quantity): the error's path is that field's.
			errs = append(errs, &field.Error{Type: fieldErr.Type, Field: p.Child(fieldErr.Field).String(),
				BadValue: fieldErr.BadValue, Detail: fieldErr.Detail})
			continue
		case err != nil:
			errs = append(errs, field.Invalid(p, string(cfg.Opaque.Parameters.Raw), err.Error()))
			continue
		}
		errs = append(errs, parsed.ValidateClaimConfig(p)...)
		errs = append(errs, v.validateMPSComputePolicy(spec, cfg.Requests, parsed.ComputePolicy, p.Child("computePolicy"))...)
		if parsed.MemoryLimit != nil {
			errs = append(errs, v.validateMemoryLimit(spec, cfg.Requests, *parsed.MemoryLimit, p.Child("memoryLimit"))...)
		}
	}
	errs = append(errs, v.validateMPSConstraints(spec, devicesPath.Child("constraints"))...)
	errs = append(errs, v.validateMPSDeviceCount(spec, devicesPath.Child("requests"))...)
	if largest := v.LargestGPUMemory(); largest > 0 {
		for _, req := range spec.Devices.Requests {
			for _, capacity := range requestCapacities(req) {
				if q, ok := v.capacity(capacity, names.CapacityMemory); ok && q.Value() > largest {
					warnings = append(warnings, fmt.Sprintf("request %q asks for %s of GPU memory but the largest GPU published has %s; it stays pending until such a GPU joins",
						req.Name, q.String(), resource.NewQuantity(largest, resource.BinarySI).String()))
				}
			}
		}
	}
	return errs, warnings
}

// ourRequest is one request or subrequest of this driver's classes.
type ourRequest struct {
	parent, sub string // sub is empty for an exactly request
	class       string
	capacity    *resourceapi.CapacityRequirements
}

func (r ourRequest) String() string {
	if r.sub == "" {
		return r.parent
	}
	return r.parent + "/" + r.sub
}

// ourRequests lists the requests and subrequests of spec that this
// driver's classes allocate.
func (v *ClaimValidator) ourRequests(spec *resourceapi.ResourceClaimSpec) []ourRequest {
	var out []ourRequest
	for _, req := range spec.Devices.Requests {
		if e := req.Exactly; e != nil && v.Classes.IsOurs(e.DeviceClassName) {
			out = append(out, ourRequest{parent: req.Name, class: e.DeviceClassName, capacity: e.Capacity})
		}
		for _, sub := range req.FirstAvailable {
			if v.Classes.IsOurs(sub.DeviceClassName) {
				out = append(out, ourRequest{parent: req.Name, sub: sub.Name, class: sub.DeviceClassName, capacity: sub.Capacity})
			}
		}
	}
	return out
}

// appliesTo reports whether a claim config listing requests applies to r:
// an empty list means every request, a request's name all its subrequests.
func appliesTo(requests []string, r ourRequest) bool {
	return len(requests) == 0 || slices.Contains(requests, r.parent) || (r.sub != "" && slices.Contains(requests, r.String()))
}

// validateMemoryLimit checks a claim config's memoryLimit (a whole
// positive number of bytes, Validate checked that): no larger than the
// largest GPU published (or, before any is, than any GPU has), and, for
// every request of this driver the config applies to, no smaller than the
// memory the request asks for (its guarantee), in a class that allows
// burst. A request that asks for no memory gets a whole GPU's, so a limit
// is meaningless there. The kubelet plugin checks again against the
// allocated GPU at prepare.
func (v *ClaimValidator) validateMemoryLimit(spec *resourceapi.ResourceClaimSpec, requests []string, limit resource.Quantity, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if largest := v.LargestGPUMemory(); largest > 0 && limit.Cmp(*resource.NewQuantity(largest, resource.BinarySI)) > 0 {
		errs = append(errs, field.Invalid(p, limit.String(), fmt.Sprintf("more than the largest GPU published has (%s)",
			resource.NewQuantity(largest, resource.BinarySI).String())))
	} else if limit.Cmp(*resource.NewQuantity(v.MaxMemoryBytes, resource.BinarySI)) > 0 {
		errs = append(errs, field.Invalid(p, limit.String(), fmt.Sprintf("more than any GPU has (limit %s); check the unit",
			resource.NewQuantity(v.MaxMemoryBytes, resource.BinarySI).String())))
	}
	for _, r := range v.ourRequests(spec) {
		if !appliesTo(requests, r) {
			continue
		}
		if v.Classes.IsMPS(r.class) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("request %q uses the MPS DeviceClass %q, whose memory limit is the memory it asks for: MPS claims do not burst", r, r.class)))
			continue
		}
		if v.Classes.BurstPolicy(r.class) == api.BurstNever {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("request %q uses DeviceClass %q, which sets burst: never", r, r.class)))
			continue
		}
		var memory resource.Quantity
		found := false
		if r.capacity != nil {
			memory, found = v.capacity(r.capacity, names.CapacityMemory)
		}
		switch {
		case !found:
			errs = append(errs, field.Invalid(p, limit.String(), fmt.Sprintf(
				"request %q asks for no memory and so gets a whole GPU's; set its capacity.requests.memory (the guarantee) below the limit", r)))
		case limit.Cmp(memory) < 0:
			errs = append(errs, field.Invalid(p, limit.String(), fmt.Sprintf(
				"less than the %s of memory request %q asks for (its guarantee); the limit must be at least the guarantee", memory.String(), r)))
		}
	}
	return errs
}

// roundingWarnings warns about each requested amount that one device of
// the request grants more than roundingWarnThreshold times of (the
// published minimum or step rounds it up): the limit and the quota charge
// are the granted amount. A request no GPU can size now gets no warning.
func (v *ClaimValidator) roundingWarnings(ctx context.Context, name, class string, selectors []resourceapi.DeviceSelector, capacity *resourceapi.CapacityRequirements) []string {
	if v.Grants == nil || capacity == nil {
		return nil
	}
	granted, err := v.Grants.Grant(ctx, class, selectors, capacity)
	if err != nil {
		if !errors.Is(err, quota.ErrNoDevice) {
			klog.FromContext(ctx).Error(err, "Sizing a request for the rounding warning", "request", name)
		}
		return nil
	}
	var warnings []string
	if q, ok := v.capacity(capacity, names.CapacityMemory); ok && roundedUp(q, granted.MemoryBytes) {
		warnings = append(warnings, fmt.Sprintf("request %q asks for %s of GPU memory, which the GPUs' published minimum and step round up to %s: that is the limit and what the GPU quota charges",
			name, q.String(), resource.NewQuantity(granted.MemoryBytes, resource.BinarySI).String()))
	}
	if q, ok := v.capacity(capacity, names.CapacityCores); ok && roundedUp(q, granted.Cores) {
		warnings = append(warnings, fmt.Sprintf("request %q asks for %s cores, which the GPUs' published policy rounds up to %d: that is the limit and what the GPU quota charges",
			name, q.String(), granted.Cores))
	}
	return warnings
}

// roundedUp reports whether granted exceeds asked by more than the
// threshold (compared exactly, in milli-units, so "1m" counts).
func roundedUp(asked resource.Quantity, granted int64) bool {
	g := resource.NewQuantity(granted, resource.BinarySI)
	limit := float64(asked.MilliValue()) * roundingWarnThreshold
	return float64(g.MilliValue()) > limit
}

func requestCapacities(req resourceapi.DeviceRequest) []*resourceapi.CapacityRequirements {
	var out []*resourceapi.CapacityRequirements
	if req.Exactly != nil && req.Exactly.Capacity != nil {
		out = append(out, req.Exactly.Capacity)
	}
	for _, sub := range req.FirstAvailable {
		if sub.Capacity != nil {
			out = append(out, sub.Capacity)
		}
	}
	return out
}

func (v *ClaimValidator) validateRequest(namespace string, spec *resourceapi.ResourceClaimSpec, name, class string, mode resourceapi.DeviceAllocationMode, count int64,
	capacity *resourceapi.CapacityRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.AdminOnlyClasses.Has(class) && !v.AdminNamespaces.Has(namespace) {
		errs = append(errs, field.Forbidden(path.Child("deviceClassName"),
			fmt.Sprintf("DeviceClass %q switches GPU limits off and may only be used in the namespaces %v", class, sets.List(v.AdminNamespaces))))
	}
	if capacity != nil {
		capPath := path.Child("capacity", "requests")
		for _, key := range slices.Sorted(maps.Keys(capacity.Requests)) {
			q := capacity.Requests[key]
			p := capPath.Key(string(key))
			switch key {
			case names.CapacityMemory:
				switch {
				case q.Sign() <= 0:
					errs = append(errs, field.Invalid(p, q.String(), "must be positive"))
				case q.Cmp(*resource.NewQuantity(v.MaxMemoryBytes, resource.BinarySI)) > 0:
					errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("more than any GPU has (limit %s); check the unit",
						resource.NewQuantity(v.MaxMemoryBytes, resource.BinarySI).String())))
				}
			case names.CapacityCores:
				n, ok := q.AsInt64()
				switch {
				case v.Classes.IsMPS(class) && (!ok || n < 1 || n > names.CoresCapacity):
					errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf(
						"DeviceClass %q is MPS: cores is the share of the GPU's SMs each process may use, a whole number of percent between 1 and %d (leave it out for all of them)", class, names.CoresCapacity)))
				case !ok || n < 0 || n > names.CoresCapacity:
					errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be a whole number of percent of the GPU's SM time between 0 and %d", names.CoresCapacity)))
				}
			default:
				if name, ours := strings.CutPrefix(string(key), v.DriverName+"/"); ours && (name == string(names.CapacityMemory) || name == string(names.CapacityCores)) {
					errs = append(errs, field.Invalid(p, string(key), fmt.Sprintf(
						"write %q: devices publish their capacities unqualified and the scheduler matches the name exactly, so this request could never be allocated", name)))
					continue
				}
				errs = append(errs, field.NotSupported(p, string(key), []string{string(names.CapacityMemory), string(names.CapacityCores)}))
			}
		}
	}
	if mode != resourceapi.DeviceAllocationModeAll && count > 1 && !distinct(spec, name) {
		errs = append(errs, field.Invalid(path.Child("count"), count,
			fmt.Sprintf("%d shares of %s could all be allocated on one GPU; add a constraint {requests: [%s], distinctAttribute: %s/%s} to get %d different GPUs",
				count, class, name, v.DriverName, names.AttrUUID, count)))
	}
	return errs
}

func (v *ClaimValidator) capacity(c *resourceapi.CapacityRequirements, name resourceapi.QualifiedName) (resource.Quantity, bool) {
	q, ok := c.Requests[name]
	return q, ok
}

// distinct reports whether a distinctAttribute constraint covers all the
// named requests together. A constraint without requests covers them all.
func distinct(spec *resourceapi.ResourceClaimSpec, requests ...string) bool {
	for _, c := range spec.Devices.Constraints {
		if c.DistinctAttribute == nil {
			continue
		}
		if len(c.Requests) == 0 {
			return true
		}
		covered := true
		for _, r := range requests {
			if !slices.Contains(c.Requests, r) {
				covered = false
				break
			}
		}
		if covered {
			return true
		}
	}
	return false
}

// validateMPSComputePolicy refuses a claim config's computePolicy other
// than strict for the MPS requests it applies to: an MPS client's SM share
// is held by the hardware, so neither lending idle time (workConserving)
// nor no limit (disabled) can be applied, and prepare would fail the claim.
func (v *ClaimValidator) validateMPSComputePolicy(spec *resourceapi.ResourceClaimSpec, requests []string, policy api.ComputePolicy, p *field.Path) field.ErrorList {
	if policy == "" || policy == api.ComputePolicyStrict {
		return nil
	}
	var errs field.ErrorList
	for _, r := range v.ourRequests(spec) {
		if appliesTo(requests, r) && v.Classes.IsMPS(r.class) {
			errs = append(errs, field.Invalid(p, string(policy), fmt.Sprintf(
				"applies to request %q of the MPS DeviceClass %q, whose SM share the hardware holds; use strict or name only the other requests in this config's requests", r, r.class)))
		}
	}
	return errs
}

// gpuIdentities are the attributes whose equality puts two devices on the
// same physical GPU of a node.
var gpuIdentities = []resourceapi.QualifiedName{names.AttrUUID, names.AttrIndex, names.AttrMinor, names.AttrPCIeBusID}

// validateMPSConstraints refuses a matchAttribute constraint that puts an
// MPS request on the same GPU as another request of this driver's classes:
// a GPU serves MPS claims or others, and prepare takes one device per GPU
// in MPS use, so the scheduler could never satisfy the claim. A request
// counts as MPS when every alternative of it in this driver's classes is;
// one with another alternative may still be satisfied by that one.
func (v *ClaimValidator) validateMPSConstraints(spec *resourceapi.ResourceClaimSpec, path *field.Path) field.ErrorList {
	mpsRequests := map[string]bool{}
	var ours []string
	for _, r := range v.ourRequests(spec) {
		mps := v.Classes.IsMPS(r.class)
		if prev, seen := mpsRequests[r.parent]; seen {
			mpsRequests[r.parent] = prev && mps
			continue
		}
		mpsRequests[r.parent] = mps
		ours = append(ours, r.parent)
	}
	var errs field.ErrorList
	for i, c := range spec.Devices.Constraints {
		if c.MatchAttribute == nil || !v.identifiesGPU(*c.MatchAttribute) {
			continue
		}
		var covered []string
		var mps string
		for _, name := range ours {
			if len(c.Requests) > 0 && !slices.Contains(c.Requests, name) {
				continue
			}
			covered = append(covered, name)
			if mps == "" && mpsRequests[name] {
				mps = name
			}
		}
		if mps == "" || len(covered) < 2 {
			continue
		}
		errs = append(errs, field.Invalid(path.Index(i).Child("matchAttribute"), string(*c.MatchAttribute), fmt.Sprintf(
			"puts the MPS request %q on the same GPU as the requests %q; a GPU serves MPS claims or others, and one claim holds one device of a GPU in MPS use, so no GPU could ever satisfy it",
			mps, slices.DeleteFunc(covered, func(n string) bool { return n == mps }))))
	}
	return errs
}

// validateMPSDeviceCount refuses a claim that could hold more than one
// MPS device: each GPU in MPS use has a control daemon of its own and a
// process reaches one (CUDA_MPS_PIPE_DIRECTORY is one per process, and CDI
// merges it by name), while prepare takes one device of a GPU in MPS use.
// A request counts as MPS when every alternative of it is.
func (v *ClaimValidator) validateMPSDeviceCount(spec *resourceapi.ResourceClaimSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	first := ""
	for i, req := range spec.Devices.Requests {
		p := path.Index(i)
		mps := false
		if e := req.Exactly; e != nil && v.Classes.IsMPS(e.DeviceClassName) {
			errs = append(errs, oneMPSDevice(e.AllocationMode, e.Count, p.Child("exactly"))...)
			mps = true
		}
		if len(req.FirstAvailable) > 0 {
			mps = true
			for j, sub := range req.FirstAvailable {
				if !v.Classes.IsMPS(sub.DeviceClassName) {
					mps = false
					continue
				}
				errs = append(errs, oneMPSDevice(sub.AllocationMode, sub.Count, p.Child("firstAvailable").Index(j))...)
			}
		}
		switch {
		case !mps:
		case first == "":
			first = req.Name
		default:
			errs = append(errs, field.Invalid(p.Child("name"), req.Name, fmt.Sprintf(
				"a second MPS request next to %q: a claim holds one MPS device, since each GPU in MPS use has a control daemon of its own and a process reaches one (CUDA_MPS_PIPE_DIRECTORY); use one claim per MPS GPU, each in its own container", first)))
		}
	}
	return errs
}

// oneMPSDevice refuses an MPS request's allocation mode or count that asks
// for more than one device.
func oneMPSDevice(mode resourceapi.DeviceAllocationMode, count int64, p *field.Path) field.ErrorList {
	const why = "an MPS request asks for one device: each GPU in MPS use has a control daemon of its own, and a process reaches one"
	switch {
	case mode == resourceapi.DeviceAllocationModeAll:
		return field.ErrorList{field.Invalid(p.Child("allocationMode"), mode, why)}
	case count > 1:
		return field.ErrorList{field.Invalid(p.Child("count"), count, why)}
	}
	return nil
}

func (v *ClaimValidator) identifiesGPU(attr resourceapi.FullyQualifiedName) bool {
	for _, a := range gpuIdentities {
		if string(attr) == v.DriverName+"/"+string(a) {
			return true
		}
	}
	return false
}
