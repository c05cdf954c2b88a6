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

/* process.c - see process.h. */
#include "process.h"

#include <pthread.h>
#include <stdlib.h>

#include "acct.h"
#include "gpus.h"
#include "limiter.h"

/* Once per process by nature, like the handlers it registers. */
static pthread_once_t process_once = PTHREAD_ONCE_INIT;

/* Normal exit: hand our bytes and leases back at once instead of waiting for a reclaim. */
static void at_exit(void)
{
    vgpu_lock();
    vgpu_limiter_exit();
    vgpu_gpus_release_slots();
    vgpu_unlock();
}

static void fork_prepare(void)
{
    vgpu_lock();
}

static void fork_parent(void)
{
    vgpu_unlock();
}

/* The child is a new process: the parent's slots, allocations and identity are not its own. */
static void fork_child(void)
{
    vgpu_gpus_forked();
    vgpu_acct_forget_all();
    vgpu_limiter_forked();
    vgpu_unlock();
}

static void start(void)
{
    vgpu_gpus_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atexit(at_exit);
}

void vgpu_process_init(void)
{
    pthread_once(&process_once, start);
}
