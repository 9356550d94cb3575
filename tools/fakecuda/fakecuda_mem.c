/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The fake driver's other device allocators: stream-ordered (cuMemAllocAsync), from a pool,
 * managed and pitched. "Device" memory is host memory, as for cuMemAlloc_v2, and the
 * stream-ordered ones allocate and free at once: nothing here queues work. Each allocates by
 * itself rather than through the exported cuMemAlloc_v2: a call through the PLT would show a
 * tracer a nested driver allocation the real driver never makes.
 */
#include <stdint.h>
#include <stdlib.h>
#include "fakegpu.h"

/* What cudaMalloc guarantees, as fakecuda.c's allocator. */
#define ALLOC_ALIGN	256
/* Rows of a pitched allocation start this far apart at least (the real driver's is the
 * device's texture pitch alignment, 512 on current GPUs). */
#define PITCH_ALIGN	512

static CUresult dev_alloc(CUdeviceptr *dptr, size_t bytesize)
{
	void *p;

	if (!dptr || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	if (posix_memalign(&p, ALLOC_ALIGN, bytesize))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return dev_alloc(dptr, bytesize);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
				 CUstream hStream)
{
	return dev_alloc(dptr, bytesize);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	return dev_alloc(dptr, bytesize);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
			    unsigned int ElementSizeBytes)
{
	size_t pitch = (WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
	CUresult r;

	if (!pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	r = dev_alloc(dptr, pitch * Height);
	if (!r)
		*pPitch = pitch;
	return r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	free((void *)(uintptr_t)dptr);
	return CUDA_SUCCESS;
}
