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
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/mpsuser"
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
