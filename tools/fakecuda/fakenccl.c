// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A fake libnccl.so.2 for pipeprof's tests: NCCL's exported names and C signatures, each API
 * a weak ncclX with a strong pncclX alias at the same address as NCCL's NCCL_API macro makes
 * them. A collective blocks its calling thread on a condition variable until the fake "peer"
 * thread, after the simulated transfer time, signals it: off-CPU and woken by another thread,
 * as a rank's host thread waiting on the network would be. Inside ncclGroupStart/End the
 * collectives only queue their bytes and ncclGroupEnd waits for all of them.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4 } ncclResult_t;
typedef struct ncclComm *ncclComm_t;
typedef void *cudaStream_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclDataType_t;	/* nccl.h's values; see type_size() */
typedef int ncclRedOp_t;
typedef struct { size_t size; unsigned int magic, version; int blocking; } ncclConfig_t;

#define NCCL_VERSION_CODE 22105	/* 2.21.5 */

struct ncclComm {
	int nranks, rank;
};

#define NCCL_API(ret, func, ...)							\
	__attribute__((visibility("default"), alias(#func))) ret p##func(__VA_ARGS__); \
	__attribute__((visibility("default"), weak)) ret func(__VA_ARGS__)

/* ncclInt8/Char 0, Uint8 1, Int32/Int 2, Uint32 3, Int64 4, Uint64 5, Float16/Half 6,
 * Float32/Float 7, Float64/Double 8, Bfloat16 9, Float8e4m3 10, Float8e5m2 11. */
static size_t type_size(ncclDataType_t t)
{
	static const unsigned char sizes[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

	return t >= 0 && t < (int)sizeof(sizes) ? sizes[t] : 0;
}

/* FAKENCCL_LATENCY_US (default 200) per collective plus bytes / FAKENCCL_BYTES_PER_US
 * (default 1000, 1 GB/s). */
static long latency_us = -1, bytes_per_us = 1000;

static void read_env(void)
{
	const char *s;

	if (latency_us >= 0)
		return;
	s = getenv("FAKENCCL_BYTES_PER_US");
	if (s && atol(s) > 0)
		bytes_per_us = atol(s);
	s = getenv("FAKENCCL_LATENCY_US");
	latency_us = s ? atol(s) : 200;
}

/* A call waiting for the peer: done at `deadline` (CLOCK_MONOTONIC ns). */
struct request {
	uint64_t deadline;
	int done;
	struct request *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t posted = PTHREAD_COND_INITIALIZER, finished = PTHREAD_COND_INITIALIZER;
static struct request *queue;	/* deadlines in posting order, each after the one before */
static pthread_t peer;
static int peer_started;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void *peer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		struct request *r;
		struct timespec ts;

		while (!queue)
			pthread_cond_wait(&posted, &lock);
		r = queue;
		pthread_mutex_unlock(&lock);
		ts.tv_sec = r->deadline / 1000000000ull;
		ts.tv_nsec = r->deadline % 1000000000ull;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
			;
		pthread_mutex_lock(&lock);
		queue = r->next;
		r->done = 1;
		pthread_cond_broadcast(&finished);
	}
	return NULL;
}

/* Block the caller until the peer has moved `bytes`. */
static ncclResult_t transfer(size_t bytes)
{
	struct request r = { 0 }, **tail;

	read_env();
	pthread_mutex_lock(&lock);
	if (!peer_started) {
		if (pthread_create(&peer, NULL, peer_main, NULL)) {
			pthread_mutex_unlock(&lock);
			return ncclInvalidArgument;
		}
		pthread_detach(peer);
		peer_started = 1;
	}
	r.deadline = now_ns() + (uint64_t)latency_us * 1000 + bytes * 1000 / bytes_per_us;
	for (tail = &queue; *tail; tail = &(*tail)->next)
		;
	*tail = &r;
	pthread_cond_signal(&posted);
	while (!r.done)
		pthread_cond_wait(&finished, &lock);
	pthread_mutex_unlock(&lock);
	return ncclSuccess;
}

static __thread int group_depth;
static __thread size_t group_bytes;
static __thread int group_ops;

static ncclResult_t collective(size_t count, ncclDataType_t type, ncclComm_t comm, size_t mult)
{
	size_t size = type_size(type);

	if (!comm || !size)
		return ncclInvalidArgument;
	if (group_depth) {
		group_bytes += count * size * mult;
		group_ops++;
		return ncclSuccess;
	}
	return transfer(count * size * mult);
}

NCCL_API(ncclResult_t, ncclGetVersion, int *version);
ncclResult_t ncclGetVersion(int *version)
{
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

NCCL_API(const char *, ncclGetErrorString, ncclResult_t result);
const char *ncclGetErrorString(ncclResult_t result)
{
	return result == ncclSuccess ? "no error" : "invalid argument";
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId *id);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, "fakenccl", 8);
	return ncclSuccess;
}

static ncclResult_t comm_new(ncclComm_t *comm, int nranks, int rank)
{
	struct ncclComm *c;

	if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclInvalidArgument;
	c->nranks = nranks;
	c->rank = rank;
	*comm = c;
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId commId,
	 int rank);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	(void)commId;
	return comm_new(comm, nranks, rank);
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *comm, int nranks,
	 ncclUniqueId commId, int rank, ncclConfig_t *config);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
				    ncclConfig_t *config)
{
	(void)commId;
	(void)config;
	return comm_new(comm, nranks, rank);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	(void)devlist;
	for (int i = 0; i < ndev; i++)
		if (comm_new(&comms[i], ndev, i))
			return ncclInvalidArgument;
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	free(comm);
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	free(comm);
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int *count);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	*count = comm->nranks;
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int *rank);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	*rank = comm->rank;
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count,
	 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			   cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)op, (void)stream;
	return collective(count, datatype, comm, 1);
}

NCCL_API(ncclResult_t, ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount,
	 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)stream;
	return collective(sendcount, datatype, comm, comm ? comm->nranks : 0);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
	 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
			       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)op, (void)stream;
	return collective(recvcount, datatype, comm, 1);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count,
	 ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)root, (void)stream;
	return collective(count, datatype, comm, 1);
}

#ifndef FAKENCCL_NO_REDUCE	/* a library without one collective, for the tests */
NCCL_API(ncclResult_t, ncclReduce, const void *sendbuff, void *recvbuff, size_t count,
	 ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
			ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
			cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)op, (void)root, (void)stream;
	return collective(count, datatype, comm, 1);
}
#endif

NCCL_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype,
	 int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)peer, (void)stream;
	return collective(count, datatype, comm, 1);
}

NCCL_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype,
	 int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	(void)recvbuff, (void)peer, (void)stream;
	return collective(count, datatype, comm, 1);
}

NCCL_API(ncclResult_t, ncclGroupStart, void);
ncclResult_t ncclGroupStart(void)
{
	group_depth++;
	return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGroupEnd, void);
ncclResult_t ncclGroupEnd(void)
{
	size_t bytes;
	int ops;

	if (!group_depth)
		return ncclInvalidArgument;
	if (--group_depth)
		return ncclSuccess;
	bytes = group_bytes;
	ops = group_ops;
	group_bytes = 0;
	group_ops = 0;
	return ops ? transfer(bytes) : ncclSuccess;
}
