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
 * vgpu_cuda.h - the subset of the CUDA driver API used by vgpu-core.
 *
 * Written from the public CUDA Driver API reference. Numeric values and
 * structure layouts match the real cuda.h (test/gpu/ checks this with static
 * asserts against the real header on a GPU machine).
 *
 * Unlike the real cuda.h this header does NOT rename functions with macros
 * (e.g. cuMemAlloc -> cuMemAlloc_v2): every prototype carries the exact
 * exported symbol name, because both the fake driver and libvgpu.so must
 * define and resolve each exported variant explicitly.
 *
 * For each function F a pointer type PFN_F is declared with the same
 * signature, used when a function is resolved at run time (dlsym,
 * cuGetProcAddress).
 */
#ifndef VGPU_CUDA_H
#define VGPU_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Scalar and handle types                                                  */
/* ------------------------------------------------------------------------ */

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
/* Device pointers of the legacy (CUDA < 3.2) entry points: 32 bits. */
typedef unsigned int CUdeviceptr_v1;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;

/* Only ever handled through pointers here; fields are not needed. */
typedef struct CUgraphEdgeData_st CUgraphEdgeData;
typedef struct CUctxCreateParams_st CUctxCreateParams;

/* Special stream handles: legacy and per-thread default streams. */
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

/* cuStreamCreate flags. */
#define CU_STREAM_DEFAULT 0x0
#define CU_STREAM_NON_BLOCKING 0x1

/* cuMemAllocManaged flags. */
#define CU_MEM_ATTACH_GLOBAL 0x1
#define CU_MEM_ATTACH_HOST 0x2
#define CU_MEM_ATTACH_SINGLE 0x4

/* CUDA_ARRAY3D_DESCRIPTOR.Flags bits. */
#define CUDA_ARRAY3D_LAYERED 0x01
#define CUDA_ARRAY3D_SURFACE_LDST 0x02
#define CUDA_ARRAY3D_CUBEMAP 0x04
#define CUDA_ARRAY3D_TEXTURE_GATHER 0x08

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

/* Legacy IPC: an opaque 64-byte handle naming a device allocation to another process. */
#define CU_IPC_HANDLE_SIZE 64
typedef struct CUipcMemHandle_st {
    char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1

/* ------------------------------------------------------------------------ */
/* Result codes                                                             */
/* ------------------------------------------------------------------------ */

typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_PROFILER_DISABLED = 5,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_DEVICE_NOT_LICENSED = 102,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_CONTEXT_ALREADY_CURRENT = 202,
    CUDA_ERROR_MAP_FAILED = 205,
    CUDA_ERROR_UNMAP_FAILED = 206,
    CUDA_ERROR_ARRAY_IS_MAPPED = 207,
    CUDA_ERROR_ALREADY_MAPPED = 208,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_ALREADY_ACQUIRED = 210,
    CUDA_ERROR_NOT_MAPPED = 211,
    CUDA_ERROR_NOT_MAPPED_AS_ARRAY = 212,
    CUDA_ERROR_NOT_MAPPED_AS_POINTER = 213,
    CUDA_ERROR_ECC_UNCORRECTABLE = 214,
    CUDA_ERROR_UNSUPPORTED_LIMIT = 215,
    CUDA_ERROR_CONTEXT_ALREADY_IN_USE = 216,
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_INVALID_GRAPHICS_CONTEXT = 219,
    CUDA_ERROR_NVLINK_UNCORRECTABLE = 220,
    CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
    CUDA_ERROR_INVALID_SOURCE = 300,
    CUDA_ERROR_FILE_NOT_FOUND = 301,
    CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND = 302,
    CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_TIMEOUT = 702,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
    CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_ASSERT = 710,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
    CUDA_ERROR_MISALIGNED_ADDRESS = 716,
    CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
    CUDA_ERROR_INVALID_PC = 718,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_NOT_READY = 802,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
    CUDA_ERROR_MPS_CONNECTION_FAILED = 805,
    CUDA_ERROR_MPS_RPC_FAILURE = 806,
    CUDA_ERROR_MPS_SERVER_NOT_READY = 807,
    CUDA_ERROR_MPS_MAX_CLIENTS_REACHED = 808,
    CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED = 809,
    CUDA_ERROR_MPS_CLIENT_TERMINATED = 810,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
    CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
    CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
    CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
    CUDA_ERROR_CAPTURED_EVENT = 907,
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
    CUDA_ERROR_TIMEOUT = 909,
    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
    CUDA_ERROR_INVALID_RESOURCE_TYPE = 914,
    CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

/* ------------------------------------------------------------------------ */
/* Enumerations                                                             */
/* ------------------------------------------------------------------------ */

/* Device attributes queried by vgpu-core (values as in the real enum). */
typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
    CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
    CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115
} CUdevice_attribute;

