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
 * fake_cuda.c - fake CUDA driver: initialisation, error strings, devices and
 * contexts. Modules, streams, launches and graphs are in fake_cuda_stream.c,
 * memory in fake_cuda_mem.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_cuda.h"

#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

fake_process g_fake = {.mu = PTHREAD_MUTEX_INITIALIZER, .mps_fd = -1};

static __thread fake_ctx *tls_ctx;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
pthread_key_t ptds_key;

/* ------------------------------------------------------------------------ */
/* Initialisation                                                           */
/* ------------------------------------------------------------------------ */

static void on_fork_child(void)
{
    g_fake.forked = 1;
}

static void free_thread_streams(void *p)
{
    fake_stream **streams = p;
    for (int d = 0; d < FAKE_MAX_GPUS; d++)
        free(streams[d]);
    free(streams);
}

/*
 * The share an MPS client reads from CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, in
 * per mille: a number in (0, 100] (NVIDIA's server logs it with a
 * fraction); unset or anything else: the whole GPU (the fake client does
 * not ask the daemon for its default).
 */
static uint32_t mps_share_from_env(void)
{
    const char *v = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    char *end;
    double pct;

    if (v == NULL || v[0] == '\0')
        return 1000;
    errno = 0;
    pct = strtod(v, &end);
    if (errno != 0 || *end != '\0' || !isfinite(pct) || pct <= 0 || pct > 100)
        return 1000;
    return pct * 10 < 1 ? 1 : (uint32_t)(pct * 10 + 0.5);
}

/* The line a client sends first (mpsdaemontest.ClientHello). */
#define FAKE_MPS_CLIENT_HELLO "fake_cuda_client\n"

/*
 * Device 0's memory limit in MiB from NVIDIA_GPU_MEMORY_LIMITS, which an
 * r615+ driver reads in cuInit: the last "0=<MiB>" entry of the
 * comma-separated "<index>=<MiB>" list; 0 when there is none or the value
 * is not such a list. Recorded for tests; the fake does not enforce it.
 */
static uint32_t mps_driver_mem_from_env(void)
{
    const char *v = getenv("NVIDIA_GPU_MEMORY_LIMITS");
    uint32_t mib = 0;

    while (v != NULL && *v != '\0') {
        char *end;
        unsigned long k, n;

        if (*v < '0' || *v > '9')
            return 0;
        errno = 0;
        k = strtoul(v, &end, 10);
        if (errno != 0 || *end != '=' || end[1] < '0' || end[1] > '9')
            return 0;
        n = strtoul(end + 1, &end, 10);
        if (errno != 0 || n > UINT32_MAX || (*end != ',' && *end != '\0'))
            return 0;
        if (k == 0)
            mib = (uint32_t)n;
        v = *end == ',' ? end + 1 : end;
    }
    return mib;
}

/*
 * An MPS client (CUDA_MPS_PIPE_DIRECTORY set), as NVIDIA's driver: cuInit
 * connects to the control daemon's unix stream socket <dir>/control and
 * fails with CUDA_ERROR_MPS_CONNECTION_FAILED when nothing answers there.
 * It says it is a client (the fake daemon's ClientHello line, package
 * mpsdaemontest), so that the fake daemon serves it by its uid as NVIDIA's
 * does; it does not wait for the daemon's answer. The connection stays open
 * for the process's life (a daemon counts its clients by it). Returns 0,
 * or -1.
 */
static int mps_connect(const char *pipe_dir, struct stat *sock)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd;

    if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control", pipe_dir) >=
            (int)sizeof(addr.sun_path) ||
        stat(addr.sun_path, sock) != 0 || !S_ISSOCK(sock->st_mode))
        return -1;
    /* NVIDIA's control socket is a SOCK_SEQPACKET one (a stream connect is refused). */
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        send(fd, FAKE_MPS_CLIENT_HELLO, strlen(FAKE_MPS_CLIENT_HELLO), MSG_NOSIGNAL) < 0) {
        close(fd);
        return -1;
    }
    g_fake.mps_fd = fd;
    return 0;
}

