//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
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

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/region"
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
// setuid next to it never reaches the node's state, a region it grows is
// cut back, the claim's host directory is the plugin's alone, and another
// claim's prepare on the node still succeeds afterwards.
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
  cp /bin/busybox $d/planted 2>/dev/null && chmod 4755 $d/planted
  dd if=/dev/zero of=$d/fill bs=1M count=8 2>/dev/null
done; true`, dir)
	_, err = f.execIn("tenant", "c0", "sh", "-c", script)
	require.NoError(t, err)
	hostDir := filepath.Join(cluster.stateRoot, "claims", uid)
	for sub, want := range map[string][]string{"shm": {"region"}, "host": {"pids"}} {
		entries, err := os.ReadDir(filepath.Join(hostDir, sub))
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		assert.Subset(t, want, names, "nothing the container wrote is in the node's %s directory", sub)
	}
	for _, name := range []string{"planted", "fill"} {
		assert.NoFileExists(t, filepath.Join(hostDir, name))
	}
	// Growing the region file itself is undone by the plugin within a
	// second or two.
	_, err = f.execIn("tenant", "c0", "sh", "-c",
		"dd if=/dev/zero of="+dir+"/shm/region bs=1M seek=1 count=64 conv=notrunc 2>/dev/null; true")
	require.NoError(t, err)
	f.poll("the grown region cut back to its size", 30*time.Second, func() (bool, error) {
		info, err := os.Stat(filepath.Join(hostDir, "shm", "region"))
		return err == nil && info.Size() == region.Size, err
	})

	info, err := os.Stat(hostDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "no other host user reaches the claim's files")
	info, err = os.Stat(filepath.Join(hostDir, "shm"))
	require.NoError(t, err)
	assert.Zero(t, info.Mode().Perm()&0o022, "the shm directory is not writable by others")

	// Another claim is still prepared on the node.
	f.createPod(podSpec{name: "neighbour", image: cluster.plain, claims: []podClaim{{name: "gpu", template: "slice"}}})
	f.waitRunning("neighbour")
}
