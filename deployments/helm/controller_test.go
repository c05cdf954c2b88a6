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
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

const (
	controllerName = "vgpu-dra-driver-controller"
	tlsSecretName  = controllerName + "-tls"
	// The name the API server verifies when it calls the webhook Service.
	webhookDNSName = controllerName + "." + namespace + ".svc"
)

func controllerDeployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	find(t, objs, "Deployment", controllerName, d)
	return d
}

func webhookConfigs(t *testing.T, objs []*unstructured.Unstructured) (*admissionv1.ValidatingWebhookConfiguration, *admissionv1.MutatingWebhookConfiguration) {
	t.Helper()
	v := &admissionv1.ValidatingWebhookConfiguration{}
	find(t, objs, "ValidatingWebhookConfiguration", controllerName, v)
	require.Len(t, v.Webhooks, 1)
	m := &admissionv1.MutatingWebhookConfiguration{}
	find(t, objs, "MutatingWebhookConfiguration", controllerName, m)
	require.NotEmpty(t, m.Webhooks)
	require.LessOrEqual(t, len(m.Webhooks), 2, "the HAMi entry and at most the gate")
	assert.Equal(t, "hami-pods.vgpu.dra.dev", m.Webhooks[0].Name, "the HAMi webhook first, so that the gate sees translated pods")
	return v, m
}

// gateWebhook is the policy allocator's entry of the mutating
// configuration, nil when the chart renders none.
func gateWebhook(t *testing.T, m *admissionv1.MutatingWebhookConfiguration) *admissionv1.MutatingWebhook {
	t.Helper()
	if len(m.Webhooks) < 2 {
		return nil
	}
	gate := &m.Webhooks[1]
	assert.Equal(t, "gate-pods.vgpu.dra.dev", gate.Name)
	return gate
}

func tlsSecret(t *testing.T, objs []*unstructured.Unstructured) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	find(t, objs, "Secret", tlsSecretName, s)
	return s
}

func controllerEnv(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			env[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		} else {
			env[e.Name] = e.Value
		}
	}
	return env
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return 0
}

// verifyServing checks what the API server checks when it calls the
// webhook: the serving pair loads and its certificate chains to caBundle
// for the Service's DNS name.
func verifyServing(t *testing.T, caBundle []byte, secret *corev1.Secret) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caBundle), "caBundle holds no PEM certificate")
	pair, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: webhookDNSName, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err)
	return leaf
}

// pemCerts decodes every certificate of a PEM bundle.
func pemCerts(t *testing.T, bundle []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		certs = append(certs, c)
	}
	return certs
}

