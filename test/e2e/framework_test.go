//go:build e2e

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

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	driverName  = "vgpu.dra.dev"
	deviceClass = "vgpu.dra.dev"
	// Bounds of every wait: each names what it waits for when it expires.
	podStartTimeout      = 2 * time.Minute
	deleteTimeout        = 2 * time.Minute
	unschedulableTimeout = time.Minute
	containerClaims      = "/usr/local/vgpu/claims"
)

// env is the cluster under test, from the variables `cluster.sh env` prints.
type env struct {
	client     kubernetes.Interface
	kubeconfig string
	kubectl    string
	ctr        string
	// k8sVersion and featureGates are what the cluster was started with.
	k8sVersion   string
	featureGates string
	runDir       string
	cdiDir       string
	stateRoot    string
	// node is the node the single-node specs place their pods on (the
	// first); nodes are all of them.
	node  string
	nodes []string
	// nodeView is where this machine keeps node's own paths under runDir.
	nodeView   string
	clusterSh  string
	workload   string
	plain      string
	driverSh   string
	pluginHTTP string
	// driverMode is how driver.sh installed the driver: "chart" (the Helm
	// chart with the dra-controller) or "host" (only the plugin, as a host process).
	driverMode string
}

var cluster *env

func TestMain(m *testing.M) {
	e, err := loadEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n(run test/e2e/cluster.sh up and test/e2e/driver.sh install, then source the printed env file)\n", err)
		os.Exit(2)
	}
	cluster = e
	os.Exit(m.Run())
}

