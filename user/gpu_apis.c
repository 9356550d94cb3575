// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "gpu_apis.h"
#include "pipeprof.h"

/*
 * Calls that make the host thread wait for the device. cudaMemcpy* without Async block until
 * the copy (and the work queued before it) is done; the _ptsz/_ptds twins are what code built
 * with per-thread default streams calls. The driver twins catch runtimes linked statically.
 * Device-to-device and peer copies are left out: CUDA's API synchronization behaviour says
 * they return without waiting for the device.
 */
const struct gpu_api gpu_apis[] = {
	{ "cudaStreamSynchronize", LIB_CUDART },
	{ "cudaStreamSynchronize_ptsz", LIB_CUDART },
	{ "cudaDeviceSynchronize", LIB_CUDART },
	{ "cudaEventSynchronize", LIB_CUDART },
	{ "cudaMemcpy", LIB_CUDART },
	{ "cudaMemcpy_ptds", LIB_CUDART },
	{ "cudaMemcpy2D", LIB_CUDART },
	{ "cudaMemcpy2D_ptds", LIB_CUDART },
	{ "cudaMemcpy3D", LIB_CUDART },
	{ "cudaMemcpy3D_ptds", LIB_CUDART },
	{ "cudaMemcpyFromSymbol", LIB_CUDART },
	{ "cudaMemcpyFromSymbol_ptds", LIB_CUDART },
	{ "cudaMemcpyToSymbol", LIB_CUDART },
	{ "cudaMemcpyToSymbol_ptds", LIB_CUDART },
	{ "cuStreamSynchronize", LIB_CUDA },
	{ "cuStreamSynchronize_ptsz", LIB_CUDA },
	{ "cuCtxSynchronize", LIB_CUDA },
	{ "cuEventSynchronize", LIB_CUDA },
	{ "cuMemcpy", LIB_CUDA },
	{ "cuMemcpy_ptds", LIB_CUDA },
	{ "cuMemcpyDtoH_v2", LIB_CUDA },
	{ "cuMemcpyDtoH_v2_ptds", LIB_CUDA },
	{ "cuMemcpyHtoD_v2", LIB_CUDA },
	{ "cuMemcpyHtoD_v2_ptds", LIB_CUDA },
	{ "cuMemcpy2D_v2", LIB_CUDA },
	{ "cuMemcpy3D_v2", LIB_CUDA },

	/*
	 * `pipeprof hist launch` and `memcpy`, and the report's steps. The runtime reaches the
	 * driver for each of these. Launches are probed in both, and a driver launch made from
	 * inside the runtime is not counted again (gpumem.bpf.c): Triton and torch.compile launch
	 * through the driver directly. A process that maps libcudart gets only the runtime's copy
	 * probes (tracer_attach.c); the driver's serve processes that use it alone.
	 */
	{ "cudaLaunchKernel", LIB_CUDART, GPU_LAUNCH },
	{ "cudaLaunchKernel_ptsz", LIB_CUDART, GPU_LAUNCH },
	{ "cudaLaunchKernelExC", LIB_CUDART, GPU_LAUNCH },
	{ "cudaLaunchKernelExC_ptsz", LIB_CUDART, GPU_LAUNCH },
	{ "cudaLaunchCooperativeKernel", LIB_CUDART, GPU_LAUNCH },
	{ "cudaGraphLaunch", LIB_CUDART, GPU_LAUNCH },
	{ "cudaGraphLaunch_ptsz", LIB_CUDART, GPU_LAUNCH },
	{ "cuLaunchKernel", LIB_CUDA, GPU_LAUNCH },
	{ "cuLaunchKernel_ptsz", LIB_CUDA, GPU_LAUNCH },
	{ "cuLaunchKernelEx", LIB_CUDA, GPU_LAUNCH },
	{ "cuLaunchKernelEx_ptsz", LIB_CUDA, GPU_LAUNCH },
	{ "cuLaunchCooperativeKernel", LIB_CUDA, GPU_LAUNCH },
	{ "cuGraphLaunch", LIB_CUDA, GPU_LAUNCH },
	{ "cuGraphLaunch_ptsz", LIB_CUDA, GPU_LAUNCH },

	{ "cudaMemcpy", LIB_CUDART, GPU_COPY_SYNC, PP_COPY_DIR_FROM_ARG },
	{ "cudaMemcpy_ptds", LIB_CUDART, GPU_COPY_SYNC, PP_COPY_DIR_FROM_ARG },
	{ "cudaMemcpyAsync", LIB_CUDART, GPU_COPY, PP_COPY_DIR_FROM_ARG },
	{ "cudaMemcpyAsync_ptsz", LIB_CUDART, GPU_COPY, PP_COPY_DIR_FROM_ARG },
	{ "cuMemcpy", LIB_CUDA, GPU_COPY_SYNC, PP_COPY_DEFAULT },
	{ "cuMemcpy_ptds", LIB_CUDA, GPU_COPY_SYNC, PP_COPY_DEFAULT },
	{ "cuMemcpyHtoD_v2", LIB_CUDA, GPU_COPY_SYNC, PP_COPY_HTOD },
	{ "cuMemcpyHtoD_v2_ptds", LIB_CUDA, GPU_COPY_SYNC, PP_COPY_HTOD },
	{ "cuMemcpyDtoH_v2", LIB_CUDA, GPU_COPY_SYNC, PP_COPY_DTOH },
	{ "cuMemcpyDtoH_v2_ptds", LIB_CUDA, GPU_COPY_SYNC, PP_COPY_DTOH },
	{ "cuMemcpyDtoD_v2", LIB_CUDA, GPU_COPY, PP_COPY_DTOD },
	{ "cuMemcpyDtoD_v2_ptds", LIB_CUDA, GPU_COPY, PP_COPY_DTOD },
	{ "cuMemcpyAsync", LIB_CUDA, GPU_COPY, PP_COPY_DEFAULT },
	{ "cuMemcpyAsync_ptsz", LIB_CUDA, GPU_COPY, PP_COPY_DEFAULT },
	{ "cuMemcpyHtoDAsync_v2", LIB_CUDA, GPU_COPY, PP_COPY_HTOD },
	{ "cuMemcpyHtoDAsync_v2_ptsz", LIB_CUDA, GPU_COPY, PP_COPY_HTOD },
	{ "cuMemcpyDtoHAsync_v2", LIB_CUDA, GPU_COPY, PP_COPY_DTOH },
	{ "cuMemcpyDtoHAsync_v2_ptsz", LIB_CUDA, GPU_COPY, PP_COPY_DTOH },

	/* Pinned host memory (the report's steps), in both libraries: nested calls store the
	 * same region. */
	{ "cudaHostAlloc", LIB_CUDART, GPU_HOST_ALLOC },
	{ "cudaMallocHost", LIB_CUDART, GPU_HOST_ALLOC },
	{ "cudaHostRegister", LIB_CUDART, GPU_HOST_REGISTER },
	{ "cudaFreeHost", LIB_CUDART, GPU_HOST_FREE },
	{ "cudaHostUnregister", LIB_CUDART, GPU_HOST_FREE },
	{ "cuMemHostAlloc", LIB_CUDA, GPU_HOST_ALLOC },
	{ "cuMemAllocHost_v2", LIB_CUDA, GPU_HOST_ALLOC },
	{ "cuMemAllocHost", LIB_CUDA, GPU_HOST_ALLOC },
	{ "cuMemHostRegister_v2", LIB_CUDA, GPU_HOST_REGISTER },
	{ "cuMemHostRegister", LIB_CUDA, GPU_HOST_REGISTER },
	{ "cuMemFreeHost", LIB_CUDA, GPU_HOST_FREE },
	{ "cuMemHostUnregister", LIB_CUDA, GPU_HOST_FREE },

	/* Device memory (the report's steps), in both libraries: a driver call the runtime makes
	 * is the runtime's (devmem.bpf.c), and Triton or CuPy may allocate through the driver. */
	{ "cudaMalloc", LIB_CUDART, GPU_DEV_ALLOC },
	{ "cudaMallocAsync", LIB_CUDART, GPU_DEV_ALLOC },
	{ "cudaMallocAsync_ptsz", LIB_CUDART, GPU_DEV_ALLOC },
	{ "cudaMallocFromPoolAsync", LIB_CUDART, GPU_DEV_ALLOC },
	{ "cudaMallocFromPoolAsync_ptsz", LIB_CUDART, GPU_DEV_ALLOC },
	{ "cudaMallocManaged", LIB_CUDART, GPU_DEV_ALLOC },
	{ "cudaMallocPitch", LIB_CUDART, GPU_DEV_ALLOC_PITCH },
	{ "cudaFree", LIB_CUDART, GPU_DEV_FREE },
	{ "cudaFreeAsync", LIB_CUDART, GPU_DEV_FREE },
	{ "cudaFreeAsync_ptsz", LIB_CUDART, GPU_DEV_FREE },
	{ "cuMemAlloc_v2", LIB_CUDA, GPU_DEV_ALLOC },
	{ "cuMemAllocAsync", LIB_CUDA, GPU_DEV_ALLOC },
	{ "cuMemAllocAsync_ptsz", LIB_CUDA, GPU_DEV_ALLOC },
	{ "cuMemAllocFromPoolAsync", LIB_CUDA, GPU_DEV_ALLOC },
	{ "cuMemAllocFromPoolAsync_ptsz", LIB_CUDA, GPU_DEV_ALLOC },
	{ "cuMemAllocManaged", LIB_CUDA, GPU_DEV_ALLOC },
	{ "cuMemAllocPitch_v2", LIB_CUDA, GPU_DEV_ALLOC_PITCH },
	{ "cuMemFree_v2", LIB_CUDA, GPU_DEV_FREE },
	{ "cuMemFreeAsync", LIB_CUDA, GPU_DEV_FREE },
	{ "cuMemFreeAsync_ptsz", LIB_CUDA, GPU_DEV_FREE },

	/*
	 * NCCL: each API is a weak nccl* with a pncclX alias at the same address (NCCL's
	 * NCCL_API macro), so only the nccl* name is probed. Inside ncclGroupStart/End the
	 * collectives return at once, and ncclGroupEnd waits for them.
	 */
	{ "ncclAllReduce", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_ALL_REDUCE },
	{ "ncclAllGather", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_ALL_GATHER },
	{ "ncclReduceScatter", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_REDUCE_SCATTER },
	{ "ncclBroadcast", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_BROADCAST },
	{ "ncclReduce", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_REDUCE },
	{ "ncclSend", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_SEND },
	{ "ncclRecv", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_RECV },
	{ "ncclGroupStart", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_GROUP_START },
	{ "ncclGroupEnd", LIB_NCCL, NCCL_CALL, .nccl_op = PP_NCCL_GROUP_END },
	{ "ncclCommInitRank", LIB_NCCL, NCCL_COMM_INIT, .nccl_op = PP_NCCL_COMM_INIT },
	{ "ncclCommInitRankConfig", LIB_NCCL, NCCL_COMM_INIT, .nccl_op = PP_NCCL_COMM_INIT },
	{ "ncclCommInitAll", LIB_NCCL, NCCL_COMM_INIT, .nccl_op = PP_NCCL_COMM_INIT_ALL },
	{ "ncclCommDestroy", LIB_NCCL, NCCL_COMM_FREE, .nccl_op = PP_NCCL_COMM_FREE },
	{ "ncclCommAbort", LIB_NCCL, NCCL_COMM_FREE, .nccl_op = PP_NCCL_COMM_FREE },
};

const int gpu_api_count = sizeof(gpu_apis) / sizeof(gpu_apis[0]);
const int gpu_sync_api_count = 26;
_Static_assert(26 <= PP_MAX_SYNC_APIS, "sync APIs are counted per step in an array of this size");

const char *copy_dir_name(unsigned int dir)
{
	static const char *const names[PP_NR_COPY_DIRS] = { "HtoH", "HtoD", "DtoH", "DtoD", "default" };

	return dir < PP_NR_COPY_DIRS ? names[dir] : "?";
}

const char *nccl_op_name(unsigned int op)
{
	for (int i = gpu_sync_api_count; i < gpu_api_count; i++)
		if (gpu_apis[i].class == NCCL_CALL && gpu_apis[i].nccl_op == op)
			return gpu_apis[i].name;
	return "?";
}

_Static_assert(sizeof(gpu_apis) / sizeof(gpu_apis[0]) < PP_SELFTEST_API,
	       "API ids must stay below the self-test cookie");
_Static_assert(PP_SELFTEST_API <= 0xff, "API ids must fit the cookie's low byte");