typedef enum CUmemAllocationType_enum {
    CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
    CU_MEM_ALLOCATION_TYPE_PINNED = 0x1
} CUmemAllocationType;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0x0,
    CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
    CU_MEM_LOCATION_TYPE_HOST = 0x2,
    CU_MEM_LOCATION_TYPE_HOST_NUMA = 0x3,
    CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 0x4
} CUmemLocationType;

typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE = 0x0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
    CU_MEM_HANDLE_TYPE_WIN32 = 0x2,
    CU_MEM_HANDLE_TYPE_WIN32_KMT = 0x4,
    CU_MEM_HANDLE_TYPE_FABRIC = 0x8
} CUmemAllocationHandleType;

typedef enum CUmemAccess_flags_enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3
} CUmemAccess_flags;

typedef enum CUmemAllocationGranularity_flags_enum {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1
} CUmemAllocationGranularity_flags;

typedef enum CUmemPool_attribute_enum {
    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
    CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
    CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
    CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
    CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8
} CUmemPool_attribute;

typedef enum CUarray_format_enum {
    CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
    CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
    CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
    CU_AD_FORMAT_SIGNED_INT8 = 0x08,
    CU_AD_FORMAT_SIGNED_INT16 = 0x09,
    CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
    CU_AD_FORMAT_HALF = 0x10,
    CU_AD_FORMAT_FLOAT = 0x20
} CUarray_format;

typedef enum CUstreamCaptureStatus_enum {
    CU_STREAM_CAPTURE_STATUS_NONE = 0,
    CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
    CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2
} CUstreamCaptureStatus;

typedef enum CUstreamCaptureMode_enum {
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    CU_STREAM_CAPTURE_MODE_RELAXED = 2
} CUstreamCaptureMode;

/* cuCtxSetLimit / cuCtxGetLimit (those that take device memory; others exist). */
typedef enum CUlimit_enum {
    CU_LIMIT_STACK_SIZE = 0x00,
    CU_LIMIT_PRINTF_FIFO_SIZE = 0x01,
    CU_LIMIT_MALLOC_HEAP_SIZE = 0x02,
    CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH = 0x03,
    CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT = 0x04
} CUlimit;

/* Graph node types (those vgpu-core looks for; others exist). */
typedef enum CUgraphNodeType_enum {
    CU_GRAPH_NODE_TYPE_KERNEL = 0,
    CU_GRAPH_NODE_TYPE_GRAPH = 4,
    CU_GRAPH_NODE_TYPE_EMPTY = 5,
    CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
    CU_GRAPH_NODE_TYPE_MEM_FREE = 11
} CUgraphNodeType;

/* cuDeviceGetGraphMemAttribute: the device's memory for graph allocations (cuuint64_t). */
typedef enum CUgraphMem_attribute_enum {
    CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
    CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
    CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
    CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3
} CUgraphMem_attribute;

/* Graph instantiation flags. */
#define CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH 1
#define CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD 2

typedef enum CUgraphInstantiateResult_enum {
    CUDA_GRAPH_INSTANTIATE_SUCCESS = 0,
    CUDA_GRAPH_INSTANTIATE_ERROR = 1
} CUgraphInstantiateResult;

/* symbolStatus of cuGetProcAddress_v2. */
typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;

/* cuGetProcAddress flags. */
typedef enum CUdriverProcAddress_flags_enum {
    CU_GET_PROC_ADDRESS_DEFAULT = 0,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1
} CUdriverProcAddress_flags;

typedef enum CUexecAffinityType_enum {
    CU_EXEC_AFFINITY_TYPE_SM_COUNT = 0
} CUexecAffinityType;

typedef enum CUlaunchAttributeID_enum {
    CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
    CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1,
    CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
    CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY = 3,
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
    CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5,
    CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
    CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT = 7,
    CU_LAUNCH_ATTRIBUTE_PRIORITY = 8
} CUlaunchAttributeID;

