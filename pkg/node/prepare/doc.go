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

// Package prepare prepares and unprepares the ResourceClaims of the vGPU
// driver on one node.
//
// For every claim it writes the per-claim directory (the read-only limits
// file "config", the shared region "shm/region" on a tmpfs of one region's
// size mounted on "shm" so that no container can fill the node's disk
// through it, and "host/", the directory of files only the plugin writes,
// such as "host/pids", which pkg/node/hostpids fills) and one transient CDI
// spec, and records each claim in a checkpoint so that a restarted or
// rebooted plugin can finish, undo or recreate its work:
//
//	checkpoint PrepareStarted -> config -> shm mount -> region -> CDI spec -> checkpoint PrepareCompleted
//	CDI spec removed -> shm unmounted -> claim directory removed -> checkpoint entry deleted
//
// Every call holds an flock on the state root and re-reads the checkpoint,
// so two plugin instances (a rolling update) can share one node.
//
// Manager implements the prepare and unprepare halves of the kubeletplugin
// DRAPlugin interface. One claim's prepare pipeline is in prepare.go (after
// plan.go turns the allocation into limits), unprepare in unprepare.go,
// recovery at startup in recovery.go, the on-disk layout in files.go and
// the region file system in regionfs.go. A limit realised by a sharing
// mode beyond the software slice (MIG, migmode.go) goes through the
// sharingMode interface in mode.go; a plain slice calls no mode.
// docs/prepare.md describes the files, the checkpoint format and the
// recovery rules.
package prepare
