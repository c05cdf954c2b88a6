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
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstsock"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/burstgrant"
)

// The burst protocol (docs/architecture.md, "Burstable memory"): one
// SOCK_SEQPACKET message each way per connection.
const (
	// DefaultReadTimeout is how long the server waits for the request.
	DefaultReadTimeout = time.Second
	// DefaultMaxConnections bounds the connections served at once per claim;
	// more wait in the listen backlog.
	DefaultMaxConnections = 4
	// socketMode lets any user of the claim's containers connect.
	socketMode = 0o666
	// DefaultAskRate and DefaultAskBurst are each claim's token bucket of
	// asks: the library asks once per allocation that crosses its grant,
	// far below this; a container asking faster is refused (rate) without
	// the book being touched, so it slows only itself.
	DefaultAskRate  = 50 // asks per second
	DefaultAskBurst = 50
)

// reasonError is a Book.Grant error without a reason of the protocol
// (burstsock.Reason*, also the label values of
// vgpu_dra_claim_memory_burst_refusals_total).
const reasonError = "error"

// granter is what a claim's server needs: the claim's grant on a GPU.
type granter interface {
	// grant asks for need bytes above the guarantee; room reports how
	// much the claim may burst on the GPU (ok false: no share).
	grant(uid types.UID, uuid string, need uint64) (uint64, error)
	room(uid types.UID, uuid string) (room uint64, ok bool)
	refused(reason string)
}

// server answers one claim's asks on its socket.
type server struct {
	uid      types.UID
	path     string
	ln       *net.UnixListener
	g        granter
	logger   klog.Logger
	timeout  time.Duration
	asks     *rate.Limiter
	slots    chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[*net.UnixConn]bool
	closed   bool
	done     chan struct{}
	acceptWG sync.WaitGroup
}

// listen removes a stale socket file at path and listens there.
func listen(path string) (*net.UnixListener, error) {
	if info, err := os.Lstat(path); err == nil {
		if info.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is no socket (mode %s)", path, info.Mode())
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale burst socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("listen on the burst socket: %w", err)
	}
	// close removes the file itself, so that closing never unlinks a
	// socket that replaced this one.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, socketMode); err != nil {
		_ = ln.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("set mode of the burst socket: %w", err)
	}
	return ln, nil
}

func newServer(uid types.UID, path string, g granter, logger klog.Logger, timeout time.Duration, maxConns int, asks *rate.Limiter) (*server, error) {
	ln, err := listen(path)
	if err != nil {
		return nil, err
	}
	s := &server{uid: uid, path: path, ln: ln, g: g, logger: logger, timeout: timeout, asks: asks,
		slots: make(chan struct{}, maxConns), done: make(chan struct{}), conns: map[*net.UnixConn]bool{}}
	s.acceptWG.Add(1)
	go s.accept()
	return s, nil
}

func (s *server) accept() {
	defer s.acceptWG.Done()
	for {
		// At most maxConns at once: further clients wait in the listen
		// backlog until a connection ends (each within the read timeout).
		select {
		case s.slots <- struct{}{}:
		case <-s.done:
			return
		}
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			<-s.slots
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: back off rather than spin.
			s.logger.V(2).Info("Accepting on the burst socket failed", "claimUID", s.uid, "err", err)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-s.done:
				return
			}
			continue
		}
		if !s.track(conn) {
			<-s.slots
			_ = conn.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			defer s.untrack(conn)
			s.serve(conn)
		}()
	}
}

func (s *server) track(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = true
	return true
}

func (s *server) untrack(c *net.UnixConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	_ = c.Close()
}

// serve reads one request and answers it.
func (s *server) serve(conn *net.UnixConn) {
	if err := conn.SetDeadline(time.Now().Add(s.timeout)); err != nil {
		return
	}
	buf := make([]byte, burstsock.MaxMessageBytes+1)
	n, err := conn.Read(buf)
	if err != nil {
		s.g.refused(burstsock.ReasonRequest)
		return
	}
	answer := burstsock.Refused(burstsock.ReasonRate, 0)
	if s.asks.Allow() {
		answer = s.answer(buf[:n])
	} else {
		s.g.refused(burstsock.ReasonRate)
	}
	_, _ = conn.Write(answer)
}

// answer is the reply to one request message.
func (s *server) answer(msg []byte) []byte {
	req, err := burstsock.ParseRequest(msg)
	if err != nil {
		s.g.refused(burstsock.ReasonRequest)
		return burstsock.Refused(burstsock.ReasonRequest, 0)
	}
	room, ok := s.g.room(s.uid, req.GPU)
	if !ok {
		s.g.refused(burstsock.ReasonGPU)
		return burstsock.Refused(burstsock.ReasonGPU, 0)
	}
	if room == 0 {
		s.g.refused(burstsock.ReasonNever)
		return burstsock.Refused(burstsock.ReasonNever, 0)
	}
	grant, err := s.g.grant(s.uid, req.GPU, req.Bytes)
	if err == nil {
		return burstsock.Granted(grant)
	}
	reason := reasonOf(err)
	if reason == reasonError {
		// A failed write of host/burst: answered as full, the library
		// may try again later.
		reason = burstsock.ReasonFull
	}
	s.g.refused(reason)
	s.logger.V(4).Info("Burst refused", "claimUID", s.uid, "gpu", req.GPU, "need", req.Bytes, "grant", grant, "reason", reason, "err", err)
	return burstsock.Refused(reason, grant)
}

// reasonOf maps a Book.Grant error to the protocol's reason.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, burstgrant.ErrOverLimit):
		return burstsock.ReasonLimit
	case errors.Is(err, burstgrant.ErrNoRoom):
		return burstsock.ReasonFull
	case errors.Is(err, burstgrant.ErrReclaiming):
		return burstsock.ReasonReclaiming
	case errors.Is(err, burstgrant.ErrNoShare), errors.Is(err, burstgrant.ErrUnknownGPU), errors.Is(err, burstgrant.ErrUnknownClaim):
		return burstsock.ReasonGPU
	default:
		return reasonError
	}
}

// close stops accepting, ends the connections being served, waits for
// their goroutines and removes the socket file.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	close(s.done)
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	_ = s.ln.Close()
	s.acceptWG.Wait()
	s.wg.Wait()
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logger.V(2).Info("Removing the burst socket failed", "path", s.path, "err", err)
	}
}
