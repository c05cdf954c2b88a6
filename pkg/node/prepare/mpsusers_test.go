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

package prepare

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/mpsuser"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon/mpsdaemontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsusernode"
)

// recordingUsers records what prepare asks of the MPS user server.
type recordingUsers struct {
	mu       sync.Mutex
	served   map[types.UID][]string
	sockets  map[types.UID]string
	released []types.UID
	fail     error
}

func (r *recordingUsers) ServeClaim(_ context.Context, uid types.UID, socket string, gpus []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	if r.served == nil {
		r.served, r.sockets = map[types.UID][]string{}, map[types.UID]string{}
	}
	r.served[uid], r.sockets[uid] = gpus, socket
	return nil
}

func (r *recordingUsers) ReleaseClaim(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, uid)
}

// An MPS claim's prepare serves its host/mps.sock for its GPU, its
// unprepare releases it; a time-sliced claim gets none.
func TestMPSUserSocketServedFromPrepareToUnprepare(t *testing.T) {
	env := newMPSEnv(t)
	users := &recordingUsers{}
	opts := env.options()
	opts.MPS.Users = users
	m := env.newManagerWith(t, opts)

	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	prepareOne(t, m, newClaim(claimB, "plain").result("gpu", "gpu-1", "1Gi", "10", shareB).obj())
	hostDir := filepath.Join(env.stateRoot, "claims", string(claimA), "host")
	assert.Equal(t, map[types.UID][]string{claimA: {uuid0}}, users.served)
	assert.Equal(t, filepath.Join(hostDir, "mps.sock"), users.sockets[claimA])
	for _, c := range m.PreparedClaims() {
		if c.UID == claimA {
			assert.Equal(t, users.sockets[claimA], c.MPSUserSocketPath)
			assert.Equal(t, []string{uuid0}, c.MPSGPUs())
		} else {
			assert.Empty(t, c.MPSUserSocketPath)
		}
	}

	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	assert.Contains(t, users.released, types.UID(claimA))
}

// A socket that cannot be served fails the prepare, which leaves nothing.
func TestMPSUserSocketFailureFailsPrepare(t *testing.T) {
	env := newMPSEnv(t)
	opts := env.options()
	opts.MPS.Users = &recordingUsers{fail: errors.New("cannot listen")}
	m := env.newManagerWith(t, opts)
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{mpsClaim(claimA, shareA, "8Gi", "30")})
	require.NoError(t, err)
	require.ErrorContains(t, results[claimA].Err, "cannot listen")
	assert.Equal(t, absent, env.diskState(t, claimA))
	env.noDaemonLeft(t)
}

// With the plugin's server: the prepared claim's socket answers, deciding
// with the GPU's daemon's server list (the fake's lists none).
func TestMPSUserSocketAnswersWithTheDaemonsServers(t *testing.T) {
	env := newMPSEnv(t)
	users := mpsusernode.New(mpsusernode.Options{})
	t.Cleanup(users.Close)
	opts := env.options()
	opts.MPS.Users = users
	m := env.newManagerWith(t, opts)
	users.Start(testContext(t), m, nil)
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))

	servers, err := m.MPSServers(testContext(t), uuid0)
	require.NoError(t, err)
	assert.Empty(t, servers)

	sock := filepath.Join(env.stateRoot, "claims", string(claimA), "host", "mps.sock")
	conn, err := net.Dial("unixpacket", sock)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = conn.Write([]byte(mpsuser.Request))
	require.NoError(t, err)
	buf := make([]byte, mpsuser.MaxMessageBytes)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "allowed "+strconv.Itoa(os.Getuid())+"\n", string(buf[:n]))

	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	assert.NoFileExists(t, sock)
}

