/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Fake CUDA driver (libcuda.so.1) for pipeprof's tests: a simulated GPU whose "device time"
 * is CLOCK_MONOTONIC. Work is never executed on a device; launching it only pushes out the time
 * at which its stream becomes idle, and the synchronising calls then make the calling thread
 * wait until that time, spinning, yielding or sleeping as the context's schedule flags say.
 * That gives tests host threads that stall inside the same symbols, for known amounts of
 * time, with the same on-CPU/off-CPU behaviour as a real driver.
 *
 * The timeline lives here rather than in the runtime because the real runtime is a client of
 * the driver: cudaStreamSynchronize waits inside cuStreamSynchronize, and pipeprof has to see
 * that nesting to avoid counting the wait twice.
 *
 * Exported functions never call each other: each one is a thin shell over static helpers, so
 * the only nesting the probes see is runtime -> driver, as with the real libraries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "fakegpu.h"

#define NSEC_PER_SEC	1000000000ULL
/* 10 GB/s: a byte costs a tenth of a nanosecond, so 10 MB take 1 ms. */
#define BYTES_PER_NS	10
/* What cudaMalloc guarantees; some callers check it. */
#define ALLOC_ALIGN	256

#define STREAM_MAGIC	0x7374726dU
#define EVENT_MAGIC	0x65766e74U

struct CUstream_st {
	unsigned int magic;
	unsigned int flags;
	uint64_t busy_until;
};

struct CUevent_st {
	unsigned int magic;
	unsigned int flags;
	int recorded;
	uint64_t at;
};

static struct {
	pthread_mutex_t lock;
	/* End of all queued work: what cuCtxSynchronize waits for. */
	uint64_t busy_until;
	/*
	 * End of the work on the legacy NULL stream and on every blocking stream. The legacy
	 * stream is ordered after all of it, and a sync on it waits for all of it.
	 */
	uint64_t blocking_until;
	/* End of the work on the legacy stream alone, which blocking streams queue behind. */
	uint64_t legacy_until;
	unsigned int flags;
	unsigned int default_flags;
	/* A real device's queue holds so many launches; a launch on a full one spins until there
	 * is room. Modelled as queued time: 0 (FAKECUDA_MAX_BACKLOG_MS unset) for no limit. */
	uint64_t max_backlog_ns;
} gpu = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/*
 * Read at first use, not at load, so that a test can set the variable after loading the
 * library (ctypes) but before touching the device, as with CUDA_* variables in the real one.
 */
static void init(void)
{
	const char *s = getenv("FAKECUDA_SCHEDULE");
	unsigned int flags = CU_CTX_SCHED_AUTO;

	if (s && *s) {
		if (!strcmp(s, "spin"))
			flags = CU_CTX_SCHED_SPIN;
		else if (!strcmp(s, "yield"))
			flags = CU_CTX_SCHED_YIELD;
		else if (!strcmp(s, "block"))
			flags = CU_CTX_SCHED_BLOCKING_SYNC;
		else
			fprintf(stderr, "fakecuda: ignoring FAKECUDA_SCHEDULE=%s "
				"(want spin, yield or block)\n", s);
	}
	gpu.default_flags = flags;
	gpu.flags = flags;
	s = getenv("FAKECUDA_MAX_BACKLOG_MS");
	if (s && *s)
		gpu.max_backlog_ns = (uint64_t)(strtod(s, NULL) * 1e6);
}

static void gpu_lock(void)
{
	pthread_once(&init_once, init);
	pthread_mutex_lock(&gpu.lock);
}