/* ------------------------------------------------------------------------ */
/* Structures                                                               */
/* ------------------------------------------------------------------------ */

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

/* A VMM allocation exported for other nodes' processes (CU_MEM_HANDLE_TYPE_FABRIC). */
typedef struct CUmemFabricHandle_st {
    unsigned char data[64];
} CUmemFabricHandle;

typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    CUmemAccess_flags flags;
} CUmemAccessDesc;

typedef struct CUmemPoolProps_st {
    CUmemAllocationType allocType;
    CUmemAllocationHandleType handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_v1_st {
    CUmemPoolProps poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr; /* out: the allocation's address, fixed for the graph's life */
} CUDA_MEM_ALLOC_NODE_PARAMS;

typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
    cuuint64_t flags;
    CUstream hUploadStream;
    CUgraphNode hErrNode_out;
    CUgraphInstantiateResult result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;

typedef struct CUDA_ARRAY_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    size_t Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/*
 * Green contexts (CUDA 12.4+): a context on a partition of the device's
 * SMs, described by resources split from the device's. A resource is 144
 * bytes in every release (its union is 48 bytes in 12.x, 40 and a next
 * pointer in 13.x); the SM count is the first field of the union.
 */
typedef struct CUgreenCtx_st *CUgreenCtx;
typedef struct CUdevResourceDesc_st *CUdevResourceDesc;

typedef enum CUdevResourceType_enum {
    CU_DEV_RESOURCE_TYPE_INVALID = 0,
    CU_DEV_RESOURCE_TYPE_SM = 1
} CUdevResourceType;

typedef struct CUdevSmResource_st {
    unsigned int smCount;
} CUdevSmResource;

typedef struct CUdevResource_st {
    CUdevResourceType type;
    unsigned char _internal_padding[92];
    union {
        CUdevSmResource sm;
        unsigned char _oversize[48];
    };
} CUdevResource;

/* cuGreenCtxCreate flags: the green context gets its own default stream (required). */
#define CU_GREEN_CTX_DEFAULT_STREAM 0x1

/* External memory interop (Vulkan, OpenGL, Direct3D, NvSciBuf; CUDA 10.0+). */
typedef struct CUextMemory_st *CUexternalMemory;

typedef enum CUexternalMemoryHandleType_enum {
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD = 1,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32 = 2,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_KMT = 3,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_HEAP = 4,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_RESOURCE = 5,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE = 6,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE_KMT = 7,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF = 8
} CUexternalMemoryHandleType;

/* CUDA_EXTERNAL_MEMORY_HANDLE_DESC.flags: a dedicated (Vulkan) allocation. */
#define CUDA_EXTERNAL_MEMORY_DEDICATED 0x1

typedef struct CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st {
    CUexternalMemoryHandleType type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciBufObject;
    } handle;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_HANDLE_DESC;

typedef struct CUDA_EXTERNAL_MEMORY_BUFFER_DESC_st {
    unsigned long long offset;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_BUFFER_DESC;

typedef struct CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC_st {
    unsigned long long offset;
    CUDA_ARRAY3D_DESCRIPTOR arrayDesc;
    unsigned int numLevels;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC;

typedef struct CUDA_ARRAY_MEMORY_REQUIREMENTS_st {
    size_t size;
    size_t alignment;
    unsigned int reserved[4];
} CUDA_ARRAY_MEMORY_REQUIREMENTS;

typedef struct CUexecAffinitySmCount_st {
    unsigned int val;
} CUexecAffinitySmCount;

typedef struct CUexecAffinityParam_st {
    CUexecAffinityType type;
    union {
        CUexecAffinitySmCount smCount;
    } param;
} CUexecAffinityParam;

/* The real union has many members; all share this 64-byte storage. */
typedef union CUlaunchAttributeValue_union {
    char pad[64];
    int cooperative;
    int priority;
    struct {
        unsigned int x;
        unsigned int y;
        unsigned int z;
    } clusterDim;
} CUlaunchAttributeValue;

typedef struct CUlaunchAttribute_st {
    CUlaunchAttributeID id;
    char pad[8 - sizeof(CUlaunchAttributeID)];
    CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
    unsigned int gridDimX;
    unsigned int gridDimY;
    unsigned int gridDimZ;
    unsigned int blockDimX;
    unsigned int blockDimY;
    unsigned int blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

/* ------------------------------------------------------------------------ */
/* Functions                                                                */
/* ------------------------------------------------------------------------ */

/*
 * VGPU_CU_API(name, params) declares the exported function `name` and the
 * matching pointer type PFN_name.
 */
#define VGPU_CU_API(name, params) \
    CUresult name params;         \
    typedef CUresult(*PFN_##name) params

/* Initialisation and version. */
VGPU_CU_API(cuInit, (unsigned int Flags));
VGPU_CU_API(cuDriverGetVersion, (int *driverVersion));

/* Error strings. */
VGPU_CU_API(cuGetErrorString, (CUresult error, const char **pStr));
VGPU_CU_API(cuGetErrorName, (CUresult error, const char **pStr));

/* Devices. */
VGPU_CU_API(cuDeviceGet, (CUdevice *device, int ordinal));
VGPU_CU_API(cuDeviceGetCount, (int *count));
VGPU_CU_API(cuDeviceGetName, (char *name, int len, CUdevice dev));
VGPU_CU_API(cuDeviceGetUuid, (CUuuid *uuid, CUdevice dev));
VGPU_CU_API(cuDeviceGetUuid_v2, (CUuuid *uuid, CUdevice dev));
VGPU_CU_API(cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev));
/* Legacy (CUDA < 3.2) variant with a 32-bit size. */
VGPU_CU_API(cuDeviceTotalMem, (unsigned int *bytes, CUdevice dev));
VGPU_CU_API(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev));
VGPU_CU_API(cuDeviceGetPCIBusId, (char *pciBusId, int len, CUdevice dev));
VGPU_CU_API(cuDeviceGetDefaultMemPool, (CUmemoryPool *pool_out, CUdevice dev));
VGPU_CU_API(cuDeviceGetMemPool, (CUmemoryPool *pool, CUdevice dev));
VGPU_CU_API(cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool));

/* Primary contexts. */
VGPU_CU_API(cuDevicePrimaryCtxRetain, (CUcontext *pctx, CUdevice dev));
VGPU_CU_API(cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned int *flags, int *active));
VGPU_CU_API(cuDevicePrimaryCtxRelease, (CUdevice dev));
VGPU_CU_API(cuDevicePrimaryCtxRelease_v2, (CUdevice dev));
VGPU_CU_API(cuDevicePrimaryCtxReset, (CUdevice dev));
VGPU_CU_API(cuDevicePrimaryCtxReset_v2, (CUdevice dev));

/* Contexts. */
VGPU_CU_API(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev));
VGPU_CU_API(cuCtxCreate_v3, (CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                             unsigned int flags, CUdevice dev));
VGPU_CU_API(cuCtxCreate_v4, (CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                             unsigned int flags, CUdevice dev));
VGPU_CU_API(cuCtxDestroy_v2, (CUcontext ctx));

