/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Fake CUDA runtime (libcudart.so.13) for pipeprof's tests. It owns no device state: like the
 * real runtime it is a layer over the driver, and every call that waits does so by calling the
 * driver's exported twin through the PLT (cudaStreamSynchronize -> cuStreamSynchronize, ...),
 * so a process shows the same runtime-over-driver nesting that pipeprof meets in real jobs.
 *
 * What it adds is bookkeeping for tests: per-API call counts and time spent inside each call,
 * written as JSON at exit to the file named by FAKECUDA_STATS, so a test can compare what
 * pipeprof measured with what actually happened.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fakecudart.h"

static const char *const api_names[API_COUNT] = {
#define X(name) [API_##name] = #name,
	RT_APIS(X)
#undef X
};

static struct {
	uint64_t calls;
	uint64_t total_ns;
} stats[API_COUNT];

/* Both are per thread in the real runtime, and code relies on that. */
static __thread cudaError_t last_error;
static __thread int cur_device;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* The real runtime initialises the driver lazily on the first call, so do the same. */
static void rt_init(void)
{
	cuInit(0);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

uint64_t api_begin(void)
{
	pthread_once(&init_once, rt_init);
	return now_ns();
}

static void api_count(enum api_id id, uint64_t t0)
{
	__atomic_fetch_add(&stats[id].calls, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&stats[id].total_ns, now_ns() - t0, __ATOMIC_RELAXED);
}

/*
 * Not-ready is an answer, not a failure, so it is not remembered for cudaGetLastError.
 * Doing work after the driver call also keeps the compiler from turning it into a tail
 * jump: the runtime frame must stay live under the driver's, as in the real library.
 */
cudaError_t api_end(enum api_id id, uint64_t t0, cudaError_t err)
{
	api_count(id, t0);
	if (err != cudaSuccess && err != cudaErrorNotReady)
		last_error = err;
	return err;
}


/* ---- device management ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaGetDeviceCount, t0, from_cu(cuDeviceGetCount(count)));
}

cudaError_t cudaSetDevice(int device)
{
	uint64_t t0 = api_begin();
	CUdevice dev;
	CUresult r;

	r = cuDeviceGet(&dev, device);
	if (!r)
		cur_device = dev;
	return api_end(API_cudaSetDevice, t0, from_cu(r));
}

cudaError_t cudaGetDevice(int *device)
{
	uint64_t t0 = api_begin();
	cudaError_t err = cudaSuccess;

	if (device)
		*device = cur_device;
	else
		err = cudaErrorInvalidValue;
	return api_end(API_cudaGetDevice, t0, err);
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaSetDeviceFlags, t0,
		       from_cu(cuDevicePrimaryCtxSetFlags_v2(cur_device, flags)));
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	uint64_t t0 = api_begin();
	int active;

	return api_end(API_cudaGetDeviceFlags, t0,
		       from_cu(cuDevicePrimaryCtxGetState(cur_device, flags, &active)));
}

cudaError_t cudaDeviceSynchronize(void)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaDeviceSynchronize, t0, from_cu(cuCtxSynchronize()));
}

cudaError_t cudaDeviceReset(void)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaDeviceReset, t0, from_cu(cuDevicePrimaryCtxReset_v2(cur_device)));
}

/* ---- memory ---- */

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	uint64_t t0 = api_begin();
	CUdeviceptr d;
	CUresult r;

	if (!devPtr)
		return api_end(API_cudaMalloc, t0, cudaErrorInvalidValue);
	/* A zero-byte cudaMalloc succeeds with NULL; the driver would refuse it. */
	if (!size) {
		*devPtr = NULL;
		return api_end(API_cudaMalloc, t0, cudaSuccess);
	}
	r = cuMemAlloc_v2(&d, size);
	if (!r)
		*devPtr = (void *)(uintptr_t)d;
	return api_end(API_cudaMalloc, t0, from_cu(r));
}

cudaError_t cudaFree(void *devPtr)
{
	uint64_t t0 = api_begin();

	/* cudaFree(NULL) is the customary way to force initialisation; it must succeed. */
	if (!devPtr)
		return api_end(API_cudaFree, t0, cudaSuccess);
	return api_end(API_cudaFree, t0, from_cu(cuMemFree_v2(DPTR(devPtr))));
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	uint64_t t0 = api_begin();

	if (ptr && !size) {
		*ptr = NULL;
		return api_end(API_cudaMallocHost, t0, cudaSuccess);
	}
	return api_end(API_cudaMallocHost, t0, from_cu(cuMemAllocHost_v2(ptr, size)));
}

