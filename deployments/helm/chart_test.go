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

package chart

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// TestMain silences the standard logger: Helm's chart loader logs that it
// follows the chart's deviceclasses link on every load, which is intended.
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

const (
	chartDir    = "vgpu-dra-driver"
	releaseName = "vgpu-dra-driver"
	namespace   = "vgpu-system"
	pluginName  = "vgpu-dra-driver-kubelet-plugin"
	mpsHostName = "vgpu-dra-driver-mps-host"
	driverName  = "vgpu.dra.dev"
)

// testKubeVersion is the Kubernetes version the chart is rendered for
// unless a test names another.
const testKubeVersion = "v1.37.2"

func kubeVersion(t *testing.T) *chartutil.KubeVersion {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion(testKubeVersion)
	require.NoError(t, err)
	return kv
}

// loadValues merges values files (later wins) and then overrides.
func loadValues(t *testing.T, files []string, overrides map[string]any) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		require.NoError(t, err)
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	return chartutil.CoalesceTables(overrides, vals)
}

// render is `helm template` with the given values; it returns the objects
// (NOTES.txt excluded) in file order.
func render(t *testing.T, files []string, overrides map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderIn(t, nil, files, overrides)
}

// renderIn renders as `helm upgrade` against a cluster whose objects the
// templates' lookup calls read through cluster; nil renders as an install
// without a cluster (lookup finds nothing).
func renderIn(t *testing.T, cluster engine.ClientProvider, files []string, overrides map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderFor(t, testKubeVersion, cluster, files, overrides)
}

// renderAt renders the defaults for a cluster of the given version.
func renderAt(t *testing.T, version string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderFor(t, version, nil, nil, nil)
}

func renderFor(t *testing.T, version string, cluster engine.ClientProvider, files []string, overrides map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(version)
	require.NoError(t, err)
	caps.KubeVersion = *kv
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, IsInstall: true, Revision: 1}
	if cluster != nil {
		opts = chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, IsUpgrade: true, Revision: 2}
	}
	rv, err := chartutil.ToRenderValues(ch, loadValues(t, files, overrides), opts, caps)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	if cluster != nil {
		out, err = engine.RenderWithClientProvider(ch, rv, cluster)
	} else {
		out, err = engine.Render(ch, rv)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out[name]), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if obj == nil {
				continue
			}
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
	return objs, nil
}

func mustRender(t *testing.T, files []string, overrides map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(t, files, overrides)
	require.NoError(t, err)
	return objs
}

// find converts the one object of kind and name into out (strictly: an
// unknown field is an error, so typos in templates fail here).
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true), "%s %s", kind, name)
			return
		}
	}
	t.Fatalf("no %s %s in %v", kind, name, describeAll(objs))
}

func describeAll(objs []*unstructured.Unstructured) []string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetKind()+"/"+o.GetName())
	}
	return s
}

func kinds(objs []*unstructured.Unstructured) []string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetKind())
	}
	sort.Strings(s)
	return s
}

func daemonSet(t *testing.T, objs []*unstructured.Unstructured) *appsv1.DaemonSet {
	t.Helper()
	ds := &appsv1.DaemonSet{}
	find(t, objs, "DaemonSet", pluginName, ds)
	return ds
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

// hostMounts maps each mount path of the container to
// "hostPath[:ro][:bidirectional]".
func hostMounts(t *testing.T, ds *appsv1.DaemonSet, c corev1.Container) map[string]string {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	m := map[string]string{}
	for _, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		require.True(t, ok, "mount %s has no volume", vm.Name)
		require.NotNil(t, v.HostPath, "volume %s", vm.Name)
		s := v.HostPath.Path
		if vm.ReadOnly {
			s += ":ro"
		}
		if vm.MountPropagation != nil && *vm.MountPropagation == corev1.MountPropagationBidirectional {
			s += ":bidirectional"
		}
		m[vm.MountPath] = s
	}
	return m
}

// With MPS on, the plugin runs the driver's own nvidia-cuda-mps-control
// from the driver root it mounts, whichever way the GPUs' CDI edits come:
// the container's own /usr/bin has none.
func TestMPSControlIsTheDriverRootsProgram(t *testing.T) {
	for name, files := range map[string][]string{
		"nvcdi edits":   nil,
		"a vendor spec": {"examples/simulated-node.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			objs := mustRender(t, files, map[string]any{
				"mps": map[string]any{"enabled": true},
				"gpu": map[string]any{"driverRoot": "/opt/nvidia-driver"},
			})
			for _, ds := range []*appsv1.DaemonSet{daemonSet(t, objs), mpsHostDaemonSet(t, objs)} {
				c := ds.Spec.Template.Spec.Containers[0]
				assert.Contains(t, c.Args, "--mps-control=/driver-root/usr/bin/nvidia-cuda-mps-control", c.Name)
				assert.Equal(t, "/opt/nvidia-driver:ro", hostMounts(t, ds, c)["/driver-root"], c.Name)
			}
		})
	}
}

