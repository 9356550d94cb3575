/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The fake runtime's other device allocators, each over its driver twin through the PLT as
 * the real runtime is (cudaMallocAsync -> cuMemAllocAsync, cudaMallocFromPoolAsync ->
 * cuMemAllocFromPoolAsync, cudaMallocManaged -> cuMemAllocManaged, cudaMallocPitch ->
 * cuMemAllocPitch_v2, cudaFreeAsync -> cuMemFreeAsync), so a tracer meets the real nesting.
 * The pointer is stored only once the driver returned, as the real runtime does.
 */
#include "fakecudart.h"

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	uint64_t t0 = api_begin();
	CUdeviceptr d;
	CUresult r;

	if (!devPtr)
		return api_end(API_cudaMallocAsync, t0, cudaErrorInvalidValue);
	if (!size) {
		*devPtr = NULL;
		return api_end(API_cudaMallocAsync, t0, cudaSuccess);
	}
	r = cuMemAllocAsync(&d, size, hStream);
	if (!r)
		*devPtr = (void *)(uintptr_t)d;
	return api_end(API_cudaMallocAsync, t0, from_cu(r));
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
				    cudaStream_t stream)
{
	uint64_t t0 = api_begin();
	CUdeviceptr d;
	CUresult r;

	if (!ptr || !memPool)
		return api_end(API_cudaMallocFromPoolAsync, t0, cudaErrorInvalidValue);
	if (!size) {
		*ptr = NULL;
		return api_end(API_cudaMallocFromPoolAsync, t0, cudaSuccess);
	}
	r = cuMemAllocFromPoolAsync(&d, size, memPool, stream);
	if (!r)
		*ptr = (void *)(uintptr_t)d;
	return api_end(API_cudaMallocFromPoolAsync, t0, from_cu(r));
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	uint64_t t0 = api_begin();
	CUdeviceptr d;
	CUresult r;

	if (!devPtr || !size)
		return api_end(API_cudaMallocManaged, t0, cudaErrorInvalidValue);
	r = cuMemAllocManaged(&d, size, flags);
	if (!r)
		*devPtr = (void *)(uintptr_t)d;
	return api_end(API_cudaMallocManaged, t0, from_cu(r));
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	uint64_t t0 = api_begin();
	CUdeviceptr d;
	size_t p;
	CUresult r;

	if (!devPtr || !pitch)
		return api_end(API_cudaMallocPitch, t0, cudaErrorInvalidValue);
	if (!width || !height) {
		*devPtr = NULL;
		*pitch = 0;
		return api_end(API_cudaMallocPitch, t0, cudaSuccess);
	}
	r = cuMemAllocPitch_v2(&d, &p, width, height, 4);
	if (!r) {
		*devPtr = (void *)(uintptr_t)d;
		*pitch = p;
	}
	return api_end(API_cudaMallocPitch, t0, from_cu(r));
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	uint64_t t0 = api_begin();

	if (!devPtr)
		return api_end(API_cudaFreeAsync, t0, cudaSuccess);
	return api_end(API_cudaFreeAsync, t0, from_cu(cuMemFreeAsync(DPTR(devPtr), hStream)));
}
