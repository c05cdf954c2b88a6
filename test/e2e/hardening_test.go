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
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

// warnings collects the admission warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// warningClient is a client whose admission warnings land in w.
func warningClient(t *testing.T, w *warnings) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.kubeconfig)
	require.NoError(t, err)
	cfg.WarningHandler = w
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// TestQuotaChargesWhatIsGranted: claims asking for one byte are granted
// the devices' published minimum (256Mi), and the namespace's quota charges
// that, not the byte: four fit under 1Gi, the fifth is refused. Admission
// warns about the rounding.
func TestQuotaChargesWhatIsGranted(t *testing.T) {
	needsChart(t)
	f := newFramework(t)
	const annotation = "quota.vgpu.dra.dev/memory"
	f.setNamespaceMeta(nil, map[string]string{annotation: "1Gi"})
	f.poll("the quota in force (a dry-run 2Gi claim refused)", time.Minute, func() (bool, error) {
		return f.dryRunClaim("probe", claimRequest{memory: "2Gi"}) != nil, nil
	})

	w := &warnings{}
	c := warningClient(t, w)
	create := func(name, memory string) error {
		_, err := c.ResourceV1().ResourceClaims(f.ns).Create(f.ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: claimRequest{memory: memory}.spec(),
		}, metav1.CreateOptions{})
		return err
	}
	for i, memory := range []string{"1", "1Ki", "1m", "1"} {
		require.NoError(t, create(fmt.Sprintf("tiny-%d", i), memory), "claim %d (%s) is charged 256Mi of 1Gi", i, memory)
		got := w.take()
		require.Len(t, got, 1, "one rounding warning for %s", memory)
		assert.Contains(t, got[0], "256Mi")
		assert.Contains(t, got[0], "quota")
	}
	err := create("tiny-4", "1")
	require.Error(t, err, "a fifth 256Mi grant exceeds the 1Gi quota")
	assert.Contains(t, err.Error(), annotation)

	// A claim that asks for nothing takes a whole GPU and is charged it.
	f.setNamespaceMeta(nil, map[string]string{annotation: "100Ti"})
	f.poll("the larger quota in force", time.Minute, func() (bool, error) {
		return f.dryRunClaim("probe", claimRequest{memory: "2Gi"}) == nil, nil
	})
	f.setNamespaceMeta(nil, map[string]string{annotation: "2Gi"})
	f.poll("the 2Gi quota in force", time.Minute, func() (bool, error) {
		return f.dryRunClaim("probe", claimRequest{memory: "1025Mi"}) != nil, nil
	})
	err = f.dryRunClaim("whole", claimRequest{})
	require.Error(t, err, "a whole simulated GPU is more than the 2Gi quota")
	assert.Contains(t, err.Error(), annotation)
}