// The chart installs on the versions of docs/install.md's table (1.35 with
// its gates, 1.36 and later) and refuses an older cluster naming its
// version and the table.
func TestKubeVersionConstraint(t *testing.T) {
	for version, ok := range map[string]bool{"v1.34.2": false, "v1.35.4": true, "v1.36.3": true, "v1.37.2": true, "v1.38.0-beta.0": true} {
		t.Run(version, func(t *testing.T) {
			_, err := renderAt(t, version)
			if ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Kubernetes "+version+" is older than this chart supports")
			assert.Contains(t, err.Error(), "docs/install.md, section Kubernetes versions")
		})
	}
}

func TestLint(t *testing.T) {
	for name, files := range map[string][]string{
		"defaults":       nil,
		"simulated node": {"examples/simulated-node.yaml"},
		"monitoring":     {"testdata/monitoring.yaml"},
		"gpu operator":   {"testdata/gpu-operator.yaml"},
		"cert-manager":   {"testdata/cert-manager.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersion(chartDir, loadValues(t, files, nil), namespace, kubeVersion(t))
			for _, m := range linter.Messages {
				assert.Less(t, m.Severity, support.WarningSev, "lint: %s", m)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	objs := mustRender(t, nil, nil)
	assert.Equal(t, []string{"ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding",
		"DaemonSet", "Deployment", "DeviceClass", "DeviceClass", "DeviceClass", "MutatingWebhookConfiguration",
		"PodDisruptionBudget", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ServiceAccount",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding",
		"ValidatingWebhookConfiguration"}, kinds(objs))

	ds := daemonSet(t, objs)
	assert.Equal(t, namespace, ds.Namespace)
	spec := ds.Spec.Template.Spec
	assert.Equal(t, pluginName, spec.ServiceAccountName)
	assert.False(t, spec.HostNetwork)
	assert.True(t, spec.HostPID, "the host pid map needs the host's /proc")
	assert.Equal(t, "system-node-critical", spec.PriorityClassName)
	require.NotNil(t, spec.TerminationGracePeriodSeconds)
	assert.EqualValues(t, 30, *spec.TerminationGracePeriodSeconds, "shutdown grace 10s + 20s")
	assert.Equal(t, ds.Spec.Selector.MatchLabels, subset(ds.Spec.Template.Labels, ds.Spec.Selector.MatchLabels))

	// Rolling updates with surge: both pods serve side by side.
	assert.Equal(t, appsv1.RollingUpdateDaemonSetStrategyType, ds.Spec.UpdateStrategy.Type)
	require.NotNil(t, ds.Spec.UpdateStrategy.RollingUpdate)
	assert.Equal(t, "1", ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge.String())
	assert.Equal(t, "0", ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String())

	// GPU nodes only.
	require.NotNil(t, spec.Affinity)
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var keys []string
	for _, term := range terms {
		keys = append(keys, term.MatchExpressions[0].Key)
	}
	assert.Equal(t, []string{"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present"}, keys)
	assert.Equal(t, "nvidia.com/gpu", spec.Tolerations[0].Key)

	plugin := container(t, spec.Containers, "plugin")
	assert.Equal(t, "ghcr.io/vgpu-dra/vgpu-dra-driver:0.1.0", plugin.Image, "the tag defaults to appVersion")
	assert.Equal(t, []string{"/usr/bin/dra-kubelet-plugin"}, plugin.Command)
	assert.Equal(t, []string{
		"--v=2",
		"--http-address=:8080",
		"--healthz-timeout=5s",
		"--shutdown-grace-period=10s",
		"--kubelet-registrar-directory-path=/var/lib/kubelet/plugins_registry",
		"--kubelet-plugin-data-directory-path=/var/lib/kubelet/plugins/vgpu.dra.dev",
		"--cdi-root=/var/run/cdi",
		"--state-root=/var/lib/vgpu-dra",
		"--libvgpu-path=/usr/local/vgpu/libvgpu.so",
		"--nvml-library=/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
		"--proc-root=/host-proc",
		"--gpu-edits=nvcdi",
		"--nvidia-driver-root=/driver-root",
		"--nvidia-host-driver-root=/",
		"--nvidia-cdi-hook-path=/usr/bin/nvidia-cdi-hook",
		"--device-health=true",
		"--device-taints=true",
		"--memory-min=256Mi",
		"--memory-step=1Mi",
	}, plugin.Args)

	// The downward API gives the node name and the pod UID (rolling updates).
	env := map[string]string{}
	for _, e := range plugin.Env {
		require.NotNil(t, e.ValueFrom, e.Name)
		env[e.Name] = e.ValueFrom.FieldRef.FieldPath
	}
	assert.Equal(t, map[string]string{"NODE_NAME": "spec.nodeName", "POD_UID": "metadata.uid"}, env)

	// Host paths at the same path as on the host (the CDI specs name them).
	assert.Equal(t, map[string]string{
		"/var/lib/kubelet/plugins_registry":     "/var/lib/kubelet/plugins_registry",
		"/var/lib/kubelet/plugins/vgpu.dra.dev": "/var/lib/kubelet/plugins/vgpu.dra.dev",
		"/var/run/cdi":                          "/var/run/cdi",
		"/var/lib/vgpu-dra":                     "/var/lib/vgpu-dra:bidirectional", // the region tmpfs mounts reach the runtime
		"/usr/local/vgpu":                       "/usr/local/vgpu:ro",
		"/driver-root":                          "/:ro",
		"/sys":                                  "/sys:ro",
		"/host-proc":                            "/proc:ro", // MIG capability files
	}, hostMounts(t, ds, plugin))

	// Probes really check the gRPC sockets through /healthz, with more time
	// than the plugin's own check takes.
	for name, p := range map[string]*corev1.Probe{"startup": plugin.StartupProbe, "liveness": plugin.LivenessProbe, "readiness": plugin.ReadinessProbe} {
		require.NotNil(t, p, name)
		require.NotNil(t, p.HTTPGet, name)
		assert.Equal(t, "/healthz", p.HTTPGet.Path, name)
		assert.Equal(t, "http", p.HTTPGet.Port.String(), name)
		assert.EqualValues(t, 10, p.TimeoutSeconds, name)
	}
	assert.EqualValues(t, 8080, plugin.Ports[0].ContainerPort)
	require.NotNil(t, plugin.SecurityContext)
	assert.True(t, *plugin.SecurityContext.Privileged)
	assert.EqualValues(t, 0, *plugin.SecurityContext.RunAsUser, "the image's default user is non-root; the plugin needs root")
	assert.True(t, *plugin.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, "512Mi", plugin.Resources.Limits.Memory().String())

	// The init container installs libvgpu.so where the plugin mounts it from.
	require.Len(t, spec.InitContainers, 1)
	install := spec.InitContainers[0]
	assert.Equal(t, plugin.Image, install.Image)
	assert.Equal(t, []string{"/usr/bin/vgpu-install"}, install.Command)
	assert.Equal(t, []string{"--source=/usr/lib/vgpu-dra/libvgpu.so", "--destination=/usr/local/vgpu/libvgpu.so"}, install.Args)
	assert.Equal(t, map[string]string{"/usr/local/vgpu": "/usr/local/vgpu"}, hostMounts(t, ds, install))
	assert.False(t, *install.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, install.SecurityContext.Capabilities.Drop)

	vols := map[string]corev1.HostPathType{}
	for _, v := range spec.Volumes {
		vols[v.HostPath.Path] = *v.HostPath.Type
	}
	assert.Equal(t, corev1.HostPathDirectory, vols["/var/lib/kubelet/plugins_registry"], "a wrong kubeletDir must fail visibly, not create a directory no kubelet reads")
	assert.Equal(t, corev1.HostPathDirectoryOrCreate, vols["/var/lib/vgpu-dra"])
}

func subset(m, keys map[string]string) map[string]string {
	out := map[string]string{}
	for k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func TestRBACLeastPrivilege(t *testing.T) {
	objs := mustRender(t, nil, nil)
	role := &rbacv1.ClusterRole{}
	find(t, objs, "ClusterRole", pluginName, role)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/driver"}, ResourceNames: []string{driverName},
			Verbs: []string{"associated-node:update", "associated-node:patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	}, role.Rules)

	binding := &rbacv1.ClusterRoleBinding{}
	find(t, objs, "ClusterRoleBinding", pluginName, binding)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: pluginName}, binding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: pluginName, Namespace: namespace}}, binding.Subjects)
}

// TestDeviceClassesFromRepository: the chart installs the repository's
// DeviceClass manifests unchanged apart from the chart's labels.
func TestDeviceClassesFromRepository(t *testing.T) {
	repoClasses := map[string]*resourcev1.DeviceClass{}
	files, err := filepath.Glob("../../deviceclasses/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		dc := &resourcev1.DeviceClass{}
		require.NoError(t, yaml.UnmarshalStrict(data, dc), f)
		repoClasses[dc.Name] = dc
	}

	mpsOn := map[string]any{"mps": map[string]any{"enabled": true}}
	for name, tc := range map[string]struct {
		files     []string
		overrides map[string]any
		want      []string
		mpsFlag   bool
	}{
		"defaults leave the admin-only and MPS classes out": {nil, nil, []string{"mig.vgpu.dra.dev", "vgpu-work-conserving.dra.dev", "vgpu.dra.dev"}, false},
		"simulated node installs all but MPS":               {[]string{"examples/simulated-node.yaml"}, nil, []string{"mig.vgpu.dra.dev", "vgpu-unenforced.dra.dev", "vgpu-work-conserving.dra.dev", "vgpu.dra.dev"}, false},
		"mps.enabled installs the MPS class":                {nil, mpsOn, []string{"mig.vgpu.dra.dev", "mps.vgpu.dra.dev", "vgpu-work-conserving.dra.dev", "vgpu.dra.dev"}, true},
		"the MPS class listed and enabled is installed once": {nil, map[string]any{"mps": map[string]any{"enabled": true},
			"deviceClasses": map[string]any{"install": []any{"vgpu.dra.dev", "mps.vgpu.dra.dev"}}}, []string{"mps.vgpu.dra.dev", "vgpu.dra.dev"}, true},
	} {
		t.Run(name, func(t *testing.T) {
			objs := mustRender(t, tc.files, tc.overrides)
			plugin := container(t, daemonSet(t, objs).Spec.Template.Spec.Containers, "plugin")
			assert.Equal(t, tc.mpsFlag, slices.Contains(plugin.Args, "--mps"), "the plugin publishes MPS devices exactly when the chart installs their class")
			var got []string
			for _, o := range objs {
				if o.GetKind() != "DeviceClass" {
					continue
				}
				dc := &resourcev1.DeviceClass{}
				find(t, objs, "DeviceClass", o.GetName(), dc)
				want, ok := repoClasses[dc.Name]
				require.True(t, ok, "DeviceClass %s is not in deviceclasses/", dc.Name)
				assert.Equal(t, want.Spec, dc.Spec, dc.Name)
				assert.Equal(t, "Helm", dc.Labels["app.kubernetes.io/managed-by"])
				got = append(got, dc.Name)
			}
			sort.Strings(got)
			assert.Equal(t, tc.want, got)
		})
	}
}

// With mps.enabled each plugin node gets an mps-host pod of its own
// DaemonSet, which starts the MPS control daemons on the plugin's request
// over a socket in the state root (both pods name the same one), as root
// with the driver and the host's /dev/shm, in the host's pid namespace as
// the plugin, on the plugin's nodes. Its pods are replaced only when
// deleted: ending one ends the node's MPS servers. Without mps.enabled
// there is neither the DaemonSet nor the socket flag.
func TestMPSHostDaemonSet(t *testing.T) {
	objs := mustRender(t, nil, nil)
	assert.Len(t, daemonSet(t, objs).Spec.Template.Spec.Containers, 1, "the plugin's pod has one container")
	for _, arg := range container(t, daemonSet(t, objs).Spec.Template.Spec.Containers, "plugin").Args {
		assert.NotContains(t, arg, "--mps")
	}
	for _, o := range objs {
		assert.NotEqual(t, mpsHostName, o.GetName(), "no mps-host DaemonSet without MPS")
	}

	objs = mustRender(t, nil, map[string]any{"mps": map[string]any{"enabled": true}})
	plugin := daemonSet(t, objs)
	host := mpsHostDaemonSet(t, objs)
	require.Len(t, plugin.Spec.Template.Spec.Containers, 1, "mps-host is no container of the plugin's pod, which may be replaced while MPS clients run")
	require.Len(t, host.Spec.Template.Spec.Containers, 1)
	assert.Equal(t, "mps-host", host.Spec.Template.Spec.Containers[0].Name)

	assert.Equal(t, appsv1.OnDeleteDaemonSetStrategyType, host.Spec.UpdateStrategy.Type, "an upgrade never ends the daemons")
	assert.Equal(t, appsv1.RollingUpdateDaemonSetStrategyType, plugin.Spec.UpdateStrategy.Type, "the plugin rolls; it adopts the daemons")
	assert.Equal(t, "mps-host", host.Spec.Template.Labels["app.kubernetes.io/component"])
	selects := func(selector, labels map[string]string) bool {
		for k, v := range selector {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	assert.True(t, selects(host.Spec.Selector.MatchLabels, host.Spec.Template.Labels), "the selector selects the template")
	assert.False(t, selects(plugin.Spec.Selector.MatchLabels, host.Spec.Template.Labels), "the plugin's DaemonSet does not select the mps-host pods")
	assert.False(t, selects(host.Spec.Selector.MatchLabels, plugin.Spec.Template.Labels), "the mps-host DaemonSet does not select the plugin's pods")
}

// The mps-host pod and the plugin's pod meet on the node: the same socket
// and control program, the host pid namespace, the state root, the
// plugin's nodes; the pod is root and privileged (the MPS servers open the
// GPUs), with no memory limit (the MPS servers run in its cgroup) and no
// API credentials.
func TestMPSHostPodMeetsThePlugin(t *testing.T) {
	placement := map[string]any{
		"nodeSelector":      map[string]any{"gpu": "nvidia"},
		"tolerations":       []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}},
		"priorityClassName": "system-node-critical",
	}
	objs := mustRender(t, nil, map[string]any{"mps": map[string]any{"enabled": true}, "kubeletPlugin": placement})
	plugin := daemonSet(t, objs)
	host := mpsHostDaemonSet(t, objs)
	pluginC := container(t, plugin.Spec.Template.Spec.Containers, "plugin")
	hostC := container(t, host.Spec.Template.Spec.Containers, "mps-host")
	spec := host.Spec.Template.Spec

	const socket = "--mps-host-socket=/var/lib/vgpu-dra/mps/host.sock"
	assert.Contains(t, pluginC.Args, socket)
	assert.Equal(t, pluginC.Image, hostC.Image, "the same image")
	assert.Equal(t, []string{"/usr/bin/dra-kubelet-plugin"}, hostC.Command)
	const control = "--mps-control=/driver-root/usr/bin/nvidia-cuda-mps-control"
	assert.Subset(t, hostC.Args, []string{"--mps-host", socket, "--state-root=/var/lib/vgpu-dra", control})
	assert.Contains(t, pluginC.Args, control, "both pods name the same control program")
	require.NotNil(t, hostC.SecurityContext)
	require.NotNil(t, hostC.SecurityContext.Privileged)
	assert.True(t, *hostC.SecurityContext.Privileged)
	assert.EqualValues(t, 0, *hostC.SecurityContext.RunAsUser)
	assert.True(t, hostC.Resources.Limits.Memory().IsZero(), "no memory limit: the MPS servers run in its cgroup")
	assert.Equal(t, map[string]string{
		"/var/lib/vgpu-dra": "/var/lib/vgpu-dra",
		"/driver-root":      "/:ro",
		"/dev/shm":          "/dev/shm",
	}, hostMounts(t, host, hostC))
	assert.True(t, spec.HostPID, "the plugin watches the daemons' pids")
	assert.True(t, plugin.Spec.Template.Spec.HostPID)
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.False(t, *spec.AutomountServiceAccountToken, "it calls no API")
	assert.Equal(t, plugin.Spec.Template.Spec.NodeSelector, spec.NodeSelector, "on the plugin's nodes")
	assert.Equal(t, plugin.Spec.Template.Spec.Tolerations, spec.Tolerations)
	assert.Equal(t, plugin.Spec.Template.Spec.PriorityClassName, spec.PriorityClassName)
	assert.NotContains(t, hostMounts(t, plugin, pluginC), "/dev/shm", "the plugin needs no /dev/shm of the host")
}

func mpsHostDaemonSet(t *testing.T, objs []*unstructured.Unstructured) *appsv1.DaemonSet {
	t.Helper()
	ds := &appsv1.DaemonSet{}
	find(t, objs, "DaemonSet", mpsHostName, ds)
	return ds
}

func TestSimulatedNode(t *testing.T) {
	objs := mustRender(t, []string{"examples/simulated-node.yaml"}, map[string]any{
		"image":     map[string]any{"tag": "e2e-1"},
		"apiServer": map[string]any{"host": "10.1.2.3", "port": 6443},
	})
	ds := daemonSet(t, objs)
	spec := ds.Spec.Template.Spec
	assert.True(t, spec.HostNetwork)
	assert.Equal(t, corev1.DNSClusterFirstWithHostNet, spec.DNSPolicy)
	assert.Nil(t, spec.Affinity)
	assert.Empty(t, spec.Tolerations)
	assert.Equal(t, "0", ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge.String())

	plugin := container(t, spec.Containers, "plugin")
	assert.Equal(t, "ghcr.io/vgpu-dra/vgpu-dra-driver:e2e-1", plugin.Image)
	assert.Equal(t, corev1.PullNever, plugin.ImagePullPolicy)
	for _, want := range []string{
		"--v=4",
		"--http-address=:18080",
		"--kubelet-registrar-directory-path=/var/lib/vgpu-dra-e2e/kubelet/plugins_registry",
		"--kubelet-plugin-data-directory-path=/var/lib/vgpu-dra-e2e/kubelet/plugins/vgpu.dra.dev",
		"--cdi-root=/var/lib/vgpu-dra-e2e/cdi",
		"--state-root=/var/lib/vgpu-dra-e2e/driver/state",
		"--libvgpu-path=/var/lib/vgpu-dra-e2e/driver/vgpu/libvgpu.so",
		"--nvml-library=/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
		"--gpu-edits=cdi-spec",
		"--vendor-cdi-dirs=/var/lib/vgpu-dra-e2e/cdi",
		"--vendor-cdi-kind=nvidia.com/gpu",
		"--device-health=true",
		"--device-taints=true",
	} {
		assert.Contains(t, plugin.Args, want)
	}
	for _, a := range plugin.Args {
		assert.False(t, strings.HasPrefix(a, "--nvidia-"), "nvcdi flag %s with cdi-spec edits", a)
	}

	env := map[string]string{}
	for _, e := range plugin.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "/var/lib/vgpu-dra-e2e/driver/fake-config", env["VGPU_FAKE_CONFIG"])
	assert.Equal(t, "/var/lib/vgpu-dra-e2e/driver/fake-state", env["VGPU_FAKE_STATE_DIR"])
	assert.Equal(t, "10.1.2.3", env["KUBERNETES_SERVICE_HOST"])
	assert.Equal(t, "6443", env["KUBERNETES_SERVICE_PORT"])
	assert.Contains(t, env, "NODE_NAME")

	mounts := hostMounts(t, ds, plugin)
	assert.Equal(t, "/var/lib/vgpu-dra-e2e/driver/fake-config:ro", mounts["/var/lib/vgpu-dra-e2e/driver/fake-config"])
	assert.Equal(t, "/var/lib/vgpu-dra-e2e/driver/fake-state", mounts["/var/lib/vgpu-dra-e2e/driver/fake-state"])
	assert.Equal(t, "/var/lib/vgpu-dra-e2e/driver/driver-root:ro", mounts["/driver-root"])
	assert.Equal(t, "/var/lib/vgpu-dra-e2e/cdi", mounts["/var/lib/vgpu-dra-e2e/cdi"], "the vendor dir is the CDI root: mounted once, writable")
	// The fake NVML writes MIG capability files where the plugin reads them.
	assert.Contains(t, plugin.Args, "--proc-root=/host-proc")
	assert.Equal(t, "/var/lib/vgpu-dra-e2e/driver/fake-proc:ro", mounts["/host-proc"])
	assert.Equal(t, "/var/lib/vgpu-dra-e2e/driver/fake-proc", mounts["/var/lib/vgpu-dra-e2e/driver/fake-proc"])
	assert.Len(t, mounts, 11)

	for _, v := range spec.Volumes {
		if v.Name == "fake-config" {
			assert.Equal(t, corev1.HostPathFile, *v.HostPath.Type)
		}
	}
	install := spec.InitContainers[0]
	assert.Contains(t, install.Args, "--destination=/var/lib/vgpu-dra-e2e/driver/vgpu/libvgpu.so")
}

