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

/*
 * process.h - the library's life in a process: start, fork and exit.
 *
 * Nothing runs at load time. The first CUDA or NVML call that reaches a
 * wrapper starts the library (vgpu_process_init): the limits are read
 * (gpus.h) and the fork and exit handlers registered. This unit sits above
 * every unit whose state those handlers reset or hand back.
 */
#ifndef VGPU_PROCESS_H
#define VGPU_PROCESS_H

/*
 * Starts the library in this process once: reads configs and env, registers
 * the fork handlers (a child forgets its parent's slots, allocations and
 * limiter thread) and the exit handler (bytes and refiller leases handed back
 * at once). Safe and cheap to call from every wrapper.
 */
void vgpu_process_init(void);

#endif /* VGPU_PROCESS_H */
