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

package mpsuser

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// SocketName is the socket's name in the claim's host/ directory.
	SocketName = "mps.sock"
	// MaxMessageBytes bounds a request and a reply, newline included.
	MaxMessageBytes = 128
	// ClientWait is how long the library waits for its reply, connect
	// and retries of a socket not there yet included.
	ClientWait = 5 * time.Second
	// Request is the one request.
	Request = "use\n"
)

// Words of the replies.
const (
	Allowed = "allowed"
	Refused = "refused"
	// ReasonUser: the GPU's MPS server serves another uid while it has clients.
	ReasonUser = "user"
	// ReasonRequest: the request was not Request.
	ReasonRequest = "request"
	// ReasonLimit: the claim's processes hold as many connections as it may.
	ReasonLimit = "limit"
)

// Reply is one reply.
type Reply struct {
	// Allowed is true for "allowed"; else Reason says why not.
	Allowed bool
	Reason  string
	// GPU and ServedUID are the GPU refused and the uid its MPS serves
	// (ReasonUser).
	GPU       string
	ServedUID uint32
	// AskerUID is the asker's uid as the plugin read it (allowed and
	// ReasonUser).
	AskerUID uint32
	// Limit is the claim's bound of connections (ReasonLimit).
	Limit uint32
}

// ErrMalformed marks a message that breaks the protocol.
var ErrMalformed = errors.New("malformed MPS user message")

// Encode returns r as a message; it panics on a Reply that cannot be sent
// (an unknown reason or a GPU name the protocol does not allow).
func (r Reply) Encode() []byte {
	var s string
	switch {
	case r.Allowed:
		s = Allowed + " " + num(r.AskerUID)
	case r.Reason == ReasonUser && ValidGPU(r.GPU):
		s = Refused + " " + ReasonUser + " " + r.GPU + " " + num(r.ServedUID) + " " + num(r.AskerUID)
	case r.Reason == ReasonRequest:
		s = Refused + " " + ReasonRequest
	case r.Reason == ReasonLimit:
		s = Refused + " " + ReasonLimit + " " + num(r.Limit)
	default:
		panic(fmt.Sprintf("mpsuser: cannot encode %+v", r))
	}
	return []byte(s + "\n")
}

func num(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// Message is what the library prints for r (the same words as
// vgpu_mps_user_reply_message).
func (r Reply) Message() string {
	switch {
	case r.Allowed:
		return fmt.Sprintf("MPS allowed for uid %d", r.AskerUID)
	case r.Reason == ReasonUser:
		return fmt.Sprintf("MPS on %s serves uid %d until its clients end; this process runs as uid %d", r.GPU, r.ServedUID, r.AskerUID)
	case r.Reason == ReasonLimit:
		return fmt.Sprintf("the claim's processes already hold %d MPS connections, its bound", r.Limit)
	default:
		return "the kubelet plugin found the request malformed"
	}
}

// ParseRequest checks that msg is Request.
func ParseRequest(msg []byte) error {
	if string(msg) != Request {
		return fmt.Errorf("%w: request %q is not %q", ErrMalformed, truncate(msg), Request)
	}
	return nil
}

// ParseReply parses one reply; anything else is ErrMalformed.
func ParseReply(msg []byte) (Reply, error) {
	bad := func(why string) (Reply, error) {
		return Reply{}, fmt.Errorf("%w: reply %q: %s", ErrMalformed, truncate(msg), why)
	}
	if len(msg) == 0 || len(msg) > MaxMessageBytes || msg[len(msg)-1] != '\n' {
		return bad("not one line of at most 128 bytes")
	}
	f := strings.Split(string(msg[:len(msg)-1]), " ")
	var r Reply
	var err error
	switch {
	case len(f) == 2 && f[0] == Allowed:
		r.Allowed = true
		r.AskerUID, err = parseNum(f[1])
	case len(f) == 5 && f[0] == Refused && f[1] == ReasonUser:
		if !ValidGPU(f[2]) {
			return bad("GPU is not a GPU UUID")
		}
		r.Reason, r.GPU = ReasonUser, f[2]
		if r.ServedUID, err = parseNum(f[3]); err == nil {
			r.AskerUID, err = parseNum(f[4])
		}
	case len(f) == 2 && f[0] == Refused && f[1] == ReasonRequest:
		r.Reason = ReasonRequest
	case len(f) == 3 && f[0] == Refused && f[1] == ReasonLimit:
		r.Reason = ReasonLimit
		r.Limit, err = parseNum(f[2])
	default:
		return bad("unknown reply")
	}
	if err != nil {
		return bad(err.Error())
	}
	return r, nil
}

// parseNum parses a plain decimal uint32.
func parseNum(s string) (uint32, error) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is no plain decimal", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is no plain decimal", s)
		}
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return uint32(v), nil
}

// ValidGPU accepts what the protocol allows as a GPU: "GPU-" and then hex
// digits and dashes, 5 to 64 bytes in all.
func ValidGPU(s string) bool {
	if len(s) < 5 || len(s) > 64 || !strings.HasPrefix(s, "GPU-") {
		return false
	}
	for i := 4; i < len(s); i++ {
		c := s[i]
		if c != '-' && (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

func truncate(msg []byte) []byte {
	if len(msg) > 64 {
		return msg[:64]
	}
	return msg
}
