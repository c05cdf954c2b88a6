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
 * fake_nvml.c - fake libnvidia-ml.so.1 describing the same simulated GPUs as
 * the fake libcuda.so.1 (shared configuration) and reporting their memory,
 * processes and utilisation from the shared state file.
 *
 * XID events are injected by appending lines "<GPU UUID or index> <xid>" to
 * <state_dir>/xid-events (a MIG UUID: the parent's event with the instance's ids); an event set delivers lines written after it was
 * created.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fake_config.h"
#include "fake_mig.h"
#include "fake_nvml_int.h"
#include "fake_state.h"
#include "vgpu_nvml.h"

#define NVML_MAGIC_EVENTS 0x4e564501u
#define NO_INSTANCE 0xffffffffu
/* PCI ids of an H100 SXM5 80GB; only reported, never interpreted. */
#define PCI_DEVICE_ID 0x233010deu
#define PCI_SUBSYSTEM_ID 0x16c110deu
#define XID_POLL_NS 10000000L
/* How often an event wait resolves new processes' host pids. */
#define RESOLVE_PIDS_NS 100000000ULL

struct nvmlEventSet_st {
    uint32_t magic;
    unsigned long long types[FAKE_MAX_GPUS];
    long offset; /* bytes of the XID file already consumed */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned int init_count;
static const fake_config *cfg;
static fake_state state = {.fd = -1, .slot = -1};
static struct nvmlDevice_st devices[FAKE_MAX_GPUS];

static nvmlReturn_t init(void)
{
    const char *err = NULL;
    char msg[256];
    nvmlReturn_t r = NVML_SUCCESS;
    pthread_mutex_lock(&mu);
    if (init_count == 0) {
        cfg = fake_config_view(FAKE_VIEW_NVML, &err);
        if (err != NULL) {
            fprintf(stderr, "fake NVML: %s\n", err);
            r = NVML_ERROR_UNKNOWN;
        } else if (fake_state_open(&state, cfg->state_dir, 0, msg, sizeof(msg)) != 0) {
            fprintf(stderr, "fake NVML: %s\n", msg);
            r = NVML_ERROR_UNKNOWN;
        } else {
            for (int i = 0; i < FAKE_MAX_GPUS; i++)
                devices[i] = (struct nvmlDevice_st){.magic = NVML_MAGIC_DEVICE, .index = i};
        }
    }
    if (r == NVML_SUCCESS)
        init_count++;
    pthread_mutex_unlock(&mu);
    return r;
}

nvmlReturn_t nvmlInit(void)
{
    return init();
}

nvmlReturn_t nvmlInit_v2(void)
{
    return init();
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return init();
}

nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t r = NVML_SUCCESS;
    pthread_mutex_lock(&mu);
    if (init_count == 0)
        r = NVML_ERROR_UNINITIALIZED;
    else if (--init_count == 0)
        fake_state_close(&state);
    pthread_mutex_unlock(&mu);
    return r;
}

static const struct {
    nvmlReturn_t code;
    const char *text;
} errors[] = {
    {NVML_SUCCESS, "Success"},
    {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {NVML_ERROR_NOT_FOUND, "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {NVML_ERROR_TIMEOUT, "Timeout"},
    {NVML_ERROR_IN_USE, "In use by another client"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "Insufficient resources"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
    {NVML_ERROR_UNKNOWN, "Unknown Error"},
};

const char *nvmlErrorString(nvmlReturn_t result)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].code == result)
            return errors[i].text;
    return "Unknown Error";
}

#define REQUIRE_INIT()                              \
    do {                                            \
        if (__atomic_load_n(&init_count, __ATOMIC_ACQUIRE) == 0) \
            return NVML_ERROR_UNINITIALIZED;        \
    } while (0)

/* Validates a handle; returns its index or -1. */
static int dev_index(nvmlDevice_t d)
{
    if (d == NULL || d < devices || d >= devices + FAKE_MAX_GPUS || d->magic != NVML_MAGIC_DEVICE ||
        d->index >= cfg->gpu_count)
        return -1;
    return d->index;
}

#define REQUIRE_DEVICE(d, i)                        \
    int i;                                          \
    do {                                            \
        REQUIRE_INIT();                             \
        if ((i = dev_index(d)) < 0)                 \
            return NVML_ERROR_INVALID_ARGUMENT;     \
    } while (0)