cudaError_t cudaFreeHost(void *ptr)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaFreeHost, t0, from_cu(cuMemFreeHost(ptr)));
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	uint64_t t0 = api_begin();

	if (pHost && !size) {
		*pHost = NULL;
		return api_end(API_cudaHostAlloc, t0, cudaSuccess);
	}
	return api_end(API_cudaHostAlloc, t0, from_cu(cuMemHostAlloc(pHost, size, flags)));
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaHostRegister, t0, from_cu(cuMemHostRegister_v2(ptr, size, flags)));
}

cudaError_t cudaHostUnregister(void *ptr)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaHostUnregister, t0, from_cu(cuMemHostUnregister(ptr)));
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaMemset, t0,
		       from_cu(cuMemsetD8_v2(DPTR(devPtr), (unsigned char)value, count)));
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaMemsetAsync, t0,
		       from_cu(cuMemsetD8Async(DPTR(devPtr), (unsigned char)value, count,
					       stream)));
}

/*
 * Pick the driver call the real runtime ends up in for each direction, so that probes on
 * cuMemcpyDtoH_v2 and friends fire under cudaMemcpy as they would on a real system.
 */
static cudaError_t memcpy_sync(void *dst, const void *src, size_t count,
			       enum cudaMemcpyKind kind, int ptds)
{
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return from_cu(ptds ? cuMemcpyHtoD_v2_ptds(DPTR(dst), src, count)
				    : cuMemcpyHtoD_v2(DPTR(dst), src, count));
	case cudaMemcpyDeviceToHost:
		return from_cu(ptds ? cuMemcpyDtoH_v2_ptds(dst, DPTR(src), count)
				    : cuMemcpyDtoH_v2(dst, DPTR(src), count));
	case cudaMemcpyHostToHost:
	case cudaMemcpyDeviceToDevice:
	case cudaMemcpyDefault:
		return from_cu(ptds ? cuMemcpy_ptds(DPTR(dst), DPTR(src), count)
				    : cuMemcpy(DPTR(dst), DPTR(src), count));
	default:
		return cudaErrorInvalidMemcpyDirection;
	}
}

static cudaError_t memcpy_async(void *dst, const void *src, size_t count,
				enum cudaMemcpyKind kind, cudaStream_t stream)
{
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return from_cu(cuMemcpyHtoDAsync_v2(DPTR(dst), src, count, stream));
	case cudaMemcpyDeviceToHost:
		return from_cu(cuMemcpyDtoHAsync_v2(dst, DPTR(src), count, stream));
	case cudaMemcpyHostToHost:
	case cudaMemcpyDeviceToDevice:
	case cudaMemcpyDefault:
		return from_cu(cuMemcpyAsync(DPTR(dst), DPTR(src), count, stream));
	default:
		return cudaErrorInvalidMemcpyDirection;
	}
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaMemcpy, t0, memcpy_sync(dst, src, count, kind, 0));
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaMemcpy_ptds, t0, memcpy_sync(dst, src, count, kind, 1));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
			    cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaMemcpyAsync, t0, memcpy_async(dst, src, count, kind, stream));
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
				 enum cudaMemcpyKind kind, cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaMemcpyAsync_ptsz, t0, memcpy_async(dst, src, count, kind, stream));
}

static cudaError_t memcpy_2d(void *dst, size_t dpitch, const void *src, size_t spitch,
			     size_t width, size_t height, enum cudaMemcpyKind kind, int ptds)
{
	CUDA_MEMCPY2D p = {
		.srcHost = src,
		.srcDevice = DPTR(src),
		.srcPitch = spitch,
		.dstHost = dst,
		.dstDevice = DPTR(dst),
		.dstPitch = dpitch,
		.WidthInBytes = width,
		.Height = height,
	};

	switch (kind) {
	case cudaMemcpyHostToHost:
		p.srcMemoryType = CU_MEMORYTYPE_HOST;
		p.dstMemoryType = CU_MEMORYTYPE_HOST;
		break;
	case cudaMemcpyHostToDevice:
		p.srcMemoryType = CU_MEMORYTYPE_HOST;
		p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		break;
	case cudaMemcpyDeviceToHost:
		p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
		p.dstMemoryType = CU_MEMORYTYPE_HOST;
		break;
	case cudaMemcpyDeviceToDevice:
		p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
		p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		break;
	case cudaMemcpyDefault:
		p.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
		p.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
		break;
	default:
		return cudaErrorInvalidMemcpyDirection;
	}
	if (height > 1 && (width > dpitch || width > spitch))
		return cudaErrorInvalidPitchValue;
	return from_cu(ptds ? cuMemcpy2D_v2_ptds(&p) : cuMemcpy2D_v2(&p));
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			 size_t height, enum cudaMemcpyKind kind)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaMemcpy2D, t0,
		       memcpy_2d(dst, dpitch, src, spitch, width, height, kind, 0));
}

cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
			      size_t width, size_t height, enum cudaMemcpyKind kind)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaMemcpy2D_ptds, t0,
		       memcpy_2d(dst, dpitch, src, spitch, width, height, kind, 1));
}

/* ---- execution ---- */

static int bad_geometry(dim3 g, dim3 b)
{
	return !g.x || !g.y || !g.z || !b.x || !b.y || !b.z;
}

/* func is passed through untouched: the fake driver has no modules to resolve it against. */
cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
			     size_t sharedMem, cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	if (bad_geometry(gridDim, blockDim))
		return api_end(API_cudaLaunchKernel, t0, cudaErrorInvalidConfiguration);
	return api_end(API_cudaLaunchKernel, t0,
		       from_cu(cuLaunchKernel((CUfunction)func, gridDim.x, gridDim.y, gridDim.z,
					      blockDim.x, blockDim.y, blockDim.z,
					      (unsigned int)sharedMem, stream, args, NULL)));
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				  size_t sharedMem, cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	if (bad_geometry(gridDim, blockDim))
		return api_end(API_cudaLaunchKernel_ptsz, t0, cudaErrorInvalidConfiguration);
	return api_end(API_cudaLaunchKernel_ptsz, t0,
		       from_cu(cuLaunchKernel_ptsz((CUfunction)func, gridDim.x, gridDim.y,
						   gridDim.z, blockDim.x, blockDim.y, blockDim.z,
						   (unsigned int)sharedMem, stream, args, NULL)));
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	uint64_t t0 = api_begin();
	CUlaunchConfig c;

	if (!config)
		return api_end(API_cudaLaunchKernelExC, t0, cudaErrorInvalidValue);
	if (bad_geometry(config->gridDim, config->blockDim))
		return api_end(API_cudaLaunchKernelExC, t0, cudaErrorInvalidConfiguration);
	c = (CUlaunchConfig){
		.gridDimX = config->gridDim.x, .gridDimY = config->gridDim.y,
		.gridDimZ = config->gridDim.z, .blockDimX = config->blockDim.x,
		.blockDimY = config->blockDim.y, .blockDimZ = config->blockDim.z,
		.sharedMemBytes = (unsigned int)config->dynamicSmemBytes, .hStream = config->stream,
	};
	return api_end(API_cudaLaunchKernelExC, t0,
		       from_cu(cuLaunchKernelEx(&c, (CUfunction)func, args, NULL)));
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaGraphLaunch, t0, from_cu(cuGraphLaunch(graphExec, stream)));
}

/* ---- streams ---- */

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaStreamCreate, t0,
		       from_cu(cuStreamCreate(pStream, CU_STREAM_DEFAULT)));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaStreamCreateWithFlags, t0, from_cu(cuStreamCreate(pStream, flags)));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaStreamDestroy, t0, from_cu(cuStreamDestroy_v2(stream)));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaStreamSynchronize, t0, from_cu(cuStreamSynchronize(stream)));
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaStreamSynchronize_ptsz, t0,
		       from_cu(cuStreamSynchronize_ptsz(stream)));
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaStreamQuery, t0, from_cu(cuStreamQuery(stream)));
}

/* ---- events ---- */

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaEventCreate, t0, from_cu(cuEventCreate(event, CU_EVENT_DEFAULT)));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaEventCreateWithFlags, t0, from_cu(cuEventCreate(event, flags)));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaEventRecord, t0, from_cu(cuEventRecord(event, stream)));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaEventSynchronize, t0, from_cu(cuEventSynchronize(event)));
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaEventQuery, t0, from_cu(cuEventQuery(event)));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaEventElapsedTime, t0, from_cu(cuEventElapsedTime(ms, start, end)));
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaEventDestroy, t0, from_cu(cuEventDestroy_v2(event)));
}