func TestGPUOperatorValues(t *testing.T) {
	objs := mustRender(t, []string{"testdata/gpu-operator.yaml"}, nil)
	assert.NotContains(t, kinds(objs), "ValidatingAdmissionPolicy")
	ds := daemonSet(t, objs)
	spec := ds.Spec.Template.Spec
	assert.Equal(t, "gpu-plugin", spec.ServiceAccountName)
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "registry-credentials"}}, spec.ImagePullSecrets)
	assert.Equal(t, map[string]string{"nvidia.com/gpu.deploy.dra-driver": "true"}, spec.NodeSelector)
	assert.Nil(t, spec.Affinity)
	assert.EqualValues(t, 45, *spec.TerminationGracePeriodSeconds)

	plugin := container(t, spec.Containers, "plugin")
	assert.Equal(t, "registry.example.com/gpu/vgpu-dra-driver:v0.2.0", plugin.Image)
	for _, want := range []string{
		"--v=6",
		"--kubelet-registrar-directory-path=/var/lib/k0s/kubelet/plugins_registry",
		"--kubelet-plugin-data-directory-path=/var/lib/k0s/kubelet/plugins/vgpu.dra.dev",
		"--nvml-library=/driver-root/usr/lib64/libnvidia-ml.so.1",
		"--nvidia-host-driver-root=/run/nvidia/driver",
		"--nvidia-cdi-hook-path=/usr/local/nvidia/toolkit/nvidia-cdi-hook",
		"--ignored-xids=48,94",
		"--noexecute-xids=79,95",
		"--device-taints=false",
	} {
		assert.Contains(t, plugin.Args, want)
	}
	assert.Equal(t, "/run/nvidia/driver:ro", hostMounts(t, ds, plugin)["/driver-root"])

	sa := &corev1.ServiceAccount{}
	find(t, objs, "ServiceAccount", "gpu-plugin", sa)
	binding := &rbacv1.ClusterRoleBinding{}
	find(t, objs, "ClusterRoleBinding", pluginName, binding)
	assert.Equal(t, "gpu-plugin", binding.Subjects[0].Name)
}