/* A GPU or a MIG device handle: i the GPU (parent) index, mig the MIG tag (0 for a GPU). */
#define REQUIRE_DEVICE_OR_MIG(d, i, mig)                                    \
    int i;                                                                  \
    uint32_t mig = 0;                                                       \
    do {                                                                    \
        REQUIRE_INIT();                                                     \
        if ((i = dev_index(d)) < 0 && (i = fake_nvml_mig_index(d, &mig)) < 0) \
            return NVML_ERROR_INVALID_ARGUMENT;                             \
    } while (0)

const fake_config *fake_nvml_config(void)
{
    return cfg;
}

fake_state *fake_nvml_state(void)
{
    return &state;
}

nvmlDevice_t fake_nvml_device(int i)
{
    return &devices[i];
}

int fake_nvml_initialized(void)
{
    return __atomic_load_n(&init_count, __ATOMIC_ACQUIRE) != 0;
}

int fake_nvml_gpu_index(nvmlDevice_t d)
{
    return dev_index(d);
}

static nvmlReturn_t put_string(char *dst, unsigned int length, const char *src)
{
    if (dst == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(src);
    if (length <= n)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, n + 1);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* System                                                                   */
/* ------------------------------------------------------------------------ */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    REQUIRE_INIT();
    return put_string(version, length, cfg->driver_version);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    char buf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    REQUIRE_INIT();
    /* NVML reports "<CUDA major>.<driver version>". */
    snprintf(buf, sizeof(buf), "%d.%s", cfg->cuda_version / 1000, cfg->driver_version);
    return put_string(version, length, buf);
}

