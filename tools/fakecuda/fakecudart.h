/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The fake runtime's own: its API table (for FAKECUDA_STATS) and the bookkeeping every call
 * does, shared by its source files and exported by none. */
#ifndef __FAKECUDART_H
#define __FAKECUDART_H

#include <stdint.h>
#include "fakegpu.h"

#define RT_APIS(X)			\
	X(cudaGetDeviceCount)		\
	X(cudaSetDevice)		\
	X(cudaGetDevice)		\
	X(cudaSetDeviceFlags)		\
	X(cudaGetDeviceFlags)		\
	X(cudaDeviceSynchronize)	\
	X(cudaDeviceReset)		\
	X(cudaMalloc)			\
	X(cudaFree)			\
	X(cudaMallocAsync)		\
	X(cudaMallocFromPoolAsync)	\
	X(cudaMallocManaged)		\
	X(cudaMallocPitch)		\
	X(cudaFreeAsync)		\
	X(cudaMallocHost)		\
	X(cudaFreeHost)			\
	X(cudaHostAlloc)		\
	X(cudaMemset)			\
	X(cudaMemsetAsync)		\
	X(cudaMemcpy)			\
	X(cudaMemcpy_ptds)		\
	X(cudaMemcpyAsync)		\
	X(cudaMemcpyAsync_ptsz)		\
	X(cudaMemcpy2D)			\
	X(cudaMemcpy2D_ptds)		\
	X(cudaLaunchKernel)		\
	X(cudaLaunchKernel_ptsz)	\
	X(cudaLaunchKernelExC)		\
	X(cudaGraphLaunch)		\
	X(cudaHostRegister)		\
	X(cudaHostUnregister)		\
	X(cudaStreamCreate)		\
	X(cudaStreamCreateWithFlags)	\
	X(cudaStreamDestroy)		\
	X(cudaStreamSynchronize)	\
	X(cudaStreamSynchronize_ptsz)	\
	X(cudaStreamQuery)		\
	X(cudaEventCreate)		\
	X(cudaEventCreateWithFlags)	\
	X(cudaEventRecord)		\
	X(cudaEventSynchronize)		\
	X(cudaEventQuery)		\
	X(cudaEventElapsedTime)		\
	X(cudaEventDestroy)		\
	X(cudaGetLastError)		\
	X(cudaPeekAtLastError)		\
	X(cudaGetErrorString)		\
	X(cudaGetErrorName)		\
	X(cudaRuntimeGetVersion)	\
	X(cudaDriverGetVersion)

enum api_id {
#define X(name) API_##name,
	RT_APIS(X)
#undef X
	API_COUNT,
};

#define FAKECUDART_HIDDEN __attribute__((visibility("hidden")))

/* At every call's start (initialises the driver once) and end (counts it, keeps its error). */
FAKECUDART_HIDDEN uint64_t api_begin(void);
FAKECUDART_HIDDEN cudaError_t api_end(enum api_id id, uint64_t t0, cudaError_t err);

/* The driver's codes are the runtime's for every error the fakes produce. */
static inline cudaError_t from_cu(CUresult r)
{
	return (cudaError_t)r;
}

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

#endif /* __FAKECUDART_H */