func TestMonitoring(t *testing.T) {
	objs := mustRender(t, []string{"testdata/monitoring.yaml"}, nil)
	svc := &corev1.Service{}
	find(t, objs, "Service", pluginName+"-metrics", svc)
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	assert.EqualValues(t, 9400, svc.Spec.Ports[0].Port)

	ds := daemonSet(t, objs)
	assert.Equal(t, svc.Spec.Selector, subset(ds.Spec.Template.Labels, svc.Spec.Selector), "the Service must select the plugin pods")
	plugin := container(t, ds.Spec.Template.Spec.Containers, "plugin")
	assert.Contains(t, plugin.Args, "--http-address=:9400")

	var sm *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ServiceMonitor" && o.GetName() == pluginName {
			sm = o
		}
	}
	require.NotNil(t, sm)
	assert.Equal(t, "monitoring.coreos.com/v1", sm.GetAPIVersion())
	assert.Equal(t, "prometheus", sm.GetLabels()["release"])
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.NoError(t, err)
	require.Len(t, endpoints, 1)
	ep := endpoints[0].(map[string]any)
	assert.Equal(t, "http", ep["port"])
	assert.Equal(t, "/metrics", ep["path"])
	assert.Equal(t, "15s", ep["interval"])
	selector, _, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	require.NoError(t, err)
	assert.Equal(t, selector, subset(svc.Labels, selector), "the ServiceMonitor must select the Service")
}