static nvmlReturn_t cuda_driver_version(int *v)
{
    REQUIRE_INIT();
    if (v == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = cfg->cuda_version;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return cuda_driver_version(cudaDriverVersion);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return cuda_driver_version(cudaDriverVersion);
}

/* ------------------------------------------------------------------------ */
/* Enumeration                                                              */
/* ------------------------------------------------------------------------ */

static nvmlReturn_t device_count(unsigned int *count)
{
    REQUIRE_INIT();
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)cfg->gpu_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return device_count(deviceCount);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    return device_count(deviceCount);
}

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device)
{
    REQUIRE_INIT();
    if (device == NULL || index >= (unsigned int)cfg->gpu_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return handle_by_index(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    return handle_by_index(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    REQUIRE_INIT();
    if (uuid == NULL || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < cfg->gpu_count; i++) {
        if (strcasecmp(uuid, cfg->gpus[i].uuid) == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return fake_nvml_mig_by_uuid(uuid, device);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    unsigned int domain, bus, dev, fn;
    int used = 0;
    REQUIRE_INIT();
    if (pciBusId == NULL || device == NULL ||
        sscanf(pciBusId, "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &used) != 4 ||
        pciBusId[used] != '\0')
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < cfg->gpu_count; i++) {
        if (domain == 0 && bus == cfg->gpus[i].pci_bus && dev == 0 && fn == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* ------------------------------------------------------------------------ */
/* Identity                                                                 */
/* ------------------------------------------------------------------------ */

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    REQUIRE_DEVICE_OR_MIG(device, i, mig);
    if (mig != 0) {
        char mig_uuid[48];
        unsigned char bytes[16];
        fake_mig_uuid(&cfg->gpus[i], FAKE_MIG_TAG_GI(mig), FAKE_MIG_TAG_CI(mig), mig_uuid, bytes);
        return put_string(uuid, length, mig_uuid);
    }
    return put_string(uuid, length, cfg->gpus[i].uuid);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    REQUIRE_DEVICE(device, i);
    if (index == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned int)i;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    REQUIRE_DEVICE(device, i);
    if (minorNumber == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *minorNumber = (unsigned int)cfg->gpus[i].phys;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    REQUIRE_DEVICE_OR_MIG(device, i, mig);
    fake_nvml_mig_desc desc;
    if (mig != 0 && fake_nvml_mig_describe(i, mig, &desc) == 0) {
        /* As the real driver names a MIG device: "<GPU> MIG <profile>". */
        char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 32];
        snprintf(buf, sizeof(buf), "%s MIG %s", cfg->gpu_product, desc.profile);
        return put_string(name, length, buf);
    }
    return put_string(name, length, cfg->gpu_product);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    REQUIRE_DEVICE(device, i);
    (void)i;
    if (type == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *type = (nvmlBrandType_t)cfg->brand;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    REQUIRE_DEVICE(device, i);
    (void)i;
    if (arch == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *arch = cfg->architecture;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    REQUIRE_DEVICE(device, i);
    (void)i;
    if (major == NULL || minor == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = cfg->cc_major;
    *minor = cfg->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    REQUIRE_DEVICE(device, i);
    if (pci == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    pci->domain = 0;
    pci->bus = cfg->gpus[i].pci_bus;
    pci->device = 0;
    pci->pciDeviceId = PCI_DEVICE_ID;
    pci->pciSubSystemId = PCI_SUBSYSTEM_ID;
    snprintf(pci->busId, sizeof(pci->busId), "%s", cfg->gpus[i].pci_bus_id);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%s", cfg->gpus[i].pci_bus_id_legacy);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    REQUIRE_DEVICE(device, i);
    (void)i;
    if (node == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (cfg->numa_node < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *node = (unsigned int)cfg->numa_node;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    REQUIRE_DEVICE_OR_MIG(device, i, mig);
    if (attributes == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(attributes, 0, sizeof(*attributes));
    fake_nvml_mig_desc desc;
    if (mig != 0 && fake_nvml_mig_describe(i, mig, &desc) == 0) {
        /* A MIG device: its compute instance's SMs, its GPU instance's memory and engines. */
        *attributes = (nvmlDeviceAttributes_t){.multiprocessorCount = desc.multiprocessors,
                                               .sharedCopyEngineCount = desc.copy_engines,
                                               .sharedDecoderCount = desc.decoders,
                                               .sharedEncoderCount = desc.encoders,
                                               .sharedJpegCount = desc.jpegs,
                                               .sharedOfaCount = desc.ofas,
                                               .gpuInstanceSliceCount = desc.gi_slices,
                                               .computeInstanceSliceCount = desc.ci_slices,
                                               .memorySizeMB = desc.memory_mb};
        return NVML_SUCCESS;
    }
    attributes->multiprocessorCount = (unsigned int)cfg->multiprocessors;
    attributes->memorySizeMB = cfg->gpu_memory >> 20;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *numCores)
{
    REQUIRE_DEVICE(device, i);
    (void)i;
    if (numCores == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *numCores = (unsigned int)(cfg->multiprocessors * cfg->cores_per_sm);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Memory, processes, utilisation                                           */
/* ------------------------------------------------------------------------ */

/* Memory of GPU i, or with mig != 0 of that MIG device's GPU instance. */
static void memory_of(int i, uint32_t mig, unsigned long long *total, unsigned long long *used,
                      unsigned long long *free_bytes)
{
    uint64_t t = cfg->gpu_memory, u;
    if (mig != 0) {
        t = fake_nvml_mig_memory(i, FAKE_MIG_TAG_GI(mig));
        u = fake_state_used_mig(&state, cfg->gpus[i].phys, FAKE_MIG_TAG_GI(mig));
    } else {
        u = fake_state_used(&state, cfg->gpus[i].phys);
    }
    *total = t;
    *used = u;
    *free_bytes = u >= t ? 0 : t - u;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    REQUIRE_DEVICE_OR_MIG(device, i, mig);
    if (memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    memory_of(i, mig, &memory->total, &memory->used, &memory->free);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    REQUIRE_DEVICE_OR_MIG(device, i, mig);
    if (memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->reserved = 0;
    memory_of(i, mig, &memory->total, &memory->used, &memory->free);
    return NVML_SUCCESS;
}

/*
 * Lists the processes with a context or memory on the GPU into infos, whose
 * entries are elem bytes long (v1: pid and memory; v2/v3: plus instance ids),
 * with NVML's INSUFFICIENT_SIZE protocol. graphics: the fake runs no
 * graphics work, so that list is always empty.
 */
static nvmlReturn_t list_processes(nvmlDevice_t device, unsigned int *infoCount, void *infos,
                                   size_t elem, int graphics)
{
    fake_proc procs[FAKE_MAX_SLOTS];
    REQUIRE_DEVICE_OR_MIG(device, i, mig);
    if (infoCount == NULL || (*infoCount > 0 && infos == NULL))
        return NVML_ERROR_INVALID_ARGUMENT;
    /* A MIG device lists the processes of its compute instance. */
    int n = graphics ? 0 : fake_state_processes_mig(&state, cfg->gpus[i].phys, mig, false,
                                                    fake_now_ns(), procs, FAKE_MAX_SLOTS);
    if ((unsigned int)n > *infoCount) {
        *infoCount = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int k = 0; k < n; k++) {
        nvmlProcessInfo_t info = {.pid = procs[k].pid,
                                  .usedGpuMemory = procs[k].used,
                                  .gpuInstanceId = NO_INSTANCE,
                                  .computeInstanceId = NO_INSTANCE};
        if (procs[k].mig != 0) {
            info.gpuInstanceId = FAKE_MIG_TAG_GI(procs[k].mig);
            info.computeInstanceId = FAKE_MIG_TAG_CI(procs[k].mig);
        }
        /* The v1 layout is a prefix of the v2/v3 one. */
        memcpy((char *)infos + (size_t)k * elem, &info, elem);
    }
    *infoCount = (unsigned int)n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos)
{
    return list_processes(device, infoCount, infos, sizeof(*infos), 0);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return list_processes(device, infoCount, infos, sizeof(*infos), 0);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return list_processes(device, infoCount, infos, sizeof(*infos), 0);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                   nvmlProcessInfo_v1_t *infos)
{
    return list_processes(device, infoCount, infos, sizeof(*infos), 1);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos)
{
    return list_processes(device, infoCount, infos, sizeof(*infos), 1);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos)
{
    return list_processes(device, infoCount, infos, sizeof(*infos), 1);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp)
{
    fake_proc procs[FAKE_MAX_SLOTS];
    struct timespec ts;
    REQUIRE_DEVICE_OR_MIG(device, i, mig);
    if (processSamplesCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* As the real driver: no per-process utilisation on MIG-enabled GPUs or their instances. */
    if (mig != 0 || cfg->gpus[i].mig_current == NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_NOT_SUPPORTED;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mono = fake_now_ns();
    unsigned long long real_us = (unsigned long long)ts.tv_sec * 1000000ULL +
                                 (unsigned long long)ts.tv_nsec / 1000ULL;
    int n = fake_state_processes_mig(&state, cfg->gpus[i].phys, mig, false, mono, procs,
                                     FAKE_MAX_SLOTS);
    unsigned int busy = 0;
    for (int k = 0; k < n && k < FAKE_MAX_SLOTS; k++)
        if (procs[k].sm_util > 0)
            procs[busy++] = procs[k];
    /* A sample is stamped (CLOCK_REALTIME, us) with the end of the window it describes. */
    unsigned long long stamp = busy > 0 ? real_us - (mono - procs[0].window_end) / 1000ULL : 0;
    /* Like the real driver: no sample newer than lastSeen means NOT_FOUND. */
    if (busy == 0 || stamp <= lastSeenTimeStamp)
        return NVML_ERROR_NOT_FOUND;
    if (utilization == NULL || *processSamplesCount < busy) {
        *processSamplesCount = busy;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int k = 0; k < busy; k++)
        utilization[k] = (nvmlProcessUtilizationSample_t){
            .pid = procs[k].pid, .timeStamp = stamp, .smUtil = procs[k].sm_util};
    *processSamplesCount = busy;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    REQUIRE_DEVICE_OR_MIG(device, i, mig);
    if (utilization == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* As the real driver: no utilisation on a GPU in MIG mode, nor on its instances. */
    if (mig != 0 || cfg->gpus[i].mig_current == NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_NOT_SUPPORTED;
    utilization->gpu = fake_state_device_util(&state, cfg->gpus[i].phys, fake_now_ns());
    /* Memory traffic is not simulated. */
    utilization->memory = 0;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

#define SUPPORTED_EVENTS                                                              \
    (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError |                 \
     nvmlEventTypeDoubleBitEccError)

static void xid_path(char *buf, size_t len)
{
    snprintf(buf, len, "%s/xid-events", cfg->state_dir);
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    char path[300];
    REQUIRE_INIT();
    if (set == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlEventSet_t s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NVML_ERROR_MEMORY;
    s->magic = NVML_MAGIC_EVENTS;
    xid_path(path, sizeof(path));
    FILE *f = fopen(path, "re");
    if (f != NULL) {
        if (fseek(f, 0, SEEK_END) == 0)
            s->offset = ftell(f);
        fclose(f);
    }
    *set = s;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    REQUIRE_INIT();
    if (set == NULL || set->magic != NVML_MAGIC_EVENTS)
        return NVML_ERROR_INVALID_ARGUMENT;
    set->magic = 0;
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    REQUIRE_DEVICE(device, i);
    (void)i;
    if (eventTypes == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *eventTypes = SUPPORTED_EVENTS;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set)
{
    REQUIRE_DEVICE(device, i);
    if (set == NULL || set->magic != NVML_MAGIC_EVENTS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((eventTypes & ~SUPPORTED_EVENTS) != 0)
        return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&mu);
    set->types[i] |= eventTypes;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

/*
 * Device index named by a GPU UUID or a decimal index, or -1; or the parent
 * of the MIG device a MIG UUID names, with *mig its tag (else 0).
 */
static int parse_device(const char *s, uint32_t *mig)
{
    nvmlDevice_t m;
    *mig = 0;
    for (int i = 0; i < cfg->gpu_count; i++)
        if (strcasecmp(s, cfg->gpus[i].uuid) == 0)
            return i;
    if (strncasecmp(s, "MIG-", 4) == 0)
        return fake_nvml_mig_by_uuid(s, &m) == NVML_SUCCESS ? fake_nvml_mig_index(m, mig) : -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno == 0 && end != s && *end == '\0' && v >= 0 && v < cfg->gpu_count)
        return (int)v;
    return -1;
}

/*
 * Reads complete lines after set->offset and returns 1 with data filled for
 * the first event the set is registered for. Malformed lines are skipped.
 */
static int next_event(nvmlEventSet_t set, nvmlEventData_t *data)
{
    char path[300], line[256];
    xid_path(path, sizeof(path));
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    int found = 0;
    if (fseek(f, set->offset, SEEK_SET) == 0) {
        while (!found && fgets(line, sizeof(line), f) != NULL) {
            size_t n = strlen(line);
            if (n == 0 || line[n - 1] != '\n')
                break; /* partial line: wait for the writer */
            set->offset += (long)n;
            char dev[128];
            unsigned long long xid;
            int i;
            uint32_t mig;
            if (sscanf(line, "%127s %llu", dev, &xid) != 2 || (i = parse_device(dev, &mig)) < 0 ||
                (set->types[i] & nvmlEventTypeXidCriticalError) == 0)
                continue;
            *data = (nvmlEventData_t){.device = &devices[i],
                                      .eventType = nvmlEventTypeXidCriticalError,
                                      .eventData = xid,
                                      .gpuInstanceId = NO_INSTANCE,
                                      .computeInstanceId = NO_INSTANCE};
            /* An XID in a MIG instance: the parent's event, with the instance's ids. */
            if (mig != 0) {
                data->gpuInstanceId = FAKE_MIG_TAG_GI(mig);
                data->computeInstanceId = FAKE_MIG_TAG_CI(mig);
            }
            found = 1;
        }
    }
    fclose(f);
    return found;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    REQUIRE_INIT();
    if (set == NULL || set->magic != NVML_MAGIC_EVENTS || data == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t deadline = fake_now_ns() + (uint64_t)timeoutms * 1000000ULL;
    uint64_t next_resolve = 0;
    for (;;) {
        /* A host-side waiter stands in for the kernel driver naming new processes. */
        if (fake_now_ns() >= next_resolve) {
            fake_state_resolve_host_pids(&state);
            next_resolve = fake_now_ns() + RESOLVE_PIDS_NS;
        }
        pthread_mutex_lock(&mu);
        int found = next_event(set, data);
        pthread_mutex_unlock(&mu);
        if (found)
            return NVML_SUCCESS;
        uint64_t now = fake_now_ns();
        if (now >= deadline)
            return NVML_ERROR_TIMEOUT;
        uint64_t left = deadline - now;
        struct timespec ts = {0, left < (uint64_t)XID_POLL_NS ? (long)left : XID_POLL_NS};
        nanosleep(&ts, NULL);
    }
}
