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

package burstnode

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/burstgrant"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

const (
	gib   = uint64(1) << 30
	chunk = burstgrant.ChunkBytes
	gpuA  = "GPU-00000000-1111-2222-3333-444444444444"
	gpuB  = "GPU-55555555-6666-7777-8888-999999999999"
	uidA  = types.UID("a0000000-0000-4000-8000-000000000001")
	uidB  = types.UID("b0000000-0000-4000-8000-000000000002")
	uidC  = types.UID("c0000000-0000-4000-8000-000000000003")
)

// shortDir is a directory short enough for socket paths (108 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bn")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// preparedClaim is a claim with its host directory under root; limits per
// GPU UUID: {guarantee, ceiling}.
func preparedClaim(t *testing.T, root string, uid types.UID, name string, limits map[string][2]uint64) prepare.PreparedClaim {
	t.Helper()
	host := filepath.Join(root, string(uid)[:1], "host")
	require.NoError(t, os.MkdirAll(host, 0o755))
	c := prepare.PreparedClaim{UID: uid, Namespace: "ns", Name: name,
		RegionPath:      filepath.Join(root, string(uid)[:1], "region"),
		HostPIDsPath:    filepath.Join(host, "pids"),
		BurstPath:       filepath.Join(host, "burst"),
		BurstSocketPath: filepath.Join(host, "burst.sock")}
	for _, uuid := range []string{gpuA, gpuB} {
		l, ok := limits[uuid]
		if !ok {
			continue
		}
		g := prepare.GPULimit{UUID: uuid, MemoryLimitBytes: l[0]}
		if l[1] > l[0] {
			g.BurstLimitBytes = l[1]
		}
		c.GPUs = append(c.GPUs, g)
	}
	return c
}

type reclaimCall struct {
	needing ClaimRef
	from    []ClaimRef
	gpu     string
	bytes   uint64
	grace   time.Duration
}

type fakeReclaimer struct {
	mu    sync.Mutex
	calls []reclaimCall
	err   error
}

func (f *fakeReclaimer) Reclaim(_ context.Context, needing ClaimRef, from []ClaimRef, gpuUUID string, bytes uint64, grace time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, reclaimCall{needing, from, gpuUUID, bytes, grace})
	return f.err
}

type env struct {
	t    *testing.T
	ctx  context.Context
	root string
	// procRoot is the fake host /proc: the cgroups of the processes.
	procRoot string
	clock    *clocktesting.FakeClock
	book     *burstgrant.Book
	node     *Node
	reclaim  *fakeReclaimer
	registry *prometheus.Registry
}

func newEnv(t *testing.T) *env {
	_, ctx := ktesting.NewTestContext(t)
	e := &env{t: t, ctx: ctx, root: shortDir(t), procRoot: t.TempDir(), clock: clocktesting.NewFakeClock(time.Unix(1e9, 0)), reclaim: &fakeReclaimer{}, registry: prometheus.NewRegistry()}
	e.restart()
	return e
}

// restart replaces the node and its book, as a plugin restart does.
func (e *env) restart() {
	if e.node != nil {
		e.node.Close()
	}
	e.book = burstgrant.NewBook(burstgrant.Options{Clock: e.clock})
	e.book.SetGPU(gpuA, 16*gib, 0)
	e.book.SetGPU(gpuB, 16*gib, 0)
	e.registry = prometheus.NewRegistry()
	n, err := New(Options{Book: e.book, Reclaimer: e.reclaim, Registry: e.registry, Clock: e.clock, ReadTimeout: 200 * time.Millisecond, MaxConnections: 2, ProcRoot: e.procRoot})
	require.NoError(e.t, err)
	e.node = n
	e.t.Cleanup(n.Close)
}

// inPod puts host process pid in the cgroup of pod, as the kubelet's
// systemd driver names it.
func (e *env) inPod(pid uint32, pod types.UID) {
	e.t.Helper()
	dir := filepath.Join(e.procRoot, strconv.FormatUint(uint64(pid), 10))
	require.NoError(e.t, os.MkdirAll(dir, 0o755))
	cg := "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
		strings.ReplaceAll(string(pod), "-", "_") + ".slice/cri-containerd-0123.scope\n"
	require.NoError(e.t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cg), 0o644))
}

// ask sends one message on the claim's socket and returns the answer.
func ask(t *testing.T, c prepare.PreparedClaim, msg string) string {
	t.Helper()
	conn, err := net.Dial("unixpacket", c.BurstSocketPath)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Write([]byte(msg))
	require.NoError(t, err)
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	return string(buf[:n])
}