func TestInvalidValues(t *testing.T) {
	for name, tc := range map[string]struct {
		files     []string
		overrides map[string]any
		want      string
	}{
		"controller ports clash": {nil, map[string]any{"controller": map[string]any{"metricsPort": 8443}},
			"controller.metricsPort: 8443 is also controller.webhook.port"},
		"typo in a controller value": {nil, map[string]any{"controller": map[string]any{"replica": 3}}, "replica"},
		"no controller replicas":     {nil, map[string]any{"controller": map[string]any{"replicas": 0}}, "at '/controller/replicas'"},
		"unknown anti-affinity":      {nil, map[string]any{"controller": map[string]any{"podAntiAffinity": "maybe"}}, "at '/controller/podAntiAffinity'"},
		"extra arg without dashes":   {nil, map[string]any{"controller": map[string]any{"extraArgs": []any{"quota-grace-period=2m"}}}, "at '/controller/extraArgs/0'"},
		"issuer without a name": {nil, map[string]any{"controller": map[string]any{"webhook": map[string]any{"certManager": map[string]any{
			"enabled": true, "issuerRef": map[string]any{"kind": "ClusterIssuer"}}}}}, "/controller/webhook/certManager/issuerRef"},
		"issuer of unknown kind": {nil, map[string]any{"controller": map[string]any{"webhook": map[string]any{"certManager": map[string]any{
			"enabled": true, "issuerRef": map[string]any{"name": "ca", "kind": "Vault"}}}}}, "at '/controller/webhook/certManager/issuerRef/kind'"},
		"host network with surge": {nil, map[string]any{"kubeletPlugin": map[string]any{"hostNetwork": true}},
			"kubeletPlugin.updateStrategy.rollingUpdate.maxSurge: with kubeletPlugin.hostNetwork"},
		"unknown edits source": {nil, map[string]any{"gpu": map[string]any{"edits": "guess"}}, "at '/gpu/edits': value must be one of"},
		"relative state root":  {nil, map[string]any{"paths": map[string]any{"stateRoot": "var/lib/vgpu-dra"}}, "at '/paths/stateRoot'"},
		"typo in a value":      {nil, map[string]any{"kubeletPlugin": map[string]any{"logLevel": 4}}, "logLevel"},
		"unknown device class": {nil, map[string]any{"deviceClasses": map[string]any{"install": []any{"gpu.example.com"}}},
			`deviceClasses.install: "gpu.example.com" has no manifest deviceclasses/gpu.example.com.yaml`},
		"nvml escapes driver root": {nil, map[string]any{"gpu": map[string]any{"nvmlLibrary": "../lib/libnvidia-ml.so.1"}},
			`gpu.nvmlLibrary: "../lib/libnvidia-ml.so.1" must be a path relative to gpu.driverRoot`},
		"minutes grace period":    {nil, map[string]any{"kubeletPlugin": map[string]any{"shutdownGracePeriod": "1m"}}, "at '/kubeletPlugin/shutdownGracePeriod'"},
		"api server without port": {nil, map[string]any{"apiServer": map[string]any{"host": "10.0.0.1", "port": 0}}, "at '/apiServer/port'"},
		"unknown policy allocation mode": {nil, policyAllocation(map[string]any{"mode": "everywhere"}),
			"at '/controller/policyAllocation/mode': value must be one of"},
		"policy allocation on as a boolean": {nil, policyAllocation(map[string]any{"mode": true}), "at '/controller/policyAllocation/mode'"},
		"unknown node policy":               {nil, policyAllocation(map[string]any{"defaultNodePolicy": "pack"}), "at '/controller/policyAllocation/defaultNodePolicy'"},
		"unknown GPU policy":                {nil, policyAllocation(map[string]any{"defaultGPUPolicy": "Spread"}), "at '/controller/policyAllocation/defaultGPUPolicy'"},
		"fallback delay without unit":       {nil, policyAllocation(map[string]any{"fallbackDelay": "30"}), "at '/controller/policyAllocation/fallbackDelay'"},
		"zero fallback delay":               {nil, policyAllocation(map[string]any{"fallbackDelay": "0s"}), "at '/controller/policyAllocation/fallbackDelay'"},
		"typo in policy allocation":         {nil, policyAllocation(map[string]any{"defaultNodePolicies": "spread"}), "defaultNodePolicies"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, tc.files, tc.overrides)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func policyAllocation(values map[string]any) map[string]any {
	return map[string]any{"controller": map[string]any{"policyAllocation": values}}
}

// policyCase is one ResourceSlice write checked against the admission policy.
type policyCase struct {
	user, operation  string
	tokenNode        []string // nil: no node name in the token
	object, oldObj   map[string]any
	matches, allowed bool
}

func slice(node, driver string) map[string]any {
	spec := map[string]any{"driver": driver, "pool": map[string]any{"name": node}}
	if node != "" {
		spec["nodeName"] = node
	}
	return map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": spec}
}

// TestAdmissionPolicy evaluates the rendered policy's CEL against writes of
// the plugin on node-a: its own slices pass, everything else is denied.
func TestAdmissionPolicy(t *testing.T) {
	objs := mustRender(t, nil, nil)
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	find(t, objs, "ValidatingAdmissionPolicy", pluginName+"-resourceslices", policy)
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	find(t, objs, "ValidatingAdmissionPolicyBinding", pluginName+"-resourceslices", binding)
	assert.Equal(t, policy.Name, binding.Spec.PolicyName)
	assert.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, binding.Spec.ValidationActions)
	require.NotNil(t, policy.Spec.FailurePolicy)
	assert.Equal(t, admissionv1.Fail, *policy.Spec.FailurePolicy)
	rule := policy.Spec.MatchConstraints.ResourceRules[0]
	assert.Equal(t, []string{"resourceslices"}, rule.Resources)
	assert.ElementsMatch(t, []admissionv1.OperationType{"CREATE", "UPDATE", "DELETE"}, rule.Operations)

	plugin := "system:serviceaccount:" + namespace + ":" + pluginName
	for name, tc := range map[string]policyCase{
		"create own slice":          {plugin, "CREATE", []string{"node-a"}, slice("node-a", driverName), nil, true, true},
		"update own slice":          {plugin, "UPDATE", []string{"node-a"}, slice("node-a", driverName), slice("node-a", driverName), true, true},
		"delete own slice":          {plugin, "DELETE", []string{"node-a"}, nil, slice("node-a", driverName), true, true},
		"create other node's slice": {plugin, "CREATE", []string{"node-a"}, slice("node-b", driverName), nil, true, false},
		"delete other node's slice": {plugin, "DELETE", []string{"node-a"}, nil, slice("node-b", driverName), true, false},
		"move slice to other node":  {plugin, "UPDATE", []string{"node-a"}, slice("node-b", driverName), slice("node-a", driverName), true, false},
		"slice without a node":      {plugin, "CREATE", []string{"node-a"}, slice("", driverName), nil, true, false},
		"other driver's slice":      {plugin, "CREATE", []string{"node-a"}, slice("node-a", "gpu.nvidia.com"), nil, true, false},
		"token without node":        {plugin, "CREATE", nil, slice("node-a", driverName), nil, true, false},
		"other users are not bound": {"system:node:node-b", "CREATE", nil, slice("node-a", driverName), nil, false, true},
	} {
		t.Run(name, func(t *testing.T) {
			matches, allowed := evalPolicy(t, policy, tc)
			assert.Equal(t, tc.matches, matches, "match conditions")
			if matches {
				assert.Equal(t, tc.allowed, allowed)
			}
		})
	}
}

// TestPodDeletePolicy: the plugin's delete on pods (burst reclaim) reaches
// only pods bound to its own node.
func TestPodDeletePolicy(t *testing.T) {
	objs := mustRender(t, nil, nil)
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	find(t, objs, "ValidatingAdmissionPolicy", pluginName+"-pods", policy)
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	find(t, objs, "ValidatingAdmissionPolicyBinding", pluginName+"-pods", binding)
	assert.Equal(t, policy.Name, binding.Spec.PolicyName)
	assert.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, binding.Spec.ValidationActions)
	rule := policy.Spec.MatchConstraints.ResourceRules[0]
	assert.Equal(t, []string{"pods"}, rule.Resources)
	assert.Equal(t, []admissionv1.OperationType{"DELETE"}, rule.Operations)

	pod := func(node string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": map[string]any{"nodeName": node}}
	}
	unscheduled := map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": map[string]any{}}
	plugin := "system:serviceaccount:" + namespace + ":" + pluginName
	for name, tc := range map[string]policyCase{
		"pod on own node":           {plugin, "DELETE", []string{"node-a"}, nil, pod("node-a"), true, true},
		"pod on other node":         {plugin, "DELETE", []string{"node-a"}, nil, pod("node-b"), true, false},
		"unscheduled pod":           {plugin, "DELETE", []string{"node-a"}, nil, unscheduled, true, false},
		"token without node":        {plugin, "DELETE", nil, nil, pod("node-a"), true, false},
		"other users are not bound": {"system:serviceaccount:kube-system:generic-garbage-collector", "DELETE", nil, nil, pod("node-b"), false, true},
	} {
		t.Run(name, func(t *testing.T) {
			matches, allowed := evalPolicy(t, policy, tc)
			assert.Equal(t, tc.matches, matches, "match conditions")
			if matches {
				assert.Equal(t, tc.allowed, allowed)
			}
		})
	}
}