/* Green contexts (CUDA 12.4+). */
VGPU_CU_API(cuDeviceGetDevResource, (CUdevice device, CUdevResource *resource,
                                     CUdevResourceType type));
VGPU_CU_API(cuDevSmResourceSplitByCount, (CUdevResource *result, unsigned int *nbGroups,
                                          const CUdevResource *input, CUdevResource *remaining,
                                          unsigned int useFlags, unsigned int minCount));
VGPU_CU_API(cuDevResourceGenerateDesc, (CUdevResourceDesc *phDesc, CUdevResource *resources,
                                        unsigned int nbResources));
VGPU_CU_API(cuGreenCtxCreate, (CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
                               unsigned int flags));
VGPU_CU_API(cuGreenCtxDestroy, (CUgreenCtx hCtx));
VGPU_CU_API(cuCtxFromGreenCtx, (CUcontext *pContext, CUgreenCtx hCtx));
VGPU_CU_API(cuGreenCtxGetDevResource, (CUgreenCtx hCtx, CUdevResource *resource,
                                       CUdevResourceType type));
VGPU_CU_API(cuGreenCtxStreamCreate, (CUstream *phStream, CUgreenCtx greenCtx,
                                     unsigned int flags, int priority));
/* Legacy (CUDA < 4.0) name the driver still exports. */
VGPU_CU_API(cuCtxDestroy, (CUcontext ctx));
VGPU_CU_API(cuCtxGetCurrent, (CUcontext *pctx));
VGPU_CU_API(cuCtxSetCurrent, (CUcontext ctx));
VGPU_CU_API(cuCtxGetDevice, (CUdevice *device));
VGPU_CU_API(cuCtxSynchronize, (void));
VGPU_CU_API(cuCtxSetLimit, (CUlimit limit, size_t value));
VGPU_CU_API(cuCtxGetLimit, (size_t *pvalue, CUlimit limit));