static void gpu_unlock(void)
{
	pthread_mutex_unlock(&gpu.lock);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* A runaway duration must not wrap into the past and make a sync return at once. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* Auto means spin, as the real driver picks when there are fewer contexts than CPUs. */
static unsigned int sched_mode(void)
{
	unsigned int mode;

	gpu_lock();
	mode = gpu.flags & CU_CTX_SCHED_MASK;
	gpu_unlock();
	return mode == CU_CTX_SCHED_AUTO ? CU_CTX_SCHED_SPIN : mode;
}

/*
 * The three ways a real driver waits, because pipeprof must tell them apart: spinning keeps
 * the thread on-CPU (and on-CPU samples land in the driver), yielding keeps it runnable, and
 * blocking sync puts it to sleep where only an off-CPU view sees the time.
 */
static void wait_until(uint64_t deadline, unsigned int mode)
{
	struct timespec ts;

	if (now_ns() >= deadline)
		return;

	switch (mode) {
	case CU_CTX_SCHED_BLOCKING_SYNC:
		ts.tv_sec = deadline / NSEC_PER_SEC;
		ts.tv_nsec = deadline % NSEC_PER_SEC;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		break;
	case CU_CTX_SCHED_YIELD:
		while (now_ns() < deadline)
			sched_yield();
		break;
	default:
		while (now_ns() < deadline)
			cpu_relax();
		break;
	}
}

/* The per-thread default stream shares the legacy stream's timeline; tests don't need both. */
static int is_default_stream(CUstream s)
{
	return !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

static int valid_stream(CUstream s)
{
	return is_default_stream(s) || s->magic == STREAM_MAGIC;
}

static int valid_event(CUevent e)
{
	return e && e->magic == EVENT_MAGIC;
}

/* Queues dur ns of work on s and returns when the device will have finished it. */
static CUresult enqueue(CUstream s, uint64_t dur, uint64_t *endp)
{
	uint64_t start, end;
	int blocking;

	if (!valid_stream(s))
		return CUDA_ERROR_INVALID_HANDLE;

	gpu_lock();
	start = now_ns();
	if (is_default_stream(s)) {
		start = max_u64(start, gpu.blocking_until);
		end = add_sat(start, dur);
		gpu.legacy_until = end;
		blocking = 1;
	} else {
		blocking = !(s->flags & CU_STREAM_NON_BLOCKING);
		start = max_u64(start, s->busy_until);
		if (blocking)
			start = max_u64(start, gpu.legacy_until);
		end = add_sat(start, dur);
		s->busy_until = end;
	}
	if (blocking)
		gpu.blocking_until = max_u64(gpu.blocking_until, end);
	gpu.busy_until = max_u64(gpu.busy_until, end);
	gpu_unlock();

	/* The queue is full: the launching thread spins (as the real driver does) until the
	 * device has worked it down to the limit. */
	if (gpu.max_backlog_ns)
		while (now_ns() + gpu.max_backlog_ns < end)
			;
	if (endp)
		*endp = end;
	return CUDA_SUCCESS;
}

static CUresult stream_idle_at(CUstream s, uint64_t *at)
{
	if (!valid_stream(s))
		return CUDA_ERROR_INVALID_HANDLE;

	gpu_lock();
	*at = is_default_stream(s) ? gpu.blocking_until : s->busy_until;
	gpu_unlock();
	return CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream s)
{
	uint64_t at;
	CUresult r;

	r = stream_idle_at(s, &at);
	if (r)
		return r;
	wait_until(at, sched_mode());
	return CUDA_SUCCESS;
}

static CUresult stream_query(CUstream s)
{
	uint64_t at;
	CUresult r;

	r = stream_idle_at(s, &at);
	if (r)
		return r;
	return now_ns() >= at ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/*
 * Copies happen on the host, in the calling thread, before their simulated cost is queued.
 * A host memmove runs at about the simulated 10 GB/s, so queueing first would let a large
 * async copy's device time expire while the call was still copying, and the stream would
 * look idle the moment cudaMemcpyAsync returned.
 */
static CUresult copy(void *dst, const void *src, size_t n, CUstream s, int sync)
{
	uint64_t end;
	CUresult r;

	if (n && (!dst || !src))
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_stream(s))
		return CUDA_ERROR_INVALID_HANDLE;

	if (n)
		memmove(dst, src, n);
	r = enqueue(s, n / BYTES_PER_NS, &end);
	if (r)
		return r;
	if (sync)
		wait_until(end, sched_mode());
	return CUDA_SUCCESS;
}

static const char *copy2d_base(CUmemorytype type, const void *host, CUdeviceptr dev)
{
	switch (type) {
	case CU_MEMORYTYPE_HOST:
		return host;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		return (const char *)(uintptr_t)dev;
	default:
		/* No CUDA arrays in a fake. */
		return NULL;
	}
}

static CUresult copy2d(const CUDA_MEMCPY2D *p)
{
	const char *src;
	char *dst;
	size_t total, row;
	uint64_t end;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!p->WidthInBytes || !p->Height)
		return CUDA_SUCCESS;

	src = copy2d_base(p->srcMemoryType, p->srcHost, p->srcDevice);
	dst = (char *)copy2d_base(p->dstMemoryType, p->dstHost, p->dstDevice);
	if (!src || !dst)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->Height > 1 && (p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes))
		return CUDA_ERROR_INVALID_VALUE;
	if (__builtin_mul_overflow(p->WidthInBytes, p->Height, &total))
		return CUDA_ERROR_INVALID_VALUE;

	src += p->srcY * p->srcPitch + p->srcXInBytes;
	dst += p->dstY * p->dstPitch + p->dstXInBytes;

	for (row = 0; row < p->Height; row++)
		memmove(dst + row * p->dstPitch, src + row * p->srcPitch, p->WidthInBytes);
	r = enqueue(NULL, total / BYTES_PER_NS, &end);
	if (r)
		return r;
	wait_until(end, sched_mode());
	return CUDA_SUCCESS;
}

