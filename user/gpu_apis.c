// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "gpu_apis.h"
#include "pipeprof.h"

/*
 * Calls that make the host thread wait for the device. cudaMemcpy* without Async block until
 * the copy (and the work queued before it) is done; the _ptsz/_ptds twins are what code built
 * with per-thread default streams calls. The driver twins catch runtimes linked statically.
 */
const struct gpu_api gpu_apis[] = {
	{ "cudaStreamSynchronize", LIB_CUDART, GPU_API_SYNC },
	{ "cudaStreamSynchronize_ptsz", LIB_CUDART, GPU_API_SYNC },
	{ "cudaDeviceSynchronize", LIB_CUDART, GPU_API_SYNC },
	{ "cudaEventSynchronize", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpy", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpy_ptds", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpy2D", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpy2D_ptds", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpy3D", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpy3D_ptds", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpyFromSymbol", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpyFromSymbol_ptds", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpyToSymbol", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpyToSymbol_ptds", LIB_CUDART, GPU_API_SYNC },
	{ "cudaMemcpyPeer", LIB_CUDART, GPU_API_SYNC },
	{ "cuStreamSynchronize", LIB_CUDA, GPU_API_SYNC },
	{ "cuStreamSynchronize_ptsz", LIB_CUDA, GPU_API_SYNC },
	{ "cuCtxSynchronize", LIB_CUDA, GPU_API_SYNC },
	{ "cuEventSynchronize", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpy", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpy_ptds", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpyDtoH_v2", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpyDtoH_v2_ptds", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpyHtoD_v2", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpyHtoD_v2_ptds", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpyDtoD_v2", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpyDtoD_v2_ptds", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpy2D_v2", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpy3D_v2", LIB_CUDA, GPU_API_SYNC },
	{ "cuMemcpyPeer", LIB_CUDA, GPU_API_SYNC },
};

const int gpu_api_count = sizeof(gpu_apis) / sizeof(gpu_apis[0]);

_Static_assert(sizeof(gpu_apis) / sizeof(gpu_apis[0]) < PP_SELFTEST_API,
	       "API ids must stay below the self-test cookie");

int gpu_api_find(const char *name)
{
	for (int i = 0; i < gpu_api_count; i++)
		if (!strcmp(gpu_apis[i].name, name))
			return i;
	return -1;
}