/* Linear device memory. */
VGPU_CU_API(cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize));
VGPU_CU_API(cuMemFree_v2, (CUdeviceptr dptr));
/* Legacy entry points (CUDA < 3.2) the driver still exports: 32-bit addresses and sizes. */
VGPU_CU_API(cuMemAlloc, (CUdeviceptr_v1 *dptr, unsigned int bytesize));
VGPU_CU_API(cuMemFree, (CUdeviceptr_v1 dptr));
/* Pinned host memory: host RAM, never device memory. */
VGPU_CU_API(cuMemAllocHost_v2, (void **pp, size_t bytesize));
VGPU_CU_API(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags));
VGPU_CU_API(cuMemFreeHost, (void *p));
VGPU_CU_API(cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int Flags));
VGPU_CU_API(cuMemHostUnregister, (void *p));
VGPU_CU_API(cuMemAllocPitch_v2, (CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                 size_t Height, unsigned int ElementSizeBytes));
VGPU_CU_API(cuMemAllocManaged, (CUdeviceptr *dptr, size_t bytesize, unsigned int flags));
VGPU_CU_API(cuMemGetInfo_v2, (size_t *free, size_t *total));
/* Legacy (CUDA < 3.2) variant with 32-bit sizes. */
VGPU_CU_API(cuMemGetInfo, (unsigned int *free, unsigned int *total));
VGPU_CU_API(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount));
VGPU_CU_API(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount));
VGPU_CU_API(cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount));
VGPU_CU_API(cuMemcpyDtoH_v2_ptds, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount));

/* Stream-ordered allocation and memory pools. */
VGPU_CU_API(cuMemAllocAsync, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream));
VGPU_CU_API(cuMemAllocAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream));
VGPU_CU_API(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream));
VGPU_CU_API(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream));
VGPU_CU_API(cuMemAllocFromPoolAsync, (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream));
VGPU_CU_API(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize,
                                           CUmemoryPool pool, CUstream hStream));
VGPU_CU_API(cuMemPoolCreate, (CUmemoryPool *pool, const CUmemPoolProps *poolProps));
VGPU_CU_API(cuMemPoolDestroy, (CUmemoryPool pool));
VGPU_CU_API(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep));
VGPU_CU_API(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value));
VGPU_CU_API(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value));

/* Virtual memory management. */
VGPU_CU_API(cuMemCreate, (CUmemGenericAllocationHandle *handle, size_t size,
                          const CUmemAllocationProp *prop, unsigned long long flags));
VGPU_CU_API(cuMemRelease, (CUmemGenericAllocationHandle handle));
VGPU_CU_API(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle *handle, void *addr));
VGPU_CU_API(cuMemAddressReserve, (CUdeviceptr *ptr, size_t size, size_t alignment,
                                  CUdeviceptr addr, unsigned long long flags));
VGPU_CU_API(cuMemAddressFree, (CUdeviceptr ptr, size_t size));
VGPU_CU_API(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset,
                       CUmemGenericAllocationHandle handle, unsigned long long flags));
VGPU_CU_API(cuMemUnmap, (CUdeviceptr ptr, size_t size));
VGPU_CU_API(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                             size_t count));
VGPU_CU_API(cuMemGetAllocationGranularity, (size_t *granularity, const CUmemAllocationProp *prop,
                                            CUmemAllocationGranularity_flags option));
VGPU_CU_API(cuMemExportToShareableHandle, (void *shareableHandle,
                                           CUmemGenericAllocationHandle handle,
                                           CUmemAllocationHandleType handleType,
                                           unsigned long long flags));
VGPU_CU_API(cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle *handle,
                                             void *osHandle,
                                             CUmemAllocationHandleType shHandleType));
VGPU_CU_API(cuMemGetAllocationPropertiesFromHandle, (CUmemAllocationProp *prop,
                                                     CUmemGenericAllocationHandle handle));