static CUresult memset8(CUdeviceptr dst, unsigned char c, size_t n, CUstream s)
{
	if (n && !dst)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_stream(s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (n)
		memset((void *)(uintptr_t)dst, c, n);
	return enqueue(s, n / BYTES_PER_NS, NULL);
}

/*
 * One nanosecond per thread, so a test states a kernel's length in its launch geometry:
 * grid (1000,1,1) x block (1000,1,1) runs for 1 ms.
 */
static CUresult launch(unsigned int gx, unsigned int gy, unsigned int gz,
		       unsigned int bx, unsigned int by, unsigned int bz, CUstream s)
{
	unsigned int dims[6] = { gx, gy, gz, bx, by, bz };
	uint64_t dur = 1;
	int i;

	for (i = 0; i < 6; i++) {
		if (!dims[i])
			return CUDA_ERROR_INVALID_VALUE;
		if (__builtin_mul_overflow(dur, (uint64_t)dims[i], &dur))
			dur = UINT64_MAX;
	}
	return enqueue(s, dur, NULL);
}

static CUresult set_flags(unsigned int flags)
{
	unsigned int sched = flags & CU_CTX_SCHED_MASK;

	if (flags & ~CU_CTX_FLAGS_MASK)
		return CUDA_ERROR_INVALID_VALUE;
	if (sched != CU_CTX_SCHED_AUTO && sched != CU_CTX_SCHED_SPIN &&
	    sched != CU_CTX_SCHED_YIELD && sched != CU_CTX_SCHED_BLOCKING_SYNC)
		return CUDA_ERROR_INVALID_VALUE;

	gpu_lock();
	gpu.flags = flags;
	gpu_unlock();
	return CUDA_SUCCESS;
}

static unsigned int get_flags(void)
{
	unsigned int flags;

	gpu_lock();
	flags = gpu.flags;
	gpu_unlock();
	return flags;
}

static const struct {
	CUresult code;
	const char *name;
	const char *str;
} errors[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
	{ CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
	{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
	{ CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
	{ CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static CUresult error_lookup(CUresult error, const char **pStr, int want_name)
{
	size_t i;

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		if (errors[i].code == error) {
			*pStr = want_name ? errors[i].name : errors[i].str;
			return CUDA_SUCCESS;
		}
	}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- exported API ---- */

/* Nothing needs initialising, so calls made before cuInit work instead of failing. */
CUresult cuInit(unsigned int Flags)
{
	if (Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&init_once, init);
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = FAKECUDA_VERSION;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = 1;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	return error_lookup(error, pStr, 0);
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	return error_lookup(error, pStr, 1);
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	return set_flags(flags);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = get_flags();
	*active = 1;
	return CUDA_SUCCESS;
}

/* Forgets queued work, like destroying the context; stream and event handles stay usable. */
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	gpu_lock();
	gpu.busy_until = 0;
	gpu.blocking_until = 0;
	gpu.legacy_until = 0;
	gpu.flags = gpu.default_flags;
	gpu_unlock();
	return CUDA_SUCCESS;
}

CUresult cuCtxSetFlags(unsigned int flags)
{
	return set_flags(flags);
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = get_flags();
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	uint64_t at;

	gpu_lock();
	at = gpu.busy_until;
	gpu_unlock();
	wait_until(at, sched_mode());
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	CUstream s;

	if (!phStream || (Flags & ~CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->magic = STREAM_MAGIC;
	s->flags = Flags;
	*phStream = s;
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
	if (is_default_stream(hStream) || hStream->magic != STREAM_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	/* Queued work still counts towards busy_until, as it would still run on a device. */
	gpu_lock();
	hStream->magic = 0;
	gpu_unlock();
	free(hStream);
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
	return stream_sync(hStream);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	return stream_sync(hStream);
}

CUresult cuStreamQuery(CUstream hStream)
{
	return stream_query(hStream);
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	CUevent e;

	if (!phEvent || (Flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
				   CU_EVENT_INTERPROCESS)))
		return CUDA_ERROR_INVALID_VALUE;
	e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->magic = EVENT_MAGIC;
	e->flags = Flags;
	*phEvent = e;
	return CUDA_SUCCESS;
}

/* An event is zero-length work: it completes when everything queued before it has. */
CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	uint64_t end;
	CUresult r;

	if (!valid_event(hEvent))
		return CUDA_ERROR_INVALID_HANDLE;
	r = enqueue(hStream, 0, &end);
	if (r)
		return r;
	gpu_lock();
	hEvent->at = end;
	hEvent->recorded = 1;
	gpu_unlock();
	return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
	unsigned int mode;
	uint64_t at;
	int recorded;

	if (!valid_event(hEvent))
		return CUDA_ERROR_INVALID_HANDLE;
	gpu_lock();
	recorded = hEvent->recorded;
	at = hEvent->at;
	gpu_unlock();
	/* Never-recorded events count as complete, as in CUDA. */
	if (!recorded)
		return CUDA_SUCCESS;
	/* A blocking-sync event sleeps whatever the context's schedule says. */
	mode = (hEvent->flags & CU_EVENT_BLOCKING_SYNC) ? CU_CTX_SCHED_BLOCKING_SYNC
							 : sched_mode();
	wait_until(at, mode);
	return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent hEvent)
{
	uint64_t at;
	int recorded;

	if (!valid_event(hEvent))
		return CUDA_ERROR_INVALID_HANDLE;
	gpu_lock();
	recorded = hEvent->recorded;
	at = hEvent->at;
	gpu_unlock();
	if (!recorded)
		return CUDA_SUCCESS;
	return now_ns() >= at ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
	if (!valid_event(hEvent))
		return CUDA_ERROR_INVALID_HANDLE;
	gpu_lock();
	hEvent->magic = 0;
	gpu_unlock();
	free(hEvent);
	return CUDA_SUCCESS;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
	uint64_t ta, tb;
	int ra, rb;

	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_event(a) || !valid_event(b))
		return CUDA_ERROR_INVALID_HANDLE;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	gpu_lock();
	ra = a->recorded;
	rb = b->recorded;
	ta = a->at;
	tb = b->at;
	gpu_unlock();
	if (!ra || !rb)
		return CUDA_ERROR_INVALID_HANDLE;
	if (now_ns() < max_u64(ta, tb))
		return CUDA_ERROR_NOT_READY;
	*ms = (float)((double)(int64_t)(tb - ta) / 1e6);
	return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return elapsed(pMilliseconds, hStart, hEnd);
}

/* CUDA 13's cuda.h maps cuEventElapsedTime to this name; export both like the real driver. */
CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return elapsed(pMilliseconds, hStart, hEnd);
}

/* "Device" memory is host memory, so tests can look at what a copy did. */
static CUresult host_alloc(void **pp, size_t bytesize)
{
	if (!pp || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	if (posix_memalign(pp, ALLOC_ALIGN, bytesize))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	void *p;
	CUresult r;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	r = host_alloc(&p, bytesize);
	if (!r)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	free((void *)(uintptr_t)dptr);
	return CUDA_SUCCESS;
}

/*
 * Pinned host memory as the real driver maps it: a shared mapping of /dev/zero ("rw-s ...
 * /dev/zero (deleted)" in the maps), the pointer 0x200 into it, so that pipeprof finds memory
 * pinned before its attach as it does on a GPU machine. The header keeps the mapping's length.
 */
#define PINNED_HEADER 0x200

static CUresult pinned_alloc(void **pp, size_t bytesize)
{
	size_t len = bytesize + PINNED_HEADER;
	void *base;

	if (!pp || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(size_t *)base = len;
	*pp = (char *)base + PINNED_HEADER;
	return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return pinned_alloc(pp, bytesize);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	return pinned_alloc(pp, bytesize);
}

CUresult cuMemFreeHost(void *p)
{
	char *base = (char *)p - PINNED_HEADER;

	if (!p)
		return CUDA_SUCCESS;
	munmap(base, *(size_t *)base);
	return CUDA_SUCCESS;
}

/* Registering pins nothing here; the memory stays the caller's. */
CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	return p && bytesize ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemHostUnregister(void *p)
{
	return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#define DPTR(d) ((void *)(uintptr_t)(d))

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy(DPTR(dst), DPTR(src), ByteCount, NULL, 1);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy(DPTR(dst), DPTR(src), ByteCount, CU_STREAM_PER_THREAD, 1);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return copy(DPTR(dstDevice), srcHost, ByteCount, NULL, 1);
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return copy(DPTR(dstDevice), srcHost, ByteCount, CU_STREAM_PER_THREAD, 1);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy(dstHost, DPTR(srcDevice), ByteCount, NULL, 1);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy(dstHost, DPTR(srcDevice), ByteCount, CU_STREAM_PER_THREAD, 1);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy(DPTR(dstDevice), DPTR(srcDevice), ByteCount, NULL, 1);
}

CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy(DPTR(dstDevice), DPTR(srcDevice), ByteCount, CU_STREAM_PER_THREAD, 1);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
	return copy2d(pCopy);
}

CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
	return copy2d(pCopy);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	return copy(DPTR(dst), DPTR(src), ByteCount, hStream, 0);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
			      CUstream hStream)
{
	return copy(DPTR(dstDevice), srcHost, ByteCount, hStream, 0);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
			      CUstream hStream)
{
	return copy(dstHost, DPTR(srcDevice), ByteCount, hStream, 0);
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return memset8(dstDevice, uc, N, NULL);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	return memset8(dstDevice, uc, N, hStream);
}

/* f is not looked at: there are no modules to load functions from. */
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			void **kernelParams, void **extra)
{
	return launch(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
			  void **extra)
{
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
		      config->blockDimY, config->blockDimZ, config->hStream);
}

/* No graphs are built here: any non-NULL executable graph is an empty one, zero-length work
 * on the stream, so a test can count graph launches. */
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	if (!hGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	return enqueue(hStream, 0, NULL);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			     void **kernelParams, void **extra)
{
	return launch(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream);
}
