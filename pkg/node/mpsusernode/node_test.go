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

package mpsusernode

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/mpsuser"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
)

const (
	gpu0 = "GPU-00000000-1111-2222-3333-444444444444"
	gpu1 = "GPU-11111111-1111-2222-3333-444444444444"
	// askerEnv makes the test binary an asker of the socket it names: it
	// prints the reply and, allowed, holds its connection until its
	// standard input closes.
	askerEnv = "MPSUSERNODE_ASKER"
)

// askerBin is a copy of the test binary that other uids may run.
var askerBin string

func TestMain(m *testing.M) {
	if sock := os.Getenv(askerEnv); sock != "" {
		os.Exit(asker(sock))
	}
	dir, err := os.MkdirTemp("", "mpsuser-asker")
	if err != nil {
		panic(err)
	}
	askerBin = filepath.Join(dir, "asker")
	if err := copyExecutable(askerBin); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func copyExecutable(to string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	if err := os.Chmod(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

func asker(sock string) int {
	conn, err := net.Dial("unixpacket", sock)
	if err != nil {
		fmt.Println("connect:", err)
		return 1
	}
	if _, err := conn.Write([]byte(mpsuser.Request)); err != nil {
		fmt.Println("send:", err)
		return 1
	}
	buf := make([]byte, mpsuser.MaxMessageBytes)
	n, err := conn.Read(buf)
	if err != nil {
		fmt.Println("read:", err)
		return 1
	}
	fmt.Print(string(buf[:n]))
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// process is an asker process of another uid.
type process struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	reply string
}

// ask runs an asker of uid on sock and returns it once it has its reply
// (allowed ones hold until release or kill).
func ask(t *testing.T, sock string, uid uint32) *process {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("askers of other uids need root")
	}
	cmd := exec.Command(askerBin)
	cmd.Env = append(os.Environ(), askerEnv+"="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, stdin: stdin}
	t.Cleanup(func() { p.kill() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	p.reply = line
	return p
}

func (p *process) release() {
	_ = p.stdin.Close()
	_ = p.cmd.Wait()
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// fakeServers is a daemon's server list per GPU.
type fakeServers struct {
	mu      sync.Mutex
	servers map[string][]mpsdaemon.Server
	err     error
}

func (f *fakeServers) MPSServers(_ context.Context, gpu string) ([]mpsdaemon.Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.servers[gpu], f.err
}

// socketDir is short: unix socket paths are limited to 107 bytes.
func socketDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "mpsuser")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func newNode(t *testing.T, opts Options, servers ServerLister, claims map[types.UID][]string) (*Node, map[types.UID]string) {
	t.Helper()
	n := New(opts)
	t.Cleanup(n.Close)
	dir := socketDir(t)
	socks := map[types.UID]string{}
	var list []Claim
	for uid, gpus := range claims {
		socks[uid] = filepath.Join(dir, string(uid)+".sock")
		list = append(list, Claim{UID: uid, Socket: socks[uid], GPUs: gpus})
	}
	n.Start(context.Background(), servers, list)
	return n, socks
}

func allowed(uid uint32) string { return string(mpsuser.Reply{Allowed: true, AskerUID: uid}.Encode()) }

func refusedUser(gpu string, served, asker uint32) string {
	return string(mpsuser.Reply{Reason: mpsuser.ReasonUser, GPU: gpu, ServedUID: served, AskerUID: asker}.Encode())
}

// Processes of one uid share a GPU, across claims; another uid is refused
// naming the GPU and both uids while they hold it, and allowed once they
// are gone, on a GPU of its own at any time.
func TestOneUserPerGPU(t *testing.T) {
	_, socks := newNode(t, Options{}, &fakeServers{}, map[types.UID][]string{"a": {gpu0}, "b": {gpu0}, "c": {gpu1}})
	a1 := ask(t, socks["a"], 1000)
	require.Equal(t, allowed(1000), a1.reply)
	b1 := ask(t, socks["b"], 1000)
	require.Equal(t, allowed(1000), b1.reply)
	assert.Equal(t, refusedUser(gpu0, 1000, 2000), ask(t, socks["b"], 2000).reply)
	assert.Equal(t, allowed(2000), ask(t, socks["c"], 2000).reply)

	a1.release()
	assert.Equal(t, refusedUser(gpu0, 1000, 2000), ask(t, socks["a"], 2000).reply, "b's process still holds the GPU")
	b1.release()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := ask(t, socks["a"], 2000)
		defer p.release()
		assert.Equal(c, allowed(2000), p.reply)
	}, 10*time.Second, 20*time.Millisecond)
}

// A SIGKILLed holder frees the GPU: the kernel closes its connection.
func TestSIGKILLedHolderFrees(t *testing.T) {
	_, socks := newNode(t, Options{}, &fakeServers{}, map[types.UID][]string{"a": {gpu0}})
	holder := ask(t, socks["a"], 1000)
	require.Equal(t, allowed(1000), holder.reply)
	require.Equal(t, refusedUser(gpu0, 1000, 2000), ask(t, socks["a"], 2000).reply)
	holder.kill()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := ask(t, socks["a"], 2000)
		defer p.release()
		assert.Equal(c, allowed(2000), p.reply)
	}, 10*time.Second, 20*time.Millisecond)
}