func loadEnv() (*env, error) {
	runDir := getenv("E2E_RUN_DIR", "/var/lib/vgpu-dra-e2e")
	kubeconfig := getenv("KUBECONFIG", filepath.Join(runDir, "pki", "admin.kubeconfig"))
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	node := os.Getenv("E2E_NODE_NAME")
	if node == "" {
		return nil, errors.New("E2E_NODE_NAME is not set")
	}
	nodes := strings.Fields(getenv("E2E_NODE_LIST", node))
	if len(nodes) == 0 || nodes[0] != node {
		return nil, fmt.Errorf("E2E_NODE_LIST=%q does not start with E2E_NODE_NAME=%q", nodes, node)
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	view := getenv("E2E_NODE_VIEW", runDir)
	// The cluster's own kubectl and ctr: cluster.sh env names them, since
	// each version of a piece keeps its binaries in a directory of its own.
	kubectl, ctr := os.Getenv("E2E_KUBECTL"), os.Getenv("E2E_CTR")
	if kubectl == "" || ctr == "" {
		return nil, errors.New("E2E_KUBECTL or E2E_CTR is not set (cluster.sh env exports both)")
	}
	return &env{
		client:       client,
		kubeconfig:   kubeconfig,
		kubectl:      kubectl,
		ctr:          ctr,
		k8sVersion:   os.Getenv("E2E_K8S_VERSION"),
		featureGates: os.Getenv("E2E_FEATURE_GATES"),
		runDir:       runDir,
		cdiDir:       getenv("E2E_CDI_DIR", filepath.Join(view, "cdi")),
		stateRoot:    filepath.Join(view, "driver", "state"),
		node:         node,
		nodes:        nodes,
		nodeView:     view,
		clusterSh:    filepath.Join(wd, "cluster.sh"),
		workload:     getenv("E2E_WORKLOAD_IMAGE", "docker.io/vgpu-dra-e2e/cuda-probe:1"),
		plain:        getenv("E2E_BUSYBOX_IMAGE", "docker.io/vgpu-dra-e2e/busybox:1"),
		driverSh:     filepath.Join(wd, "driver.sh"),
		pluginHTTP:   getenv("E2E_PLUGIN_HTTP", "127.0.0.1:18080"),
		driverMode:   driverMode(runDir),
	}, nil
}

// viewOf returns where this machine keeps node's own paths under runDir
// (cluster.sh keeps a namespaced node's under runDir/nodes/NODE).
func (e *env) viewOf(node string) string {
	if len(e.nodes) == 1 {
		return e.runDir
	}
	return filepath.Join(e.runDir, "nodes", node)
}

// componentLog is the harness's log of a node's kubelet or containerd.
func (e *env) componentLog(component, node string) string {
	if len(e.nodes) > 1 {
		component += "-" + node
	}
	return filepath.Join(e.runDir, "logs", component+".log")
}

// needsNodes skips a spec that needs more nodes than the cluster has.
func needsNodes(t *testing.T, n int) {
	t.Helper()
	if len(cluster.nodes) < n {
		t.Skipf("needs %d nodes; the cluster has %d (E2E_NODES)", n, len(cluster.nodes))
	}
}

// driverMode reads the mode driver.sh install recorded; chart by default.
func driverMode(runDir string) string {
	data, err := os.ReadFile(filepath.Join(runDir, "driver", "mode"))
	if err != nil {
		return "chart"
	}
	return strings.TrimSpace(string(data))
}

// needsChart skips a spec of the Helm-installed driver (controller, upgrade)
// when driver.sh installed only the plugin.
func needsChart(t *testing.T) {
	t.Helper()
	if cluster.driverMode != "chart" {
		t.Skipf("needs the Helm-installed driver; driver.sh installed %q (E2E_DRIVER_MODE)", cluster.driverMode)
	}
}

func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// framework is one spec's view of the cluster: its own namespace, deleted
// at the end, and on failure a dump of what explains it.
type framework struct {
	t   *testing.T
	ctx context.Context
	ns  string
	c   kubernetes.Interface
}

func newFramework(t *testing.T) *framework {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	f := &framework{t: t, ctx: ctx, c: cluster.client,
		ns: "e2e-" + strings.ToLower(rand.String(6))}
	_, err := f.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{})
	require.NoError(t, err, "create namespace %s", f.ns)
	// Pods are refused until the namespace's default ServiceAccount exists.
	f.poll("ServiceAccount default in "+f.ns, time.Minute, func() (bool, error) {
		_, err := f.c.CoreV1().ServiceAccounts(f.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	t.Cleanup(func() {
		if t.Failed() {
			f.dumpDiagnostics()
		}
		f.deleteNamespace()
		cancel()
	})
	return f
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// poll waits for cond, at most timeout, failing the spec with what it waited for.
func (f *framework) poll(what string, timeout time.Duration, cond func() (bool, error)) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.ctx, 250*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond() })
	require.NoError(f.t, err, "waiting at most %s for %s", timeout, what)
}

func (f *framework) deleteNamespace() {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	zero := int64(0)
	_ = f.c.CoreV1().Pods(f.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = f.c.CoreV1().Namespaces().Delete(ctx, f.ns, metav1.DeleteOptions{})
	// Claims must be unprepared before the next spec counts capacity.
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, deleteTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := f.c.CoreV1().Namespaces().Get(ctx, f.ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// dumpDiagnostics prints what explains a failure: the namespace's events
// and objects, and the tails of the plugin's and the kubelet's logs.
func (f *framework) dumpDiagnostics() {
	f.t.Logf("===== diagnostics for namespace %s =====", f.ns)
	for _, args := range [][]string{
		{"get", "events", "-n", f.ns, "--sort-by=.lastTimestamp"},
		{"describe", "pods", "-n", f.ns},
		{"get", "resourceclaims", "-n", f.ns, "-o", "yaml"},
		{"get", "resourceslices", "-o", "wide"},
	} {
		out, err := kubectl(f.ctx, args...)
		f.t.Logf("$ kubectl %s (err=%v)\n%s", strings.Join(args, " "), err, out)
	}
	for _, node := range cluster.nodes {
		cmd := exec.CommandContext(f.ctx, cluster.driverSh, "logs", "60")
		cmd.Env = append(os.Environ(), "E2E_DRIVER_NODE="+node)
		plugin, err := cmd.CombinedOutput()
		f.t.Logf("===== kubelet plugin log of %s (tail, err=%v) =====\n%s", node, err, plugin)
	}
	logs := []string{filepath.Join(cluster.runDir, "logs", "kube-scheduler.log")}
	for _, node := range cluster.nodes {
		logs = append(logs, cluster.componentLog("kubelet", node), cluster.componentLog("containerd", node))
	}
	for _, path := range logs {
		f.t.Logf("===== %s (tail) =====\n%s", filepath.Base(path), tailFile(path, 60))
	}
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kubectl runs the cluster's kubectl; used where client-go would need
// streaming (exec) or where the human-readable output is what is checked.
func kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, cluster.kubectl, append([]string{"--kubeconfig=" + cluster.kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// execIn runs a command in a container and returns its stdout; err is
// non-nil when the command exits non-zero.
func (f *framework) execIn(pod, container string, cmd ...string) (string, error) {
	args := append([]string{"exec", "-n", f.ns, pod, "-c", container, "--"}, cmd...)
	return kubectl(f.ctx, args...)
}

// driver runs one action of driver.sh (kill, start, restart, reboot,
// upgrade TAG, controller N) on the first node's plugin.
func (f *framework) driver(args ...string) {
	f.t.Helper()
	f.driverOn(cluster.node, args...)
}

// driverOn runs one action of driver.sh on node's plugin.
func (f *framework) driverOn(node string, args ...string) {
	f.t.Helper()
	cmd := exec.CommandContext(f.ctx, cluster.driverSh, args...)
	cmd.Env = append(os.Environ(), "E2E_DRIVER_NODE="+node)
	out, err := cmd.CombinedOutput()
	require.NoError(f.t, err, "E2E_DRIVER_NODE=%s driver.sh %s:\n%s", node, strings.Join(args, " "), out)
}

// ctrOn runs ctr against node's containerd, in the Kubernetes namespace, and
// returns its standard output (ctr warns on standard error on some hosts).
func ctrOn(ctx context.Context, node string, args ...string) (string, error) {
	sock := filepath.Join(cluster.viewOf(node), "containerd", "containerd.sock")
	cmd := exec.CommandContext(ctx, cluster.ctr,
		append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// onNode runs a command in node's namespaces (cluster.sh exec) and returns
// its output: what the node's own processes see, mounts included.
func onNode(ctx context.Context, node string, cmd ...string) (string, error) {
	out, err := exec.CommandContext(ctx, cluster.clusterSh, append([]string{"exec", node, "--"}, cmd...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("on node %s: %s: %w: %s", node, strings.Join(cmd, " "), err, out)
	}
	return string(out), nil
}

// claimRequest describes one request of a claim in the specs.
type claimRequest struct {
	memory string // e.g. "4Gi"; empty: the driver's default (whole GPU)
	cores  string // e.g. "30"; empty: the driver's default (0)
	// cel selects particular devices, e.g. by index; empty: any.
	cel    string
	config *runtime.RawExtension // opaque VGPUConfig parameters
	// class is the DeviceClass; empty: the driver's default class.
	class string
}

func (r claimRequest) spec() resourceapi.ResourceClaimSpec {
	exact := &resourceapi.ExactDeviceRequest{DeviceClassName: deviceClass}
	if r.class != "" {
		exact.DeviceClassName = r.class
	}
	reqs := map[resourceapi.QualifiedName]resource.Quantity{}
	if r.memory != "" {
		reqs["memory"] = resource.MustParse(r.memory)
	}
	if r.cores != "" {
		reqs["cores"] = resource.MustParse(r.cores)
	}
	if len(reqs) > 0 {
		exact.Capacity = &resourceapi.CapacityRequirements{Requests: reqs}
	}
	if r.cel != "" {
		exact.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: r.cel}}}
	}
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: exact}},
	}}
	if r.config != nil {
		spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{
			Requests: []string{"gpu"},
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: driverName, Parameters: *r.config}},
		}}
	}
	return spec
}