// dialAs connects to the SOCK_SEQPACKET socket at path as a process of uid
// would: the effective uid of this thread alone is uid while it connects,
// which is what the kernel records for the server's SO_PEERCRED (the file
// system uid stays root's, so that the test's private directories do not
// stand in the way). Needs root.
func dialAs(t *testing.T, path string, uid int) net.Conn {
	t.Helper()
	runtime.LockOSThread()
	const keep = ^uintptr(0)
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
		runtime.UnlockOSThread()
		t.Fatalf("setresuid: %v", e)
	}
	_, _, _ = unix.RawSyscall(unix.SYS_SETFSUID, 0, 0, 0)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		if err = unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			_ = unix.Close(fd)
		}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep); e != 0 {
		// The thread stays locked, so that it ends with this goroutine.
		panic("setresuid back to root: " + e.Error())
	}
	runtime.UnlockOSThread()
	require.NoError(t, err, "connect to %s as uid %d", path, uid)
	f := os.NewFile(uintptr(fd), path)
	defer func() { _ = f.Close() }()
	conn, err := net.FileConn(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// exchange sends msg on conn (nil: nothing) and returns the answer.
func exchange(t *testing.T, conn net.Conn, msg string) string {
	t.Helper()
	if msg != "" {
		_, err := conn.Write([]byte(msg))
		require.NoError(t, err)
	}
	// A bound so that a missing answer fails the test instead of hanging it.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
	buf := make([]byte, mpsuser.MaxMessageBytes)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	return string(buf[:n])
}

// Two users on one MPS GPU: the control daemon (the fake, one uid at a
// time as NVIDIA's) would keep the second user's client waiting while the
// first user's server has clients; the plugin refuses the second user's
// process instead, naming the GPU and both uids, from the askers' holds and
// from the daemon's running server alike. Once the first user's clients
// are done, the GPU is the second user's.
func TestMPSSecondUserRefusedInsteadOfWaiting(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("processes of other uids need root")
	}
	env := newMPSEnv(t)
	users := mpsusernode.New(mpsusernode.Options{})
	t.Cleanup(users.Close)
	opts := env.options()
	opts.MPS.Users = users
	m := env.newManagerWith(t, opts)
	users.Start(testContext(t), m, nil)
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	sock := filepath.Join(env.stateRoot, "claims", string(claimA), "host", "mps.sock")
	control := filepath.Join(env.daemonConfig().PipeDir(), "control")
	hello := mpsdaemontest.ClientHello + "\n"
	ready := mpsdaemontest.ClientReady + "\n"
	serversOf := func() []mpsdaemon.Server {
		servers, err := m.MPSServers(testContext(t), uuid0)
		require.NoError(t, err)
		for i := range servers {
			servers[i].PID = 0
		}
		return servers
	}

	// uid 1000 asks, is allowed, and its driver connects: a server of uid 1000.
	hold1000 := dialAs(t, sock, 1000)
	assert.Equal(t, "allowed 1000\n", exchange(t, hold1000, mpsuser.Request))
	client1000 := dialAs(t, control, 1000)
	assert.Equal(t, ready, exchange(t, client1000, hello))
	assert.Equal(t, []mpsdaemon.Server{{UID: 1000, Clients: 1}}, serversOf())

	// A driver's client of uid 2000 waits: the daemon does not answer it.
	client2000 := dialAs(t, control, 2000)
	_, err := client2000.Write([]byte(hello))
	require.NoError(t, err)
	// libvgpu.so's ask is refused instead, naming the GPU and both uids.
	refused := "refused user " + uuid0 + " 1000 2000\n"
	assert.Equal(t, refused, exchange(t, dialAs(t, sock, 2000), mpsuser.Request))
	// Without the asker's hold, the running server's client still holds the GPU.
	require.NoError(t, hold1000.Close())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, refused, exchange(t, dialAs(t, sock, 2000), mpsuser.Request))
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, []mpsdaemon.Server{{UID: 1000, Clients: 1}}, serversOf())

	// uid 1000's client ends: the waiting client gets a server of its uid,
	// and now uid 1000 is the one refused.
	require.NoError(t, client1000.Close())
	assert.Equal(t, ready, exchange(t, client2000, ""))
	assert.Equal(t, []mpsdaemon.Server{{UID: 2000, Clients: 1}}, serversOf())
	assert.Equal(t, "refused user "+uuid0+" 2000 1000\n", exchange(t, dialAs(t, sock, 1000), mpsuser.Request))
	require.NoError(t, client2000.Close())

	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	env.noDaemonLeft(t)
}