func TestControllerDeployment(t *testing.T) {
	objs := mustRender(t, nil, nil)
	d := controllerDeployment(t, objs)
	assert.Equal(t, namespace, d.Namespace)
	require.NotNil(t, d.Spec.Replicas)
	assert.EqualValues(t, 2, *d.Spec.Replicas)
	podLabels := d.Spec.Template.Labels
	assert.Equal(t, d.Spec.Selector.MatchLabels, subset(podLabels, d.Spec.Selector.MatchLabels))
	assert.Equal(t, "controller", d.Spec.Selector.MatchLabels["app.kubernetes.io/component"])
	assert.NotEqual(t, daemonSet(t, objs).Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels, "the plugin and the controller must not select each other's pods")
	require.NotNil(t, d.Spec.Strategy.RollingUpdate)
	assert.Equal(t, "0", d.Spec.Strategy.RollingUpdate.MaxUnavailable.String(), "an update must not take a webhook server away first")

	spec := d.Spec.Template.Spec
	assert.Equal(t, controllerName, spec.ServiceAccountName)
	assert.Equal(t, "system-cluster-critical", spec.PriorityClassName)
	assert.False(t, spec.HostNetwork)
	assert.EqualValues(t, 30, *spec.TerminationGracePeriodSeconds)
	require.NotNil(t, spec.SecurityContext.RunAsNonRoot)
	assert.True(t, *spec.SecurityContext.RunAsNonRoot)

	// Replicas prefer different nodes.
	require.NotNil(t, spec.Affinity)
	require.NotNil(t, spec.Affinity.PodAntiAffinity)
	assert.Empty(t, spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	preferred := spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	require.Len(t, preferred, 1)
	assert.Equal(t, "kubernetes.io/hostname", preferred[0].PodAffinityTerm.TopologyKey)
	assert.Equal(t, d.Spec.Selector.MatchLabels, preferred[0].PodAffinityTerm.LabelSelector.MatchLabels)

	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, "ghcr.io/vgpu-dra/vgpu-dra-driver:0.1.0", c.Image, "the plugin's image, which holds /usr/bin/dra-controller")
	assert.Equal(t, []string{"/usr/bin/dra-controller"}, c.Command)
	assert.Equal(t, []string{
		"--v=2",
		"--webhook-address=:8443",
		"--http-address=:8080",
		"--tls-cert-file=/etc/vgpu-dra/tls/tls.crt",
		"--tls-key-file=/etc/vgpu-dra/tls/tls.key",
		"--shutdown-grace-period=10s",
		"--leader-elect-lease-name=" + controllerName,
		"--admin-namespaces=kube-system",
		"--policy-allocation=namespace",
		"--default-node-policy=binpack",
		"--default-gpu-policy=spread",
		"--policy-fallback-delay=30s",
	}, c.Args)
	assert.Equal(t, map[string]string{"POD_NAMESPACE": "fieldRef:metadata.namespace", "POD_NAME": "fieldRef:metadata.name"}, controllerEnv(c))
	assert.EqualValues(t, 8443, containerPort(t, c, "https"))
	assert.EqualValues(t, 8080, containerPort(t, c, "http"))

	// Ready only once the caches have synced: no admission on an empty cache.
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "http", c.ReadinessProbe.HTTPGet.Port.String())
	require.NotNil(t, c.LivenessProbe)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)

	require.NotNil(t, c.SecurityContext)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Nil(t, c.SecurityContext.Privileged)

	// The TLS Secret is mounted whole (a subPath mount would never see a
	// rotation) where the TLS flags point.
	require.Len(t, c.VolumeMounts, 1)
	assert.Equal(t, "/etc/vgpu-dra/tls", c.VolumeMounts[0].MountPath)
	assert.Empty(t, c.VolumeMounts[0].SubPath)
	assert.True(t, c.VolumeMounts[0].ReadOnly)
	require.Len(t, spec.Volumes, 1)
	require.NotNil(t, spec.Volumes[0].Secret)
	assert.Equal(t, tlsSecret(t, objs).Name, spec.Volumes[0].Secret.SecretName)

	// The Service forwards 443 to the webhook port of the controller pods.
	svc := &corev1.Service{}
	find(t, objs, "Service", controllerName, svc)
	assert.Equal(t, svc.Spec.Selector, subset(podLabels, svc.Spec.Selector))
	assert.Equal(t, d.Spec.Selector.MatchLabels, svc.Spec.Selector)
	require.Len(t, svc.Spec.Ports, 1)
	assert.EqualValues(t, 443, svc.Spec.Ports[0].Port)
	assert.Equal(t, "https", svc.Spec.Ports[0].TargetPort.String())

	pdb := &policyv1.PodDisruptionBudget{}
	find(t, objs, "PodDisruptionBudget", controllerName, pdb)
	assert.Equal(t, "1", pdb.Spec.MaxUnavailable.String())
	assert.Nil(t, pdb.Spec.MinAvailable)
	assert.Equal(t, d.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)
}