func (f *framework) createClaimTemplate(name string, r claimRequest) {
	f.t.Helper()
	_, err := f.c.ResourceV1().ResourceClaimTemplates(f.ns).Create(f.ctx, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: r.spec()},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err, "create ResourceClaimTemplate %s", name)
}

func (f *framework) createClaim(name string, r claimRequest) error {
	_, err := f.c.ResourceV1().ResourceClaims(f.ns).Create(f.ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       r.spec(),
	}, metav1.CreateOptions{})
	return err
}

// dryRunClaim is createClaim without persisting (nor charging a quota).
func (f *framework) dryRunClaim(name string, r claimRequest) error {
	_, err := f.c.ResourceV1().ResourceClaims(f.ns).Create(f.ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       r.spec(),
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// setNamespaceMeta merges labels and annotations into the spec's namespace.
func (f *framework) setNamespaceMeta(labels, annotations map[string]string) {
	f.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
	require.NoError(f.t, err)
	_, err = f.c.CoreV1().Namespaces().Patch(f.ctx, f.ns, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(f.t, err, "label namespace %s", f.ns)
}

// podClaim is one entry of pod.spec.resourceClaims: from a template or an
// existing claim.
type podClaim struct {
	name, template, claim string
}

// podSpec is a pod of sleeping containers; each container uses all the
// pod's claims.
type podSpec struct {
	name        string
	image       string
	claims      []podClaim
	containers  int
	annotations map[string]string
	// limits of every container, e.g. HAMi's extended resources.
	limits corev1.ResourceList
	// gates are scheduling gates the pod is created with.
	gates []string
	// node is the node the pod must run on; empty: the first node.
	node string
	// anyNode leaves the choice of node to the scheduler (node is ignored).
	anyNode bool
	// runAsUsers are the containers' uids in order; none: the image's.
	runAsUsers []int64
}

func (f *framework) createPod(p podSpec) *corev1.Pod {
	f.t.Helper()
	created, err := f.c.CoreV1().Pods(f.ns).Create(f.ctx, p.pod(), metav1.CreateOptions{})
	require.NoError(f.t, err, "create pod %s", p.name)
	return created
}

// admitted polls dry-run creations of a pod until the admitted object
// satisfies ok: the API server and the webhooks see namespace labels and
// annotations a moment after they were set.
func (f *framework) admitted(p podSpec, what string, ok func(*corev1.Pod) bool) {
	f.t.Helper()
	f.poll("a dry-run pod "+what, time.Minute, func() (bool, error) {
		got, err := f.c.CoreV1().Pods(f.ns).Create(f.ctx, p.pod(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && ok(got), nil
	})
}

func (p podSpec) pod() *corev1.Pod {
	if p.image == "" {
		p.image = cluster.workload
	}
	if p.containers == 0 {
		p.containers = 1
	}
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Annotations: p.annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &zero,
			// Pods need no network: DNS points at the pod's own loopback, and the bridge has no route out.
			DNSPolicy: corev1.DNSNone,
			DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
		},
	}
	if !p.anyNode {
		node := p.node
		if node == "" {
			node = cluster.node
		}
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	for _, g := range p.gates {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
	}
	var refs []corev1.ResourceClaim
	for _, c := range p.claims {
		pc := corev1.PodResourceClaim{Name: c.name}
		if c.template != "" {
			pc.ResourceClaimTemplateName = &c.template
		} else {
			pc.ResourceClaimName = &c.claim
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, pc)
		refs = append(refs, corev1.ResourceClaim{Name: c.name})
	}
	for i := range p.containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name:            fmt.Sprintf("c%d", i),
			Image:           p.image,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"/bin/sleep", "3600"},
			Resources:       corev1.ResourceRequirements{Claims: refs, Limits: p.limits},
		})
		if i < len(p.runAsUsers) {
			pod.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{RunAsUser: &p.runAsUsers[i]}
		}
	}
	return pod
}