static void init_process(void)
{
    const char *err = NULL;
    const char *pipe_dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    struct stat mps_sock;
    char msg[256];
    g_fake.cfg = fake_config_view(FAKE_VIEW_CUDA, &err);
    if (err != NULL) {
        fprintf(stderr, "fake libcuda: %s\n", err);
        g_fake.init_result = CUDA_ERROR_INVALID_VALUE;
        return;
    }
    if (pipe_dir != NULL && pipe_dir[0] != '\0') {
        if (mps_connect(pipe_dir, &mps_sock) != 0) {
            g_fake.init_result = CUDA_ERROR_MPS_CONNECTION_FAILED;
            return;
        }
        g_fake.mps_share_pm = mps_share_from_env();
        g_fake.mps_driver_mem_mib = mps_driver_mem_from_env();
    }
    if (g_fake.cfg->gpu_count == 0) {
        g_fake.init_result = CUDA_ERROR_NO_DEVICE;
        return;
    }
    if (fake_state_open(&g_fake.state, g_fake.cfg->state_dir, 1, msg, sizeof(msg)) != 0) {
        fprintf(stderr, "fake libcuda: %s\n", msg);
        g_fake.init_result = CUDA_ERROR_OPERATING_SYSTEM;
        return;
    }
    if (g_fake.mps_fd >= 0)
        fake_state_set_mps(&g_fake.state, (uint64_t)mps_sock.st_dev, (uint64_t)mps_sock.st_ino,
                           g_fake.mps_share_pm, g_fake.mps_driver_mem_mib);
    if (pthread_key_create(&ptds_key, free_thread_streams) != 0 ||
        pthread_atfork(NULL, NULL, on_fork_child) != 0) {
        g_fake.init_result = CUDA_ERROR_OPERATING_SYSTEM;
        return;
    }
    /* A device that is a MIG instance: its memory and kernels are the instance's. */
    for (int d = 0; d < g_fake.cfg->gpu_count; d++)
        fake_state_bind_mig(&g_fake.state, g_fake.cfg->gpus[d].phys, g_fake.cfg->gpus[d].mig_gi,
                            g_fake.cfg->gpus[d].mig_ci);
    pthread_mutex_lock(&g_fake.mu);
    for (int d = 0; d < g_fake.cfg->gpu_count; d++) {
        g_fake.primary[d] = (fake_ctx){.magic = FAKE_MAGIC_CTX, .dev = d, .primary = 1};
        g_fake.legacy[d].magic = FAKE_MAGIC_STREAM;
        g_fake.legacy[d].dev = d;
    }
    fake_mem_init();
    pthread_mutex_unlock(&g_fake.mu);
    g_fake.initialized = 1;
    g_fake.init_result = CUDA_SUCCESS;
}

CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (g_fake.forked)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_once(&init_once, init_process);
    return g_fake.init_result;
}