func TestControllerWebhooks(t *testing.T) {
	objs := mustRender(t, nil, nil)
	validating, mutating := webhookConfigs(t, objs)
	secret := tlsSecret(t, objs)
	assert.Equal(t, corev1.SecretTypeTLS, secret.Type)
	svc := &corev1.Service{}
	find(t, objs, "Service", controllerName, svc)

	v := validating.Webhooks[0]
	assert.Equal(t, "claims.vgpu.dra.dev", v.Name)
	assert.Equal(t, []string{"v1"}, v.AdmissionReviewVersions)
	assert.Equal(t, admissionv1.SideEffectClassNoneOnDryRun, *v.SideEffects)
	assert.Equal(t, admissionv1.Fail, *v.FailurePolicy)
	assert.Equal(t, admissionv1.Equivalent, *v.MatchPolicy)
	assert.EqualValues(t, 10, *v.TimeoutSeconds)
	assert.Equal(t, []admissionv1.RuleWithOperations{{
		Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule: admissionv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"v1"},
			Resources: []string{"resourceclaims", "resourceclaimtemplates"}},
	}}, v.Rules)
	assert.Nil(t, v.NamespaceSelector, "claims of every namespace are validated and charged")

	m := mutating.Webhooks[0]
	assert.Equal(t, "hami-pods.vgpu.dra.dev", m.Name)
	assert.Equal(t, admissionv1.SideEffectClassNoneOnDryRun, *m.SideEffects)
	assert.Equal(t, admissionv1.Fail, *m.FailurePolicy)
	assert.Equal(t, admissionv1.NeverReinvocationPolicy, *m.ReinvocationPolicy)
	assert.Equal(t, []admissionv1.RuleWithOperations{{
		Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}, m.Rules)
	require.NotNil(t, m.NamespaceSelector)
	assert.Equal(t, map[string]string{"vgpu.dra.dev/hami-compat": "enabled"}, m.NamespaceSelector.MatchLabels)
	assert.Empty(t, m.NamespaceSelector.MatchExpressions)

	gate := gateWebhook(t, mutating)
	require.NotNil(t, gate, "policy allocation is on by default")
	assert.Equal(t, []string{"v1"}, gate.AdmissionReviewVersions)
	assert.Equal(t, admissionv1.SideEffectClassNone, *gate.SideEffects)
	assert.Equal(t, admissionv1.Ignore, *gate.FailurePolicy, "a pod without the gate is still scheduled, first-fit")
	assert.Equal(t, admissionv1.IfNeededReinvocationPolicy, *gate.ReinvocationPolicy, "translated HAMi pods must be gated too")
	assert.EqualValues(t, 10, *gate.TimeoutSeconds)
	assert.Equal(t, m.Rules, gate.Rules, "pod creates, as the HAMi entry")
	assert.Nil(t, gate.ObjectSelector)

	for path, cc := range map[string]admissionv1.WebhookClientConfig{
		"/validate-resourceclaims": v.ClientConfig,
		"/mutate-pods":             m.ClientConfig,
		"/gate-pods":               gate.ClientConfig,
	} {
		require.NotNil(t, cc.Service, path)
		assert.Nil(t, cc.URL, path)
		assert.Equal(t, svc.Name, cc.Service.Name, path)
		assert.Equal(t, svc.Namespace, cc.Service.Namespace, path)
		require.NotNil(t, cc.Service.Path, path)
		assert.Equal(t, path, *cc.Service.Path)
		assert.Equal(t, svc.Spec.Ports[0].Port, *cc.Service.Port, path)
		assert.Equal(t, secret.Data["ca.crt"], cc.CABundle, "%s: caBundle must be the CA of the mounted Secret", path)
		verifyServing(t, cc.CABundle, secret)
	}

	// The CA really is a CA, and both last as long as configured.
	ca := pemCerts(t, secret.Data["ca.crt"])
	require.Len(t, ca, 1)
	assert.True(t, ca[0].IsCA)
	leaf := verifyServing(t, secret.Data["ca.crt"], secret)
	assert.False(t, leaf.IsCA)
	assert.ElementsMatch(t, []string{controllerName, controllerName + "." + namespace, webhookDNSName}, leaf.DNSNames)
	assert.WithinDuration(t, time.Now().Add(3650*24*time.Hour), leaf.NotAfter, time.Hour)
	notAfter, err := strconv.ParseInt(secret.Annotations["vgpu.dra.dev/tls-not-after"], 10, 64)
	require.NoError(t, err)
	assert.WithinDuration(t, leaf.NotAfter, time.Unix(notAfter, 0), time.Minute, "the annotation the next upgrade reads")
}

