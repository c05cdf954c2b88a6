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

// Package mpsuser is the Go side of the MPS user protocol over an MPS
// claim's host/mps.sock, defined by vgpu-core/include/vgpu_mps_user.h
// (docs/mps.md, "Containers of different users").
//
// Before multi-user MPS, one MPS server serves one user id at a time and a
// client of another uid waits until the running server's clients are done.
// So a process of an MPS claim asks the kubelet plugin on the claim's
// socket before CUDA initialises, and the plugin answers from the asker's
// uid (SO_PEERCRED): allowed, or refused naming the GPU and the uid it
// serves. An allowed process keeps its connection open for its life: the
// connection is its hold on the GPU's user.
//
// Transport: AF_UNIX SOCK_SEQPACKET. The client sends exactly one message
// and reads exactly one reply; every message is at most MaxMessageBytes,
// ends with a newline, has fields separated by one space, and numbers in
// plain decimal (no sign, no leading zeros, at most 4294967295):
//
//	request: "use\n"
//	replies: "allowed <asker uid>\n"
//	         "refused user <GPU UUID> <served uid> <asker uid>\n"
//	         "refused request\n"           (the request was malformed)
//	         "refused limit <holds>\n"     (the claim holds as many connections as it may)
package mpsuser