// A running server with clients holds its owner's uid (clients that escape
// the library, or askers of before a plugin restart); one without clients
// is replaced by the daemon, so it holds nothing; a daemon that cannot
// list leaves the decision to the holds.
func TestRunningServerOwner(t *testing.T) {
	servers := &fakeServers{servers: map[string][]mpsdaemon.Server{gpu0: {{PID: 42, UID: 1000, Clients: 1}}}}
	_, socks := newNode(t, Options{}, servers, map[types.UID][]string{"a": {gpu0}})
	assert.Equal(t, refusedUser(gpu0, 1000, 2000), ask(t, socks["a"], 2000).reply)
	p := ask(t, socks["a"], 1000)
	assert.Equal(t, allowed(1000), p.reply)
	p.release()

	servers.mu.Lock()
	servers.servers[gpu0][0].Clients = 0
	servers.mu.Unlock()
	p = ask(t, socks["a"], 2000)
	assert.Equal(t, allowed(2000), p.reply)
	p.release()

	servers.mu.Lock()
	servers.err = fmt.Errorf("daemon restarting")
	servers.servers[gpu0][0].Clients = 3
	servers.mu.Unlock()
	p = ask(t, socks["a"], 3000)
	assert.Equal(t, allowed(3000), p.reply)
	p.release()
}

// dial connects as this process (root).
func dial(t *testing.T, sock string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func roundTrip(t *testing.T, c *net.UnixConn, msg []byte) string {
	t.Helper()
	_, err := c.Write(msg)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	require.NoError(t, err)
	return string(buf[:n])
}

// A claim's processes hold at most MaxConnections; the next is refused at
// once, and a freed connection makes room.
func TestConnectionBound(t *testing.T) {
	_, socks := newNode(t, Options{MaxConnections: 2}, &fakeServers{}, map[types.UID][]string{"a": {gpu0}})
	uid := uint32(os.Getuid())
	c1, c2 := dial(t, socks["a"]), dial(t, socks["a"])
	assert.Equal(t, allowed(uid), roundTrip(t, c1, []byte(mpsuser.Request)))
	assert.Equal(t, allowed(uid), roundTrip(t, c2, []byte(mpsuser.Request)))
	assert.Equal(t, "refused limit 2\n", roundTrip(t, dial(t, socks["a"]), []byte(mpsuser.Request)))
	require.NoError(t, c1.Close())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, allowed(uid), roundTrip(t, dial(t, socks["a"]), []byte(mpsuser.Request)))
	}, 10*time.Second, 20*time.Millisecond)
}

// Garbage gets a clear refusal, a silent or vanishing client nothing, and
// the server keeps answering.
func TestGarbage(t *testing.T) {
	_, socks := newNode(t, Options{ReadTimeout: 50 * time.Millisecond}, &fakeServers{}, map[types.UID][]string{"a": {gpu0}})
	for _, msg := range []string{"garbage\n", "use", "use\n\n", "USE\n", "use 1000\n", "\x00\x00\x00\x00", strings.Repeat("use\n", 300)} {
		assert.Equal(t, "refused request\n", roundTrip(t, dial(t, socks["a"]), []byte(msg)), "%q", msg)
	}
	silent := dial(t, socks["a"])
	buf := make([]byte, 64)
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := silent.Read(buf)
	assert.Error(t, err, "a client that sends nothing is closed after the read timeout")
	_ = dial(t, socks["a"]).Close()
	assert.Equal(t, allowed(uint32(os.Getuid())), roundTrip(t, dial(t, socks["a"]), []byte(mpsuser.Request)))
}

// Unprepare closes the socket, drops its processes' holds and removes the
// file; serving it again (a restarted plugin) replaces a stale file.
func TestReleaseAndServeAgain(t *testing.T) {
	n, socks := newNode(t, Options{}, &fakeServers{}, map[types.UID][]string{"a": {gpu0}, "b": {gpu0}})
	holder := dial(t, socks["a"])
	require.Equal(t, allowed(uint32(os.Getuid())), roundTrip(t, holder, []byte(mpsuser.Request)))
	n.ReleaseClaim("a")
	_, err := os.Stat(socks["a"])
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, holder.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = holder.Read(make([]byte, 8))
	assert.Error(t, err, "the released claim's connections are closed")
	assert.Equal(t, allowed(2000), ask(t, socks["b"], 2000).reply, "its holds are gone")

	ln, err := net.Listen("unixpacket", socks["a"])
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	require.NoError(t, n.ServeClaim(context.Background(), "a", socks["a"], []string{gpu0}))
	assert.Equal(t, refusedUser(gpu0, 2000, 0), roundTrip(t, dial(t, socks["a"]), []byte(mpsuser.Request)))
}

// Askers of random uids SIGKILLed at random instants of their ask leave no
// hold behind: once they are all gone, any uid is allowed.
func TestAskersKilledAtRandomInstants(t *testing.T) {
	_, socks := newNode(t, Options{}, &fakeServers{}, map[types.UID][]string{"a": {gpu0}})
	if os.Geteuid() != 0 {
		t.Skip("askers of other uids need root")
	}
	for round := range 20 {
		var procs []*exec.Cmd
		for i := range 4 {
			cmd := exec.Command(askerBin)
			cmd.Env = append(os.Environ(), askerEnv+"="+socks["a"])
			uid := uint32(1000 + (round+i)%3)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
			_, err := cmd.StdinPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			procs = append(procs, cmd)
		}
		for _, cmd := range procs {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := ask(t, socks["a"], 4242)
		defer p.release()
		assert.Equal(c, allowed(4242), p.reply)
	}, 10*time.Second, 20*time.Millisecond)
}