func TestControllerRBAC(t *testing.T) {
	objs := mustRender(t, nil, nil)
	role := &rbacv1.ClusterRole{}
	find(t, objs, "ClusterRole", controllerName, role)
	readOnly := []string{"get", "list", "watch"}
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: readOnly},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices", "resourceclaims", "deviceclasses"}, Verbs: readOnly},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaimtemplates"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: readOnly},
		// The policy allocator, as docs/allocation.md lists it.
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: readOnly},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"update"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/binding"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}, role.Rules)

	nsRole := &rbacv1.Role{}
	find(t, objs, "Role", controllerName, nsRole)
	assert.Equal(t, namespace, nsRole.Namespace, "quota usage records and the Lease live in the controller's namespace only")
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}, nsRole.Rules)

	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: controllerName, Namespace: namespace}}
	crb := &rbacv1.ClusterRoleBinding{}
	find(t, objs, "ClusterRoleBinding", controllerName, crb)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: controllerName}, crb.RoleRef)
	assert.Equal(t, subjects, crb.Subjects)
	rb := &rbacv1.RoleBinding{}
	find(t, objs, "RoleBinding", controllerName, rb)
	assert.Equal(t, namespace, rb.Namespace)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: controllerName}, rb.RoleRef)
	assert.Equal(t, subjects, rb.Subjects)
	sa := &corev1.ServiceAccount{}
	find(t, objs, "ServiceAccount", controllerName, sa)
	assert.Equal(t, controllerDeployment(t, objs).Spec.Template.Spec.ServiceAccountName, sa.Name)
}

// flagValues maps each --flag=value argument to its value.
func flagValues(args []string) map[string]string {
	flags := map[string]string{}
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[name] = value
	}
	return flags
}

// TestControllerPolicyAllocation: the mode decides whether pods are gated
// and in which namespaces; the policies reach the controller's flags; the
// allocator's RBAC stays in every mode, because the leader serves pods gated
// before a switch to off.
func TestControllerPolicyAllocation(t *testing.T) {
	defaultRules := func() []rbacv1.PolicyRule {
		role := &rbacv1.ClusterRole{}
		find(t, mustRender(t, nil, nil), "ClusterRole", controllerName, role)
		return role.Rules
	}()
	notOwnNamespace := []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{namespace},
	}}
	for name, tc := range map[string]struct {
		files     []string
		overrides map[string]any
		mode      string
		selector  *metav1.LabelSelector // nil: no gate entry
	}{
		"default": {nil, nil, "namespace", &metav1.LabelSelector{
			MatchLabels: map[string]string{"vgpu.dra.dev/policy-allocation": "enabled"}, MatchExpressions: notOwnNamespace}},
		"cluster":         {nil, map[string]any{"mode": "cluster"}, "cluster", &metav1.LabelSelector{MatchExpressions: notOwnNamespace}},
		"off":             {nil, map[string]any{"mode": "off"}, "off", nil},
		"off in YAML 1.1": {[]string{"testdata/policy-off.yaml"}, nil, "off", nil},
	} {
		t.Run(name, func(t *testing.T) {
			var overrides map[string]any
			if tc.overrides != nil {
				overrides = map[string]any{"controller": map[string]any{"policyAllocation": tc.overrides}}
			}
			objs := mustRender(t, tc.files, overrides)
			_, mutating := webhookConfigs(t, objs)
			gate := gateWebhook(t, mutating)
			if tc.selector == nil {
				assert.Nil(t, gate, "no pod is gated with policy allocation off")
			} else {
				require.NotNil(t, gate)
				assert.Equal(t, tc.selector, gate.NamespaceSelector)
				require.NotNil(t, gate.ClientConfig.Service)
				assert.Equal(t, "/gate-pods", *gate.ClientConfig.Service.Path)
			}
			args := flagValues(controllerDeployment(t, objs).Spec.Template.Spec.Containers[0].Args)
			assert.Equal(t, tc.mode, args["policy-allocation"])

			role := &rbacv1.ClusterRole{}
			find(t, objs, "ClusterRole", controllerName, role)
			assert.Equal(t, defaultRules, role.Rules)
		})
	}

	objs := mustRender(t, nil, map[string]any{"controller": map[string]any{"policyAllocation": map[string]any{
		"defaultNodePolicy": "spread", "defaultGPUPolicy": "binpack", "fallbackDelay": "1m30s",
	}}})
	args := flagValues(controllerDeployment(t, objs).Spec.Template.Spec.Containers[0].Args)
	assert.Equal(t, "namespace", args["policy-allocation"])
	assert.Equal(t, "spread", args["default-node-policy"])
	assert.Equal(t, "binpack", args["default-gpu-policy"])
	assert.Equal(t, "1m30s", args["policy-fallback-delay"])
}