/* ---- errors and versions ---- */

static const struct {
	cudaError_t code;
	const char *name;
	const char *str;
} errors[] = {
	{ cudaSuccess, "cudaSuccess", "no error" },
	{ cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
	{ cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
	{ cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error" },
	{ cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
	  "invalid configuration argument" },
	{ cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument" },
	{ cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
	  "invalid copy direction for memcpy" },
	{ cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction",
	  "invalid device function" },
	{ cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
	{ cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
	{ cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
	  "invalid resource handle" },
	{ cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
	{ cudaErrorUnknown, "cudaErrorUnknown", "unknown error" },
};

static const char *error_lookup(cudaError_t error, int want_name)
{
	size_t i;

	for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == error)
			return want_name ? errors[i].name : errors[i].str;
	return "unrecognized error code";
}

cudaError_t cudaGetLastError(void)
{
	uint64_t t0 = api_begin();
	cudaError_t err = last_error;

	last_error = cudaSuccess;
	api_count(API_cudaGetLastError, t0);
	return err;
}

cudaError_t cudaPeekAtLastError(void)
{
	uint64_t t0 = api_begin();

	api_count(API_cudaPeekAtLastError, t0);
	return last_error;
}

const char *cudaGetErrorString(cudaError_t error)
{
	uint64_t t0 = api_begin();
	const char *s = error_lookup(error, 0);

	api_count(API_cudaGetErrorString, t0);
	return s;
}

const char *cudaGetErrorName(cudaError_t error)
{
	uint64_t t0 = api_begin();
	const char *s = error_lookup(error, 1);

	api_count(API_cudaGetErrorName, t0);
	return s;
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	uint64_t t0 = api_begin();
	cudaError_t err = cudaSuccess;

	if (runtimeVersion)
		*runtimeVersion = FAKECUDA_VERSION;
	else
		err = cudaErrorInvalidValue;
	return api_end(API_cudaRuntimeGetVersion, t0, err);
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	uint64_t t0 = api_begin();

	return api_end(API_cudaDriverGetVersion, t0, from_cu(cuDriverGetVersion(driverVersion)));
}

/* ---- statistics ---- */

/* "%p" in the path becomes the pid, so forked or spawned workers don't overwrite each other. */
static int stats_path(char *buf, size_t len, const char *tmpl)
{
	size_t n = 0;
	int w;

	for (; *tmpl; tmpl++) {
		if (tmpl[0] == '%' && tmpl[1] == 'p') {
			w = snprintf(buf + n, len - n, "%d", (int)getpid());
			if (w < 0 || (size_t)w >= len - n)
				return -1;
			n += w;
			tmpl++;
			continue;
		}
		if (n + 1 >= len)
			return -1;
		buf[n++] = *tmpl;
	}
	buf[n] = '\0';
	return 0;
}

/*
 * Written to a temporary name and renamed, so a test polling for the file never reads half
 * of it. Every API is listed, called or not, so a test can assert on a zero.
 */
__attribute__((destructor))
static void write_stats(void)
{
	const char *tmpl = getenv("FAKECUDA_STATS");
	char path[4096], tmp[4200];
	FILE *f;
	int i;

	if (!tmpl || !*tmpl)
		return;
	if (stats_path(path, sizeof(path), tmpl)) {
		fprintf(stderr, "fakecudart: FAKECUDA_STATS path too long\n");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "fakecudart: cannot write %s: %m\n", tmp);
		return;
	}
	fputs("{\n", f);
	for (i = 0; i < API_COUNT; i++)
		fprintf(f, "  \"%s\": {\"calls\": %llu, \"total_ns\": %llu}%s\n", api_names[i],
			(unsigned long long)__atomic_load_n(&stats[i].calls, __ATOMIC_RELAXED),
			(unsigned long long)__atomic_load_n(&stats[i].total_ns, __ATOMIC_RELAXED),
			i + 1 < API_COUNT ? "," : "");
	fputs("}\n", f);
	if (fclose(f) || rename(tmp, path)) {
		fprintf(stderr, "fakecudart: cannot write %s: %m\n", path);
		unlink(tmp);
	}
}
