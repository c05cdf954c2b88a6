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

// Package mpsusernode is the kubelet plugin's side of the MPS user
// protocol (pkg/contract/mpsuser, docs/mps.md "Containers of different
// users"): one socket per prepared MPS claim, host/mps.sock in the claim's
// read-only host/ directory, on which a process of the claim asks before
// CUDA initialises whether its uid may use the claim's GPU now.
//
// Before multi-user MPS, a GPU's MPS server serves one uid at a time and a
// client of another uid waits until the running server's clients are done.
// The GPU's MPS user is the uid of the live askers that were allowed (an
// allowed process keeps its connection open for its life, so a process
// that ends, SIGKILLed or not, frees its hold when the kernel closes its
// descriptor) and of the GPU's running MPS servers that have clients (the
// control daemon's get_server_list and get_client_list, the server's owner
// from /proc: covers clients that escape the library, and the askers of
// before a plugin restart). A free GPU or the same uid is allowed; another
// uid is refused with the GPU, the uid it serves and the asker's uid.
package mpsusernode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/mpsuser"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
)

const (
	// DefaultMaxConnections bounds the connections one claim's processes
	// hold at once (asking and allowed): an allowed process holds one for
	// its life, and MPS itself serves at most 48 clients per GPU on
	// Volta and later.
	DefaultMaxConnections = 64
	// DefaultReadTimeout is how long a connection may take to send its
	// request.
	DefaultReadTimeout = time.Second
	// socketMode lets any user of the claim's containers connect.
	socketMode = 0o666
)

// ServerLister lists the running MPS servers of a GPU
// (prepare.Manager.MPSServers).
type ServerLister interface {
	MPSServers(ctx context.Context, gpu string) ([]mpsdaemon.Server, error)
}

// Options configure a Node; zero values take the defaults.
type Options struct {
	// MaxConnections per claim (default DefaultMaxConnections).
	MaxConnections int
	// ReadTimeout bounds the wait for a request (default DefaultReadTimeout).
	ReadTimeout time.Duration
}

// Node serves the MPS claims' sockets of one plugin and decides per GPU.
type Node struct {
	opts Options

	mu      sync.Mutex
	ctx     context.Context
	servers ServerLister
	closed  bool
	claims  map[types.UID]*claimServer
	// holds are the allowed askers' connections by GPU.
	holds map[string]map[*hold]bool
}

// hold is one allowed process's hold on the user of its claim's GPUs.
type hold struct {
	uid  uint32
	gpus []string
}

// New returns a Node; Start gives it the daemons' server lists.
func New(opts Options) *Node {
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	return &Node{opts: opts, ctx: context.Background(), claims: map[types.UID]*claimServer{}, holds: map[string]map[*hold]bool{}}
}

// Start sets where the GPUs' running servers are listed (until then only
// the holds decide) and serves the sockets of the prepared MPS claims a
// restarted plugin recovered.
func (n *Node) Start(ctx context.Context, servers ServerLister, claims []Claim) {
	n.mu.Lock()
	n.ctx, n.servers = ctx, servers
	n.mu.Unlock()
	for _, c := range claims {
		if err := n.ServeClaim(ctx, c.UID, c.Socket, c.GPUs); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot serve the MPS user socket of a recovered claim; its processes fail CUDA initialisation until it is served", "claimUID", c.UID)
		}
	}
}

// Claim is a prepared MPS claim: its socket's host path and its MPS GPUs.
type Claim struct {
	UID    types.UID
	Socket string
	GPUs   []string
}

// ServeClaim serves the claim's socket at path for its MPS GPUs; serving
// a claim already served does nothing.
func (n *Node) ServeClaim(ctx context.Context, uid types.UID, path string, gpus []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.claims[uid] != nil || len(gpus) == 0 {
		return nil
	}
	s, err := newClaimServer(n, uid, path, slices.Clone(gpus), klog.FromContext(ctx))
	if err != nil {
		return fmt.Errorf("claim %s: MPS user socket: %w", uid, err)
	}
	n.claims[uid] = s
	return nil
}