// waitUnschedulable waits until the scheduler reports the pod Unschedulable
// and returns its message.
func (f *framework) waitUnschedulable(pod string) string {
	f.t.Helper()
	var reason string
	f.poll("the scheduler to report pod "+pod+" unschedulable", unschedulableTimeout, func() (bool, error) {
		p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				reason = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	return reason
}

func (f *framework) waitRunning(name string) *corev1.Pod {
	f.t.Helper()
	var pod *corev1.Pod
	f.poll("pod "+name+" Running", podStartTimeout, func() (bool, error) {
		p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && allReady(p), nil
	})
	return pod
}

func allReady(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if !s.Ready {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

func (f *framework) deletePodAndWait(name string) {
	f.t.Helper()
	zero := int64(0)
	err := f.c.CoreV1().Pods(f.ns).Delete(f.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	require.NoError(f.t, ignoreNotFound(err), "delete pod %s", name)
	f.poll("pod "+name+" gone", deleteTimeout, func() (bool, error) {
		_, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
}

// claimOf returns the ResourceClaim behind a pod's claim entry.
func (f *framework) claimOf(pod *corev1.Pod, entry string) *resourceapi.ResourceClaim {
	f.t.Helper()
	var name string
	f.poll("claim "+entry+" of pod "+pod.Name+" created", time.Minute, func() (bool, error) {
		p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == entry && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
				return true, nil
			}
		}
		for _, c := range p.Spec.ResourceClaims {
			if c.Name == entry && c.ResourceClaimName != nil {
				name = *c.ResourceClaimName
				return true, nil
			}
		}
		return false, nil
	})
	claim, err := f.c.ResourceV1().ResourceClaims(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err, "get claim %s", name)
	return claim
}

// allocatedDevice returns the single device result of an allocated claim.
func allocatedDevice(t *testing.T, c *resourceapi.ResourceClaim) resourceapi.DeviceRequestAllocationResult {
	t.Helper()
	require.NotNil(t, c.Status.Allocation, "claim %s is not allocated", c.Name)
	require.Len(t, c.Status.Allocation.Devices.Results, 1, "claim %s results", c.Name)
	return c.Status.Allocation.Devices.Results[0]
}

// claimFiles lists the host-side traces of a prepared claim on the first
// node: its directory under the state root and its CDI specs.
func claimFiles(uid string) []string {
	return claimFilesOn(cluster.stateRoot, cluster.cdiDir, uid)
}

// claimFilesOnNode lists a claim's traces on node (paths on this machine).
func claimFilesOnNode(node, uid string) []string {
	view := cluster.viewOf(node)
	return claimFilesOn(filepath.Join(view, "driver", "state"), filepath.Join(view, "cdi"), uid)
}

func claimFilesOn(stateRoot, cdiDir, uid string) []string {
	var found []string
	if _, err := os.Stat(filepath.Join(stateRoot, "claims", uid)); err == nil {
		found = append(found, filepath.Join(stateRoot, "claims", uid))
	}
	specs, _ := filepath.Glob(filepath.Join(cdiDir, "*"+uid+"*"))
	found = append(found, specs...)
	sort.Strings(found)
	return found
}

// parseEnv turns `env` output into a map.
func parseEnv(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// parseConfig reads the driver's key=value per-claim config.
func parseConfig(out string) map[string]string { return parseEnv(out) }

func rawJSON(t *testing.T, v any) *runtime.RawExtension {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err, "encode opaque parameters")
	return &runtime.RawExtension{Raw: data}
}