/* External memory interop. */
VGPU_CU_API(cuImportExternalMemory, (CUexternalMemory *extMem_out,
                                     const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc));
VGPU_CU_API(cuExternalMemoryGetMappedBuffer, (CUdeviceptr *devPtr, CUexternalMemory extMem,
                                              const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc));
VGPU_CU_API(cuExternalMemoryGetMappedMipmappedArray,
            (CUmipmappedArray *mipmap, CUexternalMemory extMem,
             const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC *mipmapDesc));
VGPU_CU_API(cuDestroyExternalMemory, (CUexternalMemory extMem));

/* Legacy IPC (cuIpc*) and address ranges. */
VGPU_CU_API(cuIpcGetMemHandle, (CUipcMemHandle *pHandle, CUdeviceptr dptr));
VGPU_CU_API(cuIpcOpenMemHandle_v2, (CUdeviceptr *pdptr, CUipcMemHandle handle,
                                    unsigned int Flags));
VGPU_CU_API(cuIpcCloseMemHandle, (CUdeviceptr dptr));
VGPU_CU_API(cuMemGetAddressRange_v2, (CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr));

/* Arrays. */
VGPU_CU_API(cuArrayCreate_v2, (CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray));
VGPU_CU_API(cuArray3DCreate_v2, (CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray));
VGPU_CU_API(cuArrayDestroy, (CUarray hArray));
VGPU_CU_API(cuArrayGetMemoryRequirements, (CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                           CUarray array, CUdevice device));
VGPU_CU_API(cuMipmappedArrayCreate, (CUmipmappedArray *pHandle,
                                     const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                     unsigned int numMipmapLevels));
VGPU_CU_API(cuMipmappedArrayDestroy, (CUmipmappedArray hMipmappedArray));
VGPU_CU_API(cuMipmappedArrayGetMemoryRequirements,
            (CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements, CUmipmappedArray mipmap,
             CUdevice device));

/* Modules. */
VGPU_CU_API(cuModuleLoadData, (CUmodule *module, const void *image));
VGPU_CU_API(cuModuleGetFunction, (CUfunction *hfunc, CUmodule hmod, const char *name));
VGPU_CU_API(cuModuleUnload, (CUmodule hmod));

/* Launches. */
VGPU_CU_API(cuLaunchKernel, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra));
VGPU_CU_API(cuLaunchKernel_ptsz, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                  unsigned int gridDimZ, unsigned int blockDimX,
                                  unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream,
                                  void **kernelParams, void **extra));
VGPU_CU_API(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra));
VGPU_CU_API(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f,
                                    void **kernelParams, void **extra));
VGPU_CU_API(cuLaunchCooperativeKernel, (CUfunction f, unsigned int gridDimX,
                                        unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                                        CUstream hStream, void **kernelParams));
VGPU_CU_API(cuLaunchCooperativeKernel_ptsz, (CUfunction f, unsigned int gridDimX,
                                             unsigned int gridDimY, unsigned int gridDimZ,
                                             unsigned int blockDimX, unsigned int blockDimY,
                                             unsigned int blockDimZ, unsigned int sharedMemBytes,
                                             CUstream hStream, void **kernelParams));

/* Graphs: stream capture, graph launch and graph memory (allocation nodes). */
VGPU_CU_API(cuGraphCreate, (CUgraph *phGraph, unsigned int flags));
VGPU_CU_API(cuGraphAddMemAllocNode, (CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams));
VGPU_CU_API(cuGraphAddMemFreeNode, (CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies,
                                    CUdeviceptr dptr));
VGPU_CU_API(cuGraphGetNodes, (CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes));
VGPU_CU_API(cuGraphNodeGetType, (CUgraphNode hNode, CUgraphNodeType *type));
VGPU_CU_API(cuGraphMemAllocNodeGetParams, (CUgraphNode hNode,
                                           CUDA_MEM_ALLOC_NODE_PARAMS *params_out));
VGPU_CU_API(cuGraphChildGraphNodeGetGraph, (CUgraphNode hNode, CUgraph *phGraph));
/* CUDA 11.0-11.8 instantiation (cuGraphInstantiate of those headers). */
VGPU_CU_API(cuGraphInstantiate_v2, (CUgraphExec *phGraphExec, CUgraph hGraph,
                                    CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize));