func TestControllerDisabled(t *testing.T) {
	objs := mustRender(t, nil, map[string]any{"controller": map[string]any{"enabled": false}})
	assert.Equal(t, []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "DeviceClass", "DeviceClass", "DeviceClass",
		"ServiceAccount",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding"}, kinds(objs))
	objs = mustRender(t, []string{"testdata/monitoring.yaml"}, map[string]any{"controller": map[string]any{"enabled": false}})
	for _, o := range objs {
		assert.NotEqual(t, "controller", o.GetLabels()["app.kubernetes.io/component"], "%s/%s", o.GetKind(), o.GetName())
	}
}

// TestControllerCertManager: the certificate comes from an existing
// ClusterIssuer and cert-manager injects the CA; no Secret is rendered.
func TestControllerCertManager(t *testing.T) {
	objs := mustRender(t, []string{"testdata/cert-manager.yaml"}, nil)
	for _, o := range objs {
		assert.NotEqual(t, "Secret", o.GetKind(), "cert-manager writes the Secret")
		assert.NotEqual(t, "Issuer", o.GetKind(), "the configured issuer is used")
	}
	cert := certificate(t, objs, controllerName)
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	assert.Equal(t, controllerName+"-cert", secretName, "not the self-signed Secret's name, which Helm owns")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	assert.Contains(t, dnsNames, webhookDNSName)
	issuer, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
	assert.Equal(t, map[string]string{"name": "cluster-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}, issuer)

	d := controllerDeployment(t, objs)
	assert.Equal(t, secretName, d.Spec.Template.Spec.Volumes[0].Secret.SecretName)

	validating, mutating := webhookConfigs(t, objs)
	for kind, meta := range map[string]map[string]string{"validating": validating.Annotations, "mutating": mutating.Annotations} {
		assert.Equal(t, namespace+"/"+controllerName, meta["cert-manager.io/inject-ca-from"], kind)
	}
	assert.Empty(t, validating.Webhooks[0].ClientConfig.CABundle, "cainjector fills it")
	require.Len(t, mutating.Webhooks, 2, "policy allocation in the whole cluster")
	for _, w := range mutating.Webhooks {
		assert.Empty(t, w.ClientConfig.CABundle, "%s: cainjector fills it", w.Name)
	}

	// All namespaces, except the controller's own (its pods could not be
	// created while it is down) and kube-system.
	sel := mutating.Webhooks[0].NamespaceSelector
	require.NotNil(t, sel)
	assert.Empty(t, sel.MatchLabels)
	require.Len(t, sel.MatchExpressions, 1)
	assert.Equal(t, "kubernetes.io/metadata.name", sel.MatchExpressions[0].Key)
	assert.EqualValues(t, "NotIn", sel.MatchExpressions[0].Operator)
	assert.ElementsMatch(t, []string{namespace, "kube-system"}, sel.MatchExpressions[0].Values)

	c := d.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"--hami-compat-all-namespaces", "--admin-namespaces=kube-system,gpu-admin", "--quota-grace-period=2m"} {
		assert.Contains(t, c.Args, want)
	}
	assert.Equal(t, "--quota-grace-period=2m", c.Args[len(c.Args)-1], "extra flags come last")
	assert.EqualValues(t, 3, *d.Spec.Replicas)
	required := d.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, required, 1)
	assert.Equal(t, d.Spec.Selector.MatchLabels, required[0].LabelSelector.MatchLabels)

	role := &rbacv1.ClusterRole{}
	find(t, objs, "ClusterRole", controllerName, role)
	assert.Equal(t, rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		role.Rules[len(role.Rules)-1])
}

// TestControllerCertManagerOwnCA: without an issuer the chart bootstraps a
// CA through cert-manager, so renewing the serving certificate keeps the CA
// the API server trusts.
func TestControllerCertManagerOwnCA(t *testing.T) {
	objs := mustRender(t, nil, map[string]any{"controller": map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": true}}}})
	issuers := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() == "Issuer" {
			assert.Equal(t, "cert-manager.io/v1", o.GetAPIVersion())
			issuers[o.GetName()] = o
		}
	}
	require.Len(t, issuers, 2)
	selfSigned, ok := issuers[controllerName+"-selfsigned"]
	require.True(t, ok)
	_, found, _ := unstructured.NestedMap(selfSigned.Object, "spec", "selfSigned")
	assert.True(t, found)

	caCert := certificate(t, objs, controllerName+"-ca")
	isCA, _, _ := unstructured.NestedBool(caCert.Object, "spec", "isCA")
	assert.True(t, isCA)
	caIssuerOfCA, _, _ := unstructured.NestedString(caCert.Object, "spec", "issuerRef", "name")
	assert.Equal(t, selfSigned.GetName(), caIssuerOfCA)
	caSecret, _, _ := unstructured.NestedString(caCert.Object, "spec", "secretName")

	caIssuer, ok := issuers[controllerName+"-ca"]
	require.True(t, ok)
	issuerSecret, _, _ := unstructured.NestedString(caIssuer.Object, "spec", "ca", "secretName")
	assert.Equal(t, caSecret, issuerSecret)

	serving := certificate(t, objs, controllerName)
	ref, _, _ := unstructured.NestedStringMap(serving.Object, "spec", "issuerRef")
	assert.Equal(t, map[string]string{"name": caIssuer.GetName(), "kind": "Issuer", "group": "cert-manager.io"}, ref)
}

func certificate(t *testing.T, objs []*unstructured.Unstructured, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Certificate" && o.GetName() == name {
			assert.Equal(t, "cert-manager.io/v1", o.GetAPIVersion())
			assert.Equal(t, namespace, o.GetNamespace())
			return o
		}
	}
	t.Fatalf("no Certificate %s in %v", name, describeAll(objs))
	return nil
}