// evalPolicy evaluates policy's CEL for tc's request as the API server
// would: whether its match conditions match and whether it allows.
func evalPolicy(t *testing.T, policy *admissionv1.ValidatingAdmissionPolicy, tc policyCase) (matches, allowed bool) {
	t.Helper()
	env, err := cel.NewEnv(
		cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType), cel.Variable("variables", cel.DynType))
	require.NoError(t, err)
	eval := func(expr string, vars map[string]any) any {
		ast, iss := env.Compile(expr)
		require.NoError(t, iss.Err(), expr)
		prg, err := env.Program(ast)
		require.NoError(t, err)
		out, _, err := prg.Eval(vars)
		require.NoError(t, err, expr)
		return out.Value()
	}
	userInfo := map[string]any{"username": tc.user}
	if tc.tokenNode != nil {
		userInfo["extra"] = map[string]any{"authentication.kubernetes.io/node-name": tc.tokenNode}
	}
	vars := map[string]any{
		"request":   map[string]any{"operation": tc.operation, "userInfo": userInfo},
		"object":    nilIfEmpty(tc.object),
		"oldObject": nilIfEmpty(tc.oldObj),
	}
	matches = true
	for _, mc := range policy.Spec.MatchConditions {
		matches = matches && eval(mc.Expression, vars) == true
	}
	if !matches {
		return false, false
	}
	computed := map[string]any{}
	vars["variables"] = computed
	for _, v := range policy.Spec.Variables {
		computed[v.Name] = eval(v.Expression, vars)
	}
	allowed = true
	for _, v := range policy.Spec.Validations {
		if eval(v.Expression, vars) != true {
			allowed = false
			if v.MessageExpression != "" {
				msg, ok := eval(v.MessageExpression, vars).(string)
				assert.True(t, ok && msg != "", "message of %q", v.Expression)
			}
		}
	}
	return true, allowed
}

func nilIfEmpty(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// TestChartFilesInSync: the chart's deviceclasses/ is the repository's
// directory, not a copy that could drift.
func TestChartFilesInSync(t *testing.T) {
	target, err := os.Readlink(filepath.Join(chartDir, "deviceclasses"))
	require.NoError(t, err, "vgpu-dra-driver/deviceclasses must be a link to the repository's deviceclasses/")
	abs, err := filepath.Abs(filepath.Join(chartDir, target))
	require.NoError(t, err)
	want, err := filepath.Abs("../../deviceclasses")
	require.NoError(t, err)
	assert.Equal(t, want, abs)
	entries, err := os.ReadDir(abs)
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == "vgpu.dra.dev.yaml" }))
}