VGPU_CU_API(cuGraphInstantiateWithFlags, (CUgraphExec *phGraphExec, CUgraph hGraph,
                                          unsigned long long flags));
VGPU_CU_API(cuGraphInstantiateWithParams, (CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams));
VGPU_CU_API(cuGraphInstantiateWithParams_ptsz, (CUgraphExec *phGraphExec, CUgraph hGraph,
                                                CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams));
VGPU_CU_API(cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream));
VGPU_CU_API(cuGraphUpload_ptsz, (CUgraphExec hGraphExec, CUstream hStream));
VGPU_CU_API(cuDeviceGetGraphMemAttribute, (CUdevice device, CUgraphMem_attribute attr,
                                           void *value));
VGPU_CU_API(cuDeviceGraphMemTrim, (CUdevice device));
VGPU_CU_API(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream));
VGPU_CU_API(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream));
VGPU_CU_API(cuGraphExecDestroy, (CUgraphExec hGraphExec));
VGPU_CU_API(cuGraphDestroy, (CUgraph hGraph));

/* Streams and stream capture. */
VGPU_CU_API(cuStreamCreate, (CUstream *phStream, unsigned int Flags));
VGPU_CU_API(cuStreamDestroy_v2, (CUstream hStream));
VGPU_CU_API(cuStreamSynchronize, (CUstream hStream));
VGPU_CU_API(cuStreamSynchronize_ptsz, (CUstream hStream));
VGPU_CU_API(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode));
VGPU_CU_API(cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode));
VGPU_CU_API(cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph));
VGPU_CU_API(cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph *phGraph));
VGPU_CU_API(cuStreamGetDevice, (CUstream hStream, CUdevice *device));
VGPU_CU_API(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus *captureStatus));
VGPU_CU_API(cuStreamIsCapturing_ptsz, (CUstream hStream, CUstreamCaptureStatus *captureStatus));
VGPU_CU_API(cuStreamGetCaptureInfo_v2, (CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        size_t *numDependencies_out));
VGPU_CU_API(cuStreamGetCaptureInfo_v2_ptsz, (CUstream hStream,
                                             CUstreamCaptureStatus *captureStatus_out,
                                             cuuint64_t *id_out, CUgraph *graph_out,
                                             const CUgraphNode **dependencies_out,
                                             size_t *numDependencies_out));
VGPU_CU_API(cuStreamGetCaptureInfo_v3, (CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out));
VGPU_CU_API(cuStreamGetCaptureInfo_v3_ptsz, (CUstream hStream,
                                             CUstreamCaptureStatus *captureStatus_out,
                                             cuuint64_t *id_out, CUgraph *graph_out,
                                             const CUgraphNode **dependencies_out,
                                             const CUgraphEdgeData **edgeData_out,
                                             size_t *numDependencies_out));

/* Events: the limiter times sampled launches with them where NVML cannot (MIG instances). */
#define CU_EVENT_DEFAULT 0x0
#define CU_EVENT_DISABLE_TIMING 0x2
VGPU_CU_API(cuEventCreate, (CUevent *phEvent, unsigned int Flags));
VGPU_CU_API(cuEventDestroy_v2, (CUevent hEvent));
VGPU_CU_API(cuEventRecord, (CUevent hEvent, CUstream hStream));
VGPU_CU_API(cuEventQuery, (CUevent hEvent));
VGPU_CU_API(cuEventSynchronize, (CUevent hEvent));
VGPU_CU_API(cuEventElapsedTime, (float *pMilliseconds, CUevent hStart, CUevent hEnd));
VGPU_CU_API(cuThreadExchangeStreamCaptureMode, (CUstreamCaptureMode *mode));

/* Entry points. */
/* CUDA 11.3+ resolver. */
VGPU_CU_API(cuGetProcAddress, (const char *symbol, void **pfn, int cudaVersion,
                               cuuint64_t flags));
/* CUDA 12.0+ resolver; symbolStatus (may be NULL) says why a lookup failed. */
VGPU_CU_API(cuGetProcAddress_v2, (const char *symbol, void **pfn, int cudaVersion,
                                  cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus));
/* Private tables of the CUDA runtime; interposers pass this through. */
VGPU_CU_API(cuGetExportTable, (const void **ppExportTable, const CUuuid *pExportTableId));

#ifdef __cplusplus
}
#endif

#endif /* VGPU_CUDA_H */