// secretCluster answers the chart's lookup of Secrets from a fake API.
type secretCluster struct {
	client *dynamicfake.FakeDynamicClient
}

func newSecretCluster(t *testing.T, secrets ...*unstructured.Unstructured) secretCluster {
	t.Helper()
	objs := make([]runtime.Object, 0, len(secrets))
	for _, s := range secrets {
		objs = append(objs, s)
	}
	return secretCluster{dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), objs...)}
}

func (c secretCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if apiVersion != "v1" || kind != "Secret" {
		return nil, false, fmt.Errorf("the chart looked up %s %s; the test cluster serves only v1 Secrets", apiVersion, kind)
	}
	return c.client.Resource(corev1.SchemeGroupVersion.WithResource("secrets")), true, nil
}

// renderedSecret is the TLS Secret as an installed release left it.
func renderedSecret(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Secret" && o.GetName() == tlsSecretName {
			return o.DeepCopy()
		}
	}
	t.Fatalf("no Secret %s", tlsSecretName)
	return nil
}

func caBundles(t *testing.T, objs []*unstructured.Unstructured) [][]byte {
	t.Helper()
	v, m := webhookConfigs(t, objs)
	bundles := [][]byte{v.Webhooks[0].ClientConfig.CABundle}
	for _, w := range m.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return bundles
}

