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
};

const int gpu_api_count = sizeof(gpu_apis) / sizeof(gpu_apis[0]);

_Static_assert(sizeof(gpu_apis) / sizeof(gpu_apis[0]) < PP_SELFTEST_API,
	       "API ids must stay below the self-test cookie");
