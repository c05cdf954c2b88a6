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

package burstsock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstfile"
)

const (
	// MaxMessageBytes bounds a request or a reply, newline included.
	MaxMessageBytes = 128

	requestGrow   = "grow"
	replyGranted  = "granted"
	replyRefused  = "refused"
	maxNameBytes  = 64
	maxReasonShow = 40
)

// Refusal reasons of the protocol.
const (
	// ReasonLimit: above the claim's memoryLimit.
	ReasonLimit = "limit"
	// ReasonFull: does not fit on the GPU.
	ReasonFull = "full"
	// ReasonReclaiming: the claim is being reclaimed from.
	ReasonReclaiming = "reclaiming"
	// ReasonNever: burst never, or no ceiling above the guarantee.
	ReasonNever = "never"
	// ReasonGPU: the claim has no share of that GPU.
	ReasonGPU = "gpu"
	// ReasonRequest: a malformed request.
	ReasonRequest = "request"
	// ReasonRate: the claim asked faster than its token bucket.
	ReasonRate = "rate"
)

// Request is one ask: the whole grant Bytes the client needs above its
// guarantee on GPU (its name in the claim's config: GPU-<uuid> or
// MIG-<uuid>).
type Request struct {
	GPU   string
	Bytes uint64
}

// ParseRequest reads "grow <GPU> <bytes>\n" strictly: exactly that, at
// most MaxMessageBytes, the GPU "GPU-" or "MIG-" followed by hex digits and
// dashes, the bytes decimal without sign or leading zeros and at most
// burstfile.MaxGrantBytes. Whether the claim has a share of the GPU is
// the grant book's to decide.
func ParseRequest(msg []byte) (Request, error) {
	if len(msg) > MaxMessageBytes || len(msg) == 0 || msg[len(msg)-1] != '\n' {
		return Request{}, errors.New("burst request: empty, longer than 128 bytes or not ending in a newline")
	}
	fields := strings.Split(string(msg[:len(msg)-1]), " ")
	if len(fields) != 3 || fields[0] != requestGrow {
		return Request{}, errors.New(`burst request: want "grow <GPU> <bytes>"`)
	}
	if !validName(fields[1]) {
		return Request{}, fmt.Errorf("burst request: GPU %.64q is not a GPU name", fields[1])
	}
	v, err := decimal(fields[2])
	if err != nil || v > burstfile.MaxGrantBytes {
		return Request{}, fmt.Errorf("burst request: bytes %.32q is not a decimal number up to %d", fields[2], burstfile.MaxGrantBytes)
	}
	return Request{GPU: fields[1], Bytes: v}, nil
}

// validName accepts "GPU-" or "MIG-" and hex digits and dashes.
func validName(s string) bool {
	if len(s) < 5 || len(s) > maxNameBytes || (!strings.HasPrefix(s, "GPU-") && !strings.HasPrefix(s, "MIG-")) {
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

// plainDecimal reports whether s is digits without sign or leading zero.
func plainDecimal(s string) bool {
	return s != "" && strings.TrimLeft(s, "0123456789") == "" && (len(s) == 1 || s[0] != '0')
}

// decimal parses a plain decimal that fits 64 bits.
func decimal(s string) (uint64, error) {
	if !plainDecimal(s) || len(s) > 20 {
		return 0, fmt.Errorf("%.32q is not a decimal number", s)
	}
	return strconv.ParseUint(s, 10, 64)
}

// Granted is the reply to an ask that the claim's grant on the GPU, now
// grant bytes, covers.
func Granted(grant uint64) []byte {
	return []byte(replyGranted + " " + strconv.FormatUint(grant, 10) + "\n")
}

// Refused is the reply to an ask refused for reason, the claim's grant on
// the GPU being grant bytes.
func Refused(reason string, grant uint64) []byte {
	return []byte(replyRefused + " " + reason + " " + strconv.FormatUint(grant, 10) + "\n")
}

// Reply is what the library makes of a reply: granted, or refused with
// the server's reason. The number in a reply is never used: only host/burst
// raises a limit.
type Reply struct {
	Granted bool
	// Reason is the refusal's reason, cut to the 40 bytes the library logs.
	Reason string
}

// ParseReply reads a reply as the library does: "granted <n>\n" or
// "refused <reason> <n>\n", n digits without sign or leading zero (of any
// length), at most MaxMessageBytes, no NUL byte; anything else is
// malformed (an error), which the library counts as a refusal too.
func ParseReply(msg []byte) (Reply, error) {
	if len(msg) == 0 || len(msg) > MaxMessageBytes || msg[len(msg)-1] != '\n' || strings.IndexByte(string(msg), 0) >= 0 {
		return Reply{}, errors.New("burst reply: malformed")
	}
	text := string(msg[:len(msg)-1])
	if n, ok := strings.CutPrefix(text, replyGranted+" "); ok && plainDecimal(n) {
		return Reply{Granted: true}, nil
	}
	if rest, ok := strings.CutPrefix(text, replyRefused+" "); ok {
		reason, n, ok := strings.Cut(rest, " ")
		if ok && plainDecimal(n) {
			return Reply{Reason: reason[:min(len(reason), maxReasonShow)]}, nil
		}
	}
	return Reply{}, errors.New("burst reply: malformed")
}