// TestControllerUpgradeKeepsCA: an upgrade reads the Secret back (lookup)
// and keeps the CA and the serving pair, so the webhook configurations do
// not change and no replica serves a certificate the API server rejects.
func TestControllerUpgradeKeepsCA(t *testing.T) {
	installed := mustRender(t, nil, nil)
	old := renderedSecret(t, installed)
	oldSecret := tlsSecret(t, installed)

	upgraded, err := renderIn(t, newSecretCluster(t, old), nil, map[string]any{"image": map[string]any{"tag": "v0.2.0"}})
	require.NoError(t, err)
	assert.Equal(t, "ghcr.io/vgpu-dra/vgpu-dra-driver:v0.2.0", controllerDeployment(t, upgraded).Spec.Template.Spec.Containers[0].Image)
	newSecret := tlsSecret(t, upgraded)
	assert.Equal(t, oldSecret.Data, newSecret.Data)
	assert.Equal(t, oldSecret.Annotations, newSecret.Annotations)
	for _, b := range caBundles(t, upgraded) {
		assert.Equal(t, oldSecret.Data["ca.crt"], b)
	}
	assert.Equal(t, caBundles(t, installed), caBundles(t, upgraded))
}

// TestControllerUpgradeRenews: an upgrade generates a new pair when the kept
// one would not do, and the webhook configurations trust the old and the
// new CA, because replicas serve the old certificate until the kubelet
// refreshes their Secret volume.
func TestControllerUpgradeRenews(t *testing.T) {
	installed := mustRender(t, nil, nil)
	oldCA := tlsSecret(t, installed).Data["ca.crt"]
	soon := strconv.FormatInt(time.Now().Add(29*24*time.Hour).Unix(), 10)
	later := strconv.FormatInt(time.Now().Add(31*24*time.Hour).Unix(), 10)

	for name, tc := range map[string]struct {
		edit  func(s *unstructured.Unstructured)
		renew bool
	}{
		"expires within 30 days": {func(s *unstructured.Unstructured) { setAnnotation(s, "vgpu.dra.dev/tls-not-after", soon) }, true},
		"expires in 31 days":     {func(s *unstructured.Unstructured) { setAnnotation(s, "vgpu.dra.dev/tls-not-after", later) }, false},
		"expiry unknown":         {func(s *unstructured.Unstructured) { setAnnotation(s, "vgpu.dra.dev/tls-not-after", "") }, true},
		"issued for other names": {func(s *unstructured.Unstructured) {
			setAnnotation(s, "vgpu.dra.dev/tls-dns-names", "old-controller,old-controller.vgpu-system,old-controller.vgpu-system.svc")
		}, true},
		"key missing": {func(s *unstructured.Unstructured) { unstructured.RemoveNestedField(s.Object, "data", "tls.key") }, true},
	} {
		t.Run(name, func(t *testing.T) {
			secret := renderedSecret(t, installed)
			tc.edit(secret)
			upgraded, err := renderIn(t, newSecretCluster(t, secret), nil, nil)
			require.NoError(t, err)
			s := tlsSecret(t, upgraded)
			if !tc.renew {
				assert.Equal(t, oldCA, s.Data["ca.crt"])
				return
			}
			assert.NotEqual(t, oldCA, s.Data["ca.crt"])
			newCA := pemCerts(t, s.Data["ca.crt"])
			require.Len(t, newCA, 1)
			for _, b := range caBundles(t, upgraded) {
				verifyServing(t, b, s)
				verifyServing(t, b, tlsSecret(t, installed))
				assert.True(t, bytes.HasPrefix(b, s.Data["ca.crt"]), "the new CA first")
				assert.Len(t, pemCerts(t, b), 2)
			}

			// The upgrade after that keeps the new pair and drops the old CA.
			again, err := renderIn(t, newSecretCluster(t, renderedSecret(t, upgraded)), nil, nil)
			require.NoError(t, err)
			assert.Equal(t, s.Data, tlsSecret(t, again).Data)
			for _, b := range caBundles(t, again) {
				assert.Equal(t, s.Data["ca.crt"], b)
			}
		})
	}
}

func setAnnotation(s *unstructured.Unstructured, key, value string) {
	a := s.GetAnnotations()
	a[key] = value
	s.SetAnnotations(a)
}

// TestControllerRenderWithoutCluster documents the limit of lookup: without
// a cluster every render generates a new CA (use cert-manager with tools
// that only template).
func TestControllerRenderWithoutCluster(t *testing.T) {
	a := tlsSecret(t, mustRender(t, nil, nil)).Data["ca.crt"]
	b := tlsSecret(t, mustRender(t, nil, nil)).Data["ca.crt"]
	assert.NotEqual(t, a, b)
}