// ReleaseClaim stops serving an unprepared (or rolled back) claim: its
// socket is closed and removed, its processes' holds dropped.
func (n *Node) ReleaseClaim(uid types.UID) {
	n.mu.Lock()
	s := n.claims[uid]
	delete(n.claims, uid)
	n.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// Close stops every claim's server (the files are removed; a restarted
// plugin serves them again).
func (n *Node) Close() {
	n.mu.Lock()
	n.closed = true
	claims := n.claims
	n.claims = map[types.UID]*claimServer{}
	n.mu.Unlock()
	for _, s := range claims {
		s.close()
	}
}

// decide answers asker uid of a claim on gpus: allowed with its hold
// taken, or refused naming the first GPU that serves another uid.
func (n *Node) decide(gpus []string, uid uint32, logger klog.Logger) (*hold, mpsuser.Reply) {
	n.mu.Lock()
	lister, ctx := n.servers, n.ctx
	n.mu.Unlock()
	running := map[string][]mpsdaemon.Server{}
	if lister != nil {
		for _, gpu := range gpus {
			s, err := lister.MPSServers(ctx, gpu)
			if err != nil {
				// The daemon restarting or not answering: its servers end
				// with it, so the holds decide alone.
				logger.V(2).Info("Cannot list the GPU's MPS servers; deciding on the allowed processes alone", "gpu", gpu, "err", err)
				continue
			}
			running[gpu] = s
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, gpu := range gpus {
		if served, ok := n.servedLocked(gpu, running[gpu], uid); ok {
			return nil, mpsuser.Reply{Reason: mpsuser.ReasonUser, GPU: gpu, ServedUID: served, AskerUID: uid}
		}
	}
	h := &hold{uid: uid, gpus: gpus}
	for _, gpu := range gpus {
		if n.holds[gpu] == nil {
			n.holds[gpu] = map[*hold]bool{}
		}
		n.holds[gpu][h] = true
	}
	return h, mpsuser.Reply{Allowed: true, AskerUID: uid}
}

// servedLocked returns the smallest uid other than asker that gpu serves:
// an allowed process's or a running server's with clients (a server
// without clients is replaced by the daemon at once).
func (n *Node) servedLocked(gpu string, running []mpsdaemon.Server, asker uint32) (uint32, bool) {
	var others []uint32
	for h := range n.holds[gpu] {
		if h.uid != asker {
			others = append(others, h.uid)
		}
	}
	for _, s := range running {
		if s.Clients > 0 && s.UID != asker {
			others = append(others, s.UID)
		}
	}
	if len(others) == 0 {
		return 0, false
	}
	return slices.Min(others), true
}

// drop releases a hold.
func (n *Node) drop(h *hold) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, gpu := range h.gpus {
		delete(n.holds[gpu], h)
		if len(n.holds[gpu]) == 0 {
			delete(n.holds, gpu)
		}
	}
}

// claimServer answers one claim's processes on its socket.
type claimServer struct {
	n      *Node
	uid    types.UID
	path   string
	gpus   []string
	ln     *net.UnixListener
	logger klog.Logger

	mu     sync.Mutex
	conns  map[*net.UnixConn]bool
	closed bool
	wg     sync.WaitGroup
}

// listen removes a stale socket file at path and listens there.
func listen(path string) (*net.UnixListener, error) {
	if info, err := os.Lstat(path); err == nil {
		if info.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is no socket (mode %s)", path, info.Mode())
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// close removes the file itself, so that closing never unlinks a
	// socket that replaced this one.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, socketMode); err != nil {
		_ = ln.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("set the socket's mode: %w", err)
	}
	return ln, nil
}

func newClaimServer(n *Node, uid types.UID, path string, gpus []string, logger klog.Logger) (*claimServer, error) {
	ln, err := listen(path)
	if err != nil {
		return nil, err
	}
	s := &claimServer{n: n, uid: uid, path: path, gpus: gpus, ln: ln, logger: logger, conns: map[*net.UnixConn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *claimServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: back off rather than spin.
			s.logger.V(2).Info("Accepting on the MPS user socket failed", "claimUID", s.uid, "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		over, ok := s.track(conn)
		if !ok {
			_ = conn.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(conn, over)
			s.serve(conn, over)
		}()
	}
}

// track records conn; over reports that the claim already holds its bound
// of connections (conn is then only answered), ok false that the server
// closed.
func (s *claimServer) track(c *net.UnixConn) (over, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, false
	}
	over = len(s.conns) >= s.n.opts.MaxConnections
	if !over {
		s.conns[c] = true
	}
	return over, true
}

func (s *claimServer) untrack(c *net.UnixConn, over bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !over {
		delete(s.conns, c)
	}
	_ = c.Close()
}

// serve answers one request and, when it allowed it, holds the asker's
// user until the connection ends. Over the claim's bound it refuses at
// once, so that no process waits on a full claim.
func (s *claimServer) serve(conn *net.UnixConn, over bool) {
	uid, err := peerUID(conn)
	if err != nil {
		s.logger.V(2).Info("Cannot read the MPS user socket's peer", "claimUID", s.uid, "err", err)
		return
	}
	if err := conn.SetReadDeadline(time.Now().Add(s.n.opts.ReadTimeout)); err != nil {
		return
	}
	buf := make([]byte, mpsuser.MaxMessageBytes+1)
	n, err := conn.Read(buf)
	if err != nil {
		return
	}
	if err := mpsuser.ParseRequest(buf[:n]); err != nil {
		_, _ = conn.Write(mpsuser.Reply{Reason: mpsuser.ReasonRequest}.Encode())
		return
	}
	if over {
		_, _ = conn.Write(mpsuser.Reply{Reason: mpsuser.ReasonLimit, Limit: uint32(s.n.opts.MaxConnections)}.Encode())
		return
	}
	h, reply := s.n.decide(s.gpus, uid, s.logger)
	if h == nil {
		s.logger.Info("Refused an MPS client of another user", "claimUID", s.uid, "gpu", reply.GPU, "servedUID", reply.ServedUID, "askerUID", uid)
		_, _ = conn.Write(reply.Encode())
		return
	}
	defer s.n.drop(h)
	if _, err := conn.Write(reply.Encode()); err != nil {
		return
	}
	// The hold lasts until the process's descriptor is closed; whatever
	// it sends meanwhile is read and dropped.
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return
	}
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}

// peerUID is the connecting process's uid as the kernel recorded it.
func peerUID(conn *net.UnixConn) (uint32, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}

// close stops accepting, ends the connections (and so their holds) and
// removes the socket file.
func (s *claimServer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	_ = s.ln.Close()
	s.wg.Wait()
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logger.V(2).Info("Removing the MPS user socket failed", "path", s.path, "err", err)
	}
}