CUresult fake_ready(void)
{
    if (!g_fake.initialized || g_fake.forked)
        return CUDA_ERROR_NOT_INITIALIZED;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    if (driverVersion == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = fake_config_get(NULL)->cuda_version;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Error strings                                                            */
/* ------------------------------------------------------------------------ */

static const struct {
    CUresult code;
    const char *name;
    const char *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_MPS_CONNECTION_FAILED, "CUDA_ERROR_MPS_CONNECTION_FAILED",
     "MPS client failed to connect to the MPS control daemon or the MPS server"},
    {CUDA_ERROR_MPS_RPC_FAILURE, "CUDA_ERROR_MPS_RPC_FAILURE",
     "the remote procedural call between the MPS server and the MPS client failed"},
    {CUDA_ERROR_MPS_SERVER_NOT_READY, "CUDA_ERROR_MPS_SERVER_NOT_READY",
     "MPS server is not ready to accept new MPS client requests"},
    {CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
     "the hardware resources required to create MPS client have been exhausted"},
    {CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
     "the hardware resources required to support device connections have been exhausted"},
    {CUDA_ERROR_MPS_CLIENT_TERMINATED, "CUDA_ERROR_MPS_CLIENT_TERMINATED",
     "the MPS client has been terminated by the server"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult error)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].code == error)
            return (int)i;
    return -1;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int i = error_index(error);
    *pStr = i < 0 ? NULL : errors[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int i = error_index(error);
    *pStr = i < 0 ? NULL : errors[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

int fake_valid_device(int dev)
{
    return dev >= 0 && dev < g_fake.cfg->gpu_count;
}

#define REQUIRE_DEVICE(d)                       \
    do {                                        \
        REQUIRE_READY();                        \
        if (!fake_valid_device(d))              \
            return CUDA_ERROR_INVALID_DEVICE;   \
    } while (0)

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    REQUIRE_READY();
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fake_valid_device(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    REQUIRE_READY();
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = g_fake.cfg->gpu_count;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* A MIG instance is named as the real driver names it: "<GPU> MIG <profile>". */
    if (g_fake.cfg->gpus[dev].mig_gi != 0)
        snprintf(name, (size_t)len, "%s MIG %s", g_fake.cfg->gpu_product,
                 g_fake.cfg->gpus[dev].mig_profile);
    else
        snprintf(name, (size_t)len, "%s", g_fake.cfg->gpu_product);
    return CUDA_SUCCESS;
}

static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (uuid == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, g_fake.cfg->gpus[dev].uuid_bytes, sizeof(uuid->bytes));
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return device_uuid(uuid, dev);
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return device_uuid(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)g_fake.cfg->gpus[dev].memory;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t m = g_fake.cfg->gpus[dev].memory;
    *bytes = m > 0xffffffffULL ? 0xffffffffU : (unsigned int)m;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (pi == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const fake_config *c = g_fake.cfg;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = c->gpus[dev].multiprocessors; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = (int)c->gpus[dev].pci_bus; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = c->cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = c->cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (pciBusId == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "%s", g_fake.cfg->gpus[dev].pci_bus_id_legacy);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Contexts                                                                 */
/* ------------------------------------------------------------------------ */

int fake_charge(int dev, uint64_t bytes)
{
    if (bytes == 0)
        return 0;
    return fake_state_reserve(&g_fake.state, g_fake.cfg->gpus[dev].phys, bytes,
                              g_fake.cfg->gpus[dev].memory);
}

void fake_uncharge(int dev, uint64_t bytes)
{
    if (bytes != 0)
        fake_state_release(&g_fake.state, g_fake.cfg->gpus[dev].phys, bytes);
}

static int valid_ctx(const fake_ctx *c)
{
    return c != NULL && c->magic == FAKE_MAGIC_CTX && (!c->primary || c->refs > 0);
}

CUresult fake_current_device(int *dev)
{
    fake_ctx *c = tls_ctx;
    if (!valid_ctx(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = c->dev;
    return CUDA_SUCCESS;
}

/* Accounts for a new context on dev (mu held). */
static CUresult context_open(int dev)
{
    if (fake_charge(dev, g_fake.cfg->context_memory) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_state_contexts(&g_fake.state, g_fake.cfg->gpus[dev].phys, 1);
    return CUDA_SUCCESS;
}

static void context_close(fake_ctx *c)
{
    int dev = c->dev;

    fake_uncharge(dev, c->limit_bytes);
    c->limit_bytes = 0;
    memset(c->limits, 0, sizeof(c->limits));
    fake_uncharge(dev, g_fake.cfg->context_memory);
    fake_state_contexts(&g_fake.state, g_fake.cfg->gpus[dev].phys, -1);
    fake_events_close(c);
}

fake_ctx *fake_current_ctx(void)
{
    return tls_ctx;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    REQUIRE_DEVICE(dev);
    if (flags == NULL || active == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    *flags = 0;
    *active = g_fake.primary[dev].refs > 0;
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_fake.mu);
    fake_ctx *c = &g_fake.primary[dev];
    if (c->refs == 0)
        r = context_open(dev);
    if (r == CUDA_SUCCESS) {
        c->refs++;
        *pctx = (CUcontext)c;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

static CUresult primary_release(CUdevice dev, int reset)
{
    REQUIRE_DEVICE(dev);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_fake.mu);
    fake_ctx *c = &g_fake.primary[dev];
    if (reset) {
        /* Reset destroys every allocation and the context itself. */
        fake_mem_reset_device(dev);
        if (c->refs > 0)
            context_close(c);
        c->refs = 0;
    } else if (c->refs == 0) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--c->refs == 0) {
        context_close(c);
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(dev, 0);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(dev, 0);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return primary_release(dev, 1);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return primary_release(dev, 1);
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    fake_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_fake.mu);
    CUresult r = context_open(dev);
    pthread_mutex_unlock(&g_fake.mu);
    if (r != CUDA_SUCCESS) {
        free(c);
        return r;
    }
    c->magic = FAKE_MAGIC_CTX;
    c->dev = dev;
    tls_ctx = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    return ctx_create(pctx, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    (void)flags;
    if (numParams < 0 || (numParams > 0 && paramsArray == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    (void)ctxCreateParams;
    (void)flags;
    return ctx_create(pctx, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    REQUIRE_READY();
    fake_ctx *c = (fake_ctx *)ctx;
    if (c == NULL || c->magic != FAKE_MAGIC_CTX || c->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_fake.mu);
    context_close(c);
    pthread_mutex_unlock(&g_fake.mu);
    if (tls_ctx == c)
        tls_ctx = NULL;
    c->magic = 0;
    free(c);
    return CUDA_SUCCESS;
}

/*
 * Green contexts (CUDA 12.4+). A device's SM resource is all its SMs; a
 * split gives groups of minCount SMs rounded up to the split granularity
 * (2), at most as many as fit, and the rest as the remainder; a
 * descriptor names one SM resource; a green context is a context of its
 * own (it takes context memory as cuCtxCreate does, and is not made
 * current) on those SMs, reached as a CUcontext with cuCtxFromGreenCtx.
 * The fake's kernels still run on the whole GPU: it models the calls'
 * answers and their memory, not the partition.
 */
#define FAKE_MAGIC_GREEN 0x4e455247u /* "GREN" */
#define FAKE_SM_GRANULARITY 2u

/* Tags a resource as the fake's, of device dev (in its internal padding). */
static void resource_fill(CUdevResource *r, int dev, unsigned int sms)
{
    uint32_t tag[2] = {FAKE_MAGIC_GREEN, (uint32_t)dev};

    memset(r, 0, sizeof(*r));
    r->type = CU_DEV_RESOURCE_TYPE_SM;
    memcpy(r->_internal_padding, tag, sizeof(tag));
    r->sm.smCount = sms;
}

/* The device of a resource the fake filled, or -1. */
static int resource_dev(const CUdevResource *r)
{
    uint32_t tag[2];

    memcpy(tag, r->_internal_padding, sizeof(tag));
    if (r->type != CU_DEV_RESOURCE_TYPE_SM || tag[0] != FAKE_MAGIC_GREEN ||
        !fake_valid_device((int)tag[1]))
        return -1;
    return (int)tag[1];
}

typedef struct fake_green_desc {
    uint32_t magic;
    int dev;
    unsigned int sms;
} fake_green_desc;

typedef struct fake_green {
    uint32_t magic;
    unsigned int sms;
    fake_ctx *ctx;
} fake_green;

CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource, CUdevResourceType type)
{
    REQUIRE_DEVICE(device);
    if (resource == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    resource_fill(resource, device, (unsigned int)g_fake.cfg->gpus[device].multiprocessors);
    return CUDA_SUCCESS;
}

CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
                                     const CUdevResource *input, CUdevResource *remaining,
                                     unsigned int useFlags, unsigned int minCount)
{
    REQUIRE_READY();
    int dev = input != NULL ? resource_dev(input) : -1;
    unsigned int count, n;
    if (nbGroups == NULL || input == NULL || useFlags > 3)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    count = minCount < FAKE_SM_GRANULARITY ? FAKE_SM_GRANULARITY
                                           : (minCount + FAKE_SM_GRANULARITY - 1) /
                                                 FAKE_SM_GRANULARITY * FAKE_SM_GRANULARITY;
    n = input->sm.smCount / count;
    if (n == 0)
        return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    /* Without a result array the call only says how many groups a split makes. */
    if (result != NULL && *nbGroups < n)
        n = *nbGroups;
    for (unsigned int i = 0; result != NULL && i < n; i++)
        resource_fill(&result[i], dev, count);
    if (remaining != NULL)
        resource_fill(remaining, dev, input->sm.smCount - (result != NULL ? n : 0) * count);
    *nbGroups = n;
    return CUDA_SUCCESS;
}

CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
                                   unsigned int nbResources)
{
    REQUIRE_READY();
    unsigned int sms = 0;
    int dev = -1;
    if (phDesc == NULL || resources == NULL || nbResources == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < nbResources; i++) {
        int d = resource_dev(&resources[i]);
        if (d < 0 || (dev >= 0 && d != dev))
            return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
        dev = d;
        sms += resources[i].sm.smCount;
    }
    fake_green_desc *g = malloc(sizeof(*g));
    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *g = (fake_green_desc){.magic = FAKE_MAGIC_GREEN, .dev = dev, .sms = sms};
    *phDesc = (CUdevResourceDesc)g;
    return CUDA_SUCCESS;
}

CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
                          unsigned int flags)
{
    REQUIRE_DEVICE(dev);
    const fake_green_desc *d = (const fake_green_desc *)desc;
    if (phCtx == NULL || d == NULL || d->magic != FAKE_MAGIC_GREEN ||
        flags != CU_GREEN_CTX_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    if (d->dev != dev)
        return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    fake_green *g = calloc(1, sizeof(*g));
    fake_ctx *c = calloc(1, sizeof(*c));
    if (g == NULL || c == NULL) {
        free(g);
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&g_fake.mu);
    CUresult r = context_open(dev);
    pthread_mutex_unlock(&g_fake.mu);
    if (r != CUDA_SUCCESS) {
        free(g);
        free(c);
        return r;
    }
    c->magic = FAKE_MAGIC_CTX;
    c->dev = dev;
    *g = (fake_green){.magic = FAKE_MAGIC_GREEN, .sms = d->sms, .ctx = c};
    *phCtx = (CUgreenCtx)g;
    return CUDA_SUCCESS;
}

/* A live green context, or NULL. */
static fake_green *green_of(CUgreenCtx h)
{
    fake_green *g = (fake_green *)h;
    return g != NULL && g->magic == FAKE_MAGIC_GREEN ? g : NULL;
}

CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
    REQUIRE_READY();
    fake_green *g = green_of(hCtx);
    if (g == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_fake.mu);
    context_close(g->ctx);
    pthread_mutex_unlock(&g_fake.mu);
    if (tls_ctx == g->ctx)
        tls_ctx = NULL;
    g->ctx->magic = 0;
    free(g->ctx);
    g->magic = 0;
    free(g);
    return CUDA_SUCCESS;
}

CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
    REQUIRE_READY();
    fake_green *g = green_of(hCtx);
    if (pContext == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (g == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *pContext = (CUcontext)g->ctx;
    return CUDA_SUCCESS;
}

CUresult cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource *resource,
                                  CUdevResourceType type)
{
    REQUIRE_READY();
    fake_green *g = green_of(hCtx);
    if (resource == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (g == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (type != CU_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    resource_fill(resource, g->ctx->dev, g->sms);
    return CUDA_SUCCESS;
}

CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags,
                                int priority)
{
    REQUIRE_READY();
    fake_green *g = green_of(greenCtx);
    (void)priority; /* clamped to the device's range by the driver: any value is accepted */
    if (phStream == NULL || flags != CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    if (g == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    /* A stream of the green context: made with it current, then the caller's again. */
    fake_ctx *saved = tls_ctx;
    tls_ctx = g->ctx;
    CUresult r = cuStreamCreate(phStream, CU_STREAM_NON_BLOCKING);
    tls_ctx = saved;
    return r;
}

/* The legacy (CUDA < 4.0) name NVIDIA's driver still exports. */
CUresult cuCtxDestroy(CUcontext ctx)
{
    return cuCtxDestroy_v2(ctx);
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    REQUIRE_READY();
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)tls_ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    REQUIRE_READY();
    fake_ctx *c = (fake_ctx *)ctx;
    if (c != NULL && !valid_ctx(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    tls_ctx = c;
    return CUDA_SUCCESS;
}

/*
 * Context limits that take device memory, as a driver reserves them when set:
 * the stack for every thread the GPU can hold resident, the printf FIFO and
 * the malloc heap. Only what exceeds the defaults is charged (the defaults
 * are part of context_memory). A real driver may map the heap only at the
 * first launch that needs it; this one charges at once.
 */
#define FAKE_RESIDENT_THREADS 65536ULL
static const size_t limit_default[FAKE_MEMORY_LIMITS] = {1024, 1 << 20, 8 << 20};

static uint64_t limits_bytes(const size_t *limits)
{
    uint64_t sum = 0;
    for (int i = 0; i < FAKE_MEMORY_LIMITS; i++) {
        size_t v = limits[i] != 0 ? limits[i] : limit_default[i];
        uint64_t extra = v > limit_default[i] ? v - limit_default[i] : 0;
        if (i == CU_LIMIT_STACK_SIZE)
            extra = extra > UINT64_MAX / FAKE_RESIDENT_THREADS ? UINT64_MAX
                                                               : extra * FAKE_RESIDENT_THREADS;
        sum = extra > UINT64_MAX - sum ? UINT64_MAX : sum + extra;
    }
    return sum;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    REQUIRE_READY();
    fake_ctx *c = tls_ctx;
    if (!valid_ctx(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((unsigned)limit > 9)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if ((unsigned)limit >= FAKE_MEMORY_LIMITS)
        return CUDA_SUCCESS; /* not modelled: takes no memory here */
    size_t limits[FAKE_MEMORY_LIMITS];
    memcpy(limits, c->limits, sizeof(limits));
    limits[limit] = value;
    uint64_t bytes = limits_bytes(limits);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_fake.mu);
    if (bytes > c->limit_bytes && fake_charge(c->dev, bytes - c->limit_bytes) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        if (bytes < c->limit_bytes)
            fake_uncharge(c->dev, c->limit_bytes - bytes);
        c->limit_bytes = bytes;
        memcpy(c->limits, limits, sizeof(limits));
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    REQUIRE_READY();
    fake_ctx *c = tls_ctx;
    if (pvalue == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ctx(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((unsigned)limit > 9)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    *pvalue = (unsigned)limit < FAKE_MEMORY_LIMITS
                  ? (c->limits[limit] != 0 ? c->limits[limit] : limit_default[limit])
                  : 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    REQUIRE_READY();
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_current_device(device);
}


CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (ppExportTable == NULL || pExportTableId == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    /* The fake has no private runtime tables. */
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