// TestClassRecognisedWhateverItsSpelling: an operator's DeviceClass whose
// selector spells the driver check differently from the shipped classes
// (single quotes, no spaces) is still this driver's: its claims are
// validated and charged to the quota.
func TestClassRecognisedWhateverItsSpelling(t *testing.T) {
	needsChart(t)
	f := newFramework(t)
	class := getenv("E2E_EXTRA_DEVICE_CLASS", "vgpu-e2e-spelled.dra.dev")
	_, err := f.c.ResourceV1().DeviceClasses().Create(f.ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver=='vgpu.dra.dev'`},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = f.c.ResourceV1().DeviceClasses().Delete(f.ctx, class, metav1.DeleteOptions{})
	})
	claim := func(name string, requests map[resourceapi.QualifiedName]resource.Quantity, dryRun bool) error {
		opts := metav1.CreateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := f.c.ResourceV1().ResourceClaims(f.ns).Create(f.ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
					Capacity: &resourceapi.CapacityRequirements{Requests: requests}},
			}}}},
		}, opts)
		return err
	}
	// The controller sees the new class through its informer a moment later.
	f.poll("a claim of the class with an unknown capacity refused", time.Minute, func() (bool, error) {
		err := claim("bogus", map[resourceapi.QualifiedName]resource.Quantity{"bogus": resource.MustParse("1")}, true)
		return err != nil && strings.Contains(err.Error(), "capacity.requests[bogus]"), nil
	})

	const annotation = "quota.vgpu.dra.dev/memory"
	f.setNamespaceMeta(nil, map[string]string{annotation: "512Mi"})
	f.poll("the quota in force", time.Minute, func() (bool, error) {
		return claim("probe", map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("1Gi")}, true) != nil, nil
	})
	tiny := map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("1")}
	require.NoError(t, claim("a", tiny, false))
	require.NoError(t, claim("b", tiny, false))
	err = claim("c", tiny, false)
	require.Error(t, err, "the class's claims are charged 256Mi each against 512Mi")
	assert.Contains(t, err.Error(), annotation)
}

// TestContainerCannotWriteNodeState: a container gets its claim's region
// file alone read-write (nosuid, nodev, noexec); what it writes or makes
// setuid next to it never reaches the node's state, its region cannot grow
// past its size, the claim's host directory is the plugin's alone, and
// another claim's prepare on the node still succeeds afterwards.
func TestContainerCannotWriteNodeState(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("slice", claimRequest{memory: "1Gi", cores: "10"})
	f.createPod(podSpec{name: "tenant", image: cluster.plain, claims: []podClaim{{name: "gpu", template: "slice"}}})
	pod := f.waitRunning("tenant")
	uid := string(f.claimOf(pod, "gpu").UID)
	dir := containerClaims + "/" + uid

	mounts, err := f.execIn("tenant", "c0", "cat", "/proc/self/mountinfo")
	require.NoError(t, err)
	var regionMount string
	for _, line := range strings.Split(mounts, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 5 && fields[4] == dir+"/shm/region" {
			regionMount = line
		}
		if len(fields) > 5 && fields[4] == dir+"/shm" {
			t.Errorf("the shm directory is mounted: %s", line)
		}
	}
	require.NotEmpty(t, regionMount, "the region file is mounted:\n%s", mounts)
	for _, opt := range []string{"rw", "nosuid", "nodev", "noexec"} {
		assert.Contains(t, strings.Fields(regionMount)[5], opt, regionMount)
	}

	// Root in the container tries to plant files and a setuid binary in
	// every claim path, and to fill the directory of the region.
	script := fmt.Sprintf(`for d in %[1]s/shm %[1]s/host %[1]s; do
  cp /bin/busybox $d/planted && chmod 4755 $d/planted || echo "cannot plant in $d"
  dd if=/dev/zero of=$d/fill bs=1M count=8 2>/dev/null || echo "cannot fill $d"
done; true`, dir)
	_, err = f.execIn("tenant", "c0", "sh", "-c", script)
	require.NoError(t, err)
	// The node's own view: the region is on a file system mounted there.
	hostDir := filepath.Join(cluster.runDir, "driver", "state", "claims", uid)
	for sub, want := range map[string]string{"shm": "region", "host": "pids"} {
		out, err := onNode(f.ctx, pod.Spec.NodeName, "ls", "-A", filepath.Join(hostDir, sub))
		require.NoError(t, err)
		assert.Subset(t, []string{want}, strings.Fields(out), "nothing the container wrote is in the node's %s directory", sub)
	}
	out, err := onNode(f.ctx, pod.Spec.NodeName, "ls", "-A", hostDir)
	require.NoError(t, err)
	assert.NotContains(t, strings.Fields(out), "planted")
	assert.NotContains(t, strings.Fields(out), "fill")

	// Writing past the region's end fails at its size.
	out, err = f.execIn("tenant", "c0", "sh", "-c",
		"dd if=/dev/zero of="+dir+"/shm/region bs=1M seek=1 count=64 conv=notrunc 2>&1; true")
	require.NoError(t, err)
	assert.Contains(t, out, "No space left on device")
	assert.Equal(t, strconv.Itoa(region.Size), nodeStat(f, pod.Spec.NodeName, "%s", filepath.Join(hostDir, "shm", "region")))

	assert.Equal(t, "700", nodeStat(f, pod.Spec.NodeName, "%a", hostDir), "no other host user reaches the claim's files")
	assert.Equal(t, "755", nodeStat(f, pod.Spec.NodeName, "%a", filepath.Join(hostDir, "shm")), "the shm directory is not writable by others")

	// Another claim is still prepared on the node.
	f.createPod(podSpec{name: "neighbour", image: cluster.plain, claims: []podClaim{{name: "gpu", template: "slice"}}})
	f.waitRunning("neighbour")
}

// nodeStat is stat's format of path, as the node sees it.
func nodeStat(f *framework, node, format, path string) string {
	f.t.Helper()
	out, err := onNode(f.ctx, node, "stat", "-c", format, path)
	require.NoError(f.t, err)
	return strings.TrimSpace(out)
}

// nodeDiskKiB is what the node's state root holds, in KiB: its own file
// system and the claims' region file systems mounted in it.
func nodeDiskKiB(f *framework, node string) int64 {
	f.t.Helper()
	out, err := onNode(f.ctx, node, "du", "-sk", filepath.Join(cluster.runDir, "driver", "state"))
	require.NoError(f.t, err)
	fields := strings.Fields(out)
	require.NotEmpty(f.t, fields, "du printed nothing")
	kib, err := strconv.ParseInt(fields[0], 10, 64)
	require.NoError(f.t, err, "du: %q", out)
	return kib
}

// TestRegionCannotFillNodeDisk: a container that keeps allocating and
// writing past its region's end for 60 s never gets a byte of it, the
// node's state root grows by the new claims' regions alone, pods with
// other claims start on the node meanwhile, and the container's own claim
// keeps working (and limiting) for its other processes.
func TestRegionCannotFillNodeDisk(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("slice", claimRequest{memory: "1Gi", cores: "10"})
	f.createPod(podSpec{name: "hog", containers: 2, claims: []podClaim{{name: "gpu", template: "slice"}}})
	pod := f.waitRunning("hog")
	node := pod.Spec.NodeName
	claim := f.claimOf(pod, "gpu")
	cfg, err := f.execIn("hog", "c1", "cat", containerClaims+"/"+string(claim.UID)+"/config")
	require.NoError(t, err)
	uuid := parseConfig(cfg)["device.0.uuid"]
	before := nodeDiskKiB(f, node)

	const seconds = 60
	script := fmt.Sprintf(`r=%s/%s/shm/region; end=$(($(date +%%s) + %d)); grew=0; refused=0
while [ "$(date +%%s)" -lt "$end" ]; do
  if fallocate -o %d -l 67108864 "$r" 2>/dev/null; then grew=$((grew + 1)); else refused=$((refused + 1)); fi
  if dd if=/dev/zero of="$r" bs=1M seek=1 count=64 conv=notrunc 2>/dev/null; then grew=$((grew + 1)); else refused=$((refused + 1)); fi
done
echo "grew=$grew refused=$refused"`, containerClaims, claim.UID, seconds, region.Size)
	type result struct {
		out string
		err error
	}
	hog := make(chan result, 1)
	go func() {
		out, err := f.execIn("hog", "c0", "sh", "-c", script)
		hog <- result{out, err}
	}()

	started := time.Now()
	maxGrowth := int64(0)
	neighbours := 0
	for i := range 3 {
		name := fmt.Sprintf("neighbour-%d", i)
		f.createPod(podSpec{name: name, image: cluster.plain, node: node, claims: []podClaim{{name: "gpu", template: "slice"}}})
		f.waitRunning(name)
		neighbours++
		maxGrowth = max(maxGrowth, nodeDiskKiB(f, node)-before)
	}
	require.Less(t, time.Since(started), seconds*time.Second, "the neighbours started while the hog wrote")
	var r result
	for done := false; !done; {
		select {
		case r = <-hog:
			done = true
		case <-time.After(2 * time.Second):
			maxGrowth = max(maxGrowth, nodeDiskKiB(f, node)-before)
		}
	}
	require.NoError(t, r.err, r.out)
	t.Logf("hog: %s; state root grew by at most %d KiB with %d new claims", strings.TrimSpace(r.out), maxGrowth, neighbours)
	var grew, refused int
	_, err = fmt.Sscanf(strings.TrimSpace(r.out), "grew=%d refused=%d", &grew, &refused)
	require.NoError(t, err, r.out)
	assert.Zero(t, grew, "no allocation or write past the region's end succeeded")
	assert.Positive(t, refused)
	// Each new claim brings one region and a few small files.
	regionKiB := int64((region.Size + 4095) / 4096 * 4)
	assert.LessOrEqual(t, maxGrowth, int64(neighbours)*(regionKiB+64)+256, "the state root grew by the new claims' regions alone")

	// The hog's claim still works for its other processes, limit included.
	assert.Equal(t, "CUDA_SUCCESS", f.probeAlloc("hog", "c1", 0, uuid, 512<<20))
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc("hog", "c1", 0, uuid, 2<<30))
}