func TestControllerSimulatedNode(t *testing.T) {
	objs := mustRender(t, []string{"examples/simulated-node.yaml"}, map[string]any{
		"apiServer": map[string]any{"host": "10.1.2.3", "port": 6443},
	})
	assert.NotContains(t, kinds(objs), "PodDisruptionBudget", "one replica: a budget would block every drain")
	d := controllerDeployment(t, objs)
	assert.EqualValues(t, 1, *d.Spec.Replicas)
	spec := d.Spec.Template.Spec
	assert.True(t, spec.HostNetwork)
	assert.Equal(t, corev1.DNSClusterFirstWithHostNet, spec.DNSPolicy)
	assert.Nil(t, spec.Affinity)
	c := spec.Containers[0]
	assert.Equal(t, corev1.PullNever, c.ImagePullPolicy)
	for _, want := range []string{"--v=4", "--webhook-address=:18443", "--http-address=:18081"} {
		assert.Contains(t, c.Args, want)
	}
	env := controllerEnv(c)
	assert.Equal(t, "10.1.2.3", env["KUBERNETES_SERVICE_HOST"])
	assert.Equal(t, "6443", env["KUBERNETES_SERVICE_PORT"])
	assert.Equal(t, "fieldRef:metadata.namespace", env["POD_NAMESPACE"])

	// On the host network the controller's ports must not be the plugin's.
	plugin := container(t, daemonSet(t, objs).Spec.Template.Spec.Containers, "plugin")
	for _, p := range c.Ports {
		assert.NotEqual(t, plugin.Ports[0].ContainerPort, p.ContainerPort, p.Name)
	}
}

func TestControllerMonitoring(t *testing.T) {
	objs := mustRender(t, []string{"testdata/monitoring.yaml"}, nil)
	svc := &corev1.Service{}
	find(t, objs, "Service", controllerName+"-metrics", svc)
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	assert.EqualValues(t, 8080, svc.Spec.Ports[0].Port)
	assert.Equal(t, "http", svc.Spec.Ports[0].TargetPort.String())
	d := controllerDeployment(t, objs)
	assert.Equal(t, d.Spec.Selector.MatchLabels, svc.Spec.Selector)

	var sm *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ServiceMonitor" && o.GetName() == controllerName {
			sm = o
		}
	}
	require.NotNil(t, sm)
	assert.Equal(t, "prometheus", sm.GetLabels()["release"])
	selector, _, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	require.NoError(t, err)
	assert.Equal(t, selector, subset(svc.Labels, selector), "the ServiceMonitor must select the metrics Service")
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.NoError(t, err)
	require.Len(t, endpoints, 1)
	ep := endpoints[0].(map[string]any)
	assert.Equal(t, "http", ep["port"])
	assert.Equal(t, "15s", ep["interval"])
	assert.Equal(t, true, ep["honorLabels"], "claim metrics carry their own namespace and pod labels")

	// The webhook Service carries the same labels but no "http" port, so
	// the ServiceMonitor finds no second set of targets through it.
	webhookSvc := &corev1.Service{}
	find(t, objs, "Service", controllerName, webhookSvc)
	assert.Equal(t, selector, subset(webhookSvc.Labels, selector))
	for _, p := range webhookSvc.Spec.Ports {
		assert.NotEqual(t, "http", p.Name)
	}
}

// TestControllerSecretIsValidBase64: the values Helm writes into data must
// be base64 of PEM, or the API server refuses the Secret.
func TestControllerSecretIsValidBase64(t *testing.T) {
	secret := renderedSecret(t, mustRender(t, nil, nil))
	data, _, err := unstructured.NestedStringMap(secret.Object, "data")
	require.NoError(t, err)
	assert.Len(t, data, 3)
	for k, v := range data {
		raw, err := base64.StdEncoding.DecodeString(v)
		require.NoError(t, err, k)
		assert.True(t, strings.HasPrefix(string(raw), "-----BEGIN "), k)
	}
}
