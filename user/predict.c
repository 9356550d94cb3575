// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The pipeline model (predict.h): rates in units of today's steps/s. */
#include <stdio.h>
#include <string.h>
#include "predict.h"

static const char *const limit_names[NR_LIMITS] = {
	[LIMIT_NONE] = "none", [LIMIT_TRAINER] = "trainer", [LIMIT_WORKERS] = "workers",
	[LIMIT_CPUS] = "cpus",
};

const char *predict_limit_name(enum predict_limit limit)
{
	return limit < NR_LIMITS ? limit_names[limit] : "?";
}

static double clamp(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* The smallest of the limits that are set (0 means "sets none"). */
static double min_limit(double trainer, double workers, double cpus, enum predict_limit *which)
{
	double best = 0;

	*which = LIMIT_NONE;
	if (trainer > 0) {
		best = trainer;
		*which = LIMIT_TRAINER;
	}
	if (workers > 0 && (!best || workers < best)) {
		best = workers;
		*which = LIMIT_WORKERS;
	}
	if (cpus > 0 && (!best || cpus < best)) {
		best = cpus;
		*which = LIMIT_CPUS;
	}
	return best;
}

void pipeline_model_build(struct pipeline_model *m, const struct pipeline_inputs *in)
{
	memset(m, 0, sizeof(*m));
	m->in = *in;
	m->job_cpus = in->trainer_cpus + in->helper_cpus + in->worker_cpus;
	m->cpu_known = in->cpu_busy >= 0 && in->ncpus > 0;
	if (m->cpu_known) {
		double busy = clamp(in->cpu_busy, 0, 1) * in->ncpus;

		m->idle_cpus = in->ncpus - busy;
		/* The job's threads are counted by the scheduler's clock and the machine's by
		 * /proc/stat's ticks: the difference is noise, never negative load. */
		m->other_cpus = busy > m->job_cpus ? busy - m->job_cpus : 0;
		m->avail_cpus = clamp(m->idle_cpus + m->job_cpus, 0, in->ncpus);
	}
	if (in->trainer_own > 0)
		m->limit_trainer = 1.0 / clamp(in->trainer_own, 1e-6, 1);
	if (in->workers > 0 && in->worker_loop_cpus > 0)
		m->limit_workers = in->workers / in->worker_loop_cpus;
	if (m->cpu_known && m->job_cpus > 0)
		m->limit_cpus = m->avail_cpus / m->job_cpus;
	m->rate = min_limit(m->limit_trainer, m->limit_workers, m->limit_cpus, &m->rate_limit);
	m->fits = m->rate >= PREDICT_FIT_LO && m->rate <= PREDICT_FIT_HI;
}

bool pipeline_no_idle_cpu(const struct pipeline_model *m)
{
	return m->cpu_known && m->idle_cpus < PREDICT_IDLE_CPU;
}

double pipeline_rate_with_workers(const struct pipeline_model *m, int k, enum predict_limit *limit)
{
	double workers = m->in.worker_loop_cpus > 0 ? k / m->in.worker_loop_cpus : 0;

	return min_limit(m->limit_trainer, workers, m->limit_cpus, limit);
}

static struct prediction *add_prediction(struct pipeline_model *m, const char *id,
					 const char *knob, int from, int to)
{
	struct prediction *p;

	if (m->nr_predictions >= MAX_PREDICTIONS)
		return NULL;
	p = &m->predictions[m->nr_predictions++];
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->knob = knob;
	p->from = from;
	p->to = to;
	return p;
}

/* The CPUs would be the limit and other processes hold some: another runnable thread of the
 * job takes turns from theirs, as much as the scheduler gives (their priorities, cgroups), and
 * the job's own threads queue behind each other, the trainer on its critical path among them.
 * Measured on the VM beside a job holding one CPU: from 0.76x to 1.02x. Only the bound stands:
 * the rate with the whole machine. */
static void competing(const struct pipeline_model *m, struct prediction *p, int to)
{
	const struct pipeline_inputs *in = &m->in;
	double workers = to / in->worker_loop_cpus, all = in->ncpus / m->job_cpus;
	enum predict_limit which;

	p->bound = min_limit(m->limit_trainer, workers, all, &which) / m->rate;
	p->speedup = 0;
	snprintf(p->withheld, sizeof(p->withheld), "the CPUs would be the limit and other processes "
		 "use %.1f of them: what another worker gets of theirs, and how long the job's own "
		 "threads queue behind it, is the scheduler's call; at most %.2fx, with the whole "
		 "machine", m->other_cpus, p->bound);
}

const struct prediction *pipeline_predict_workers(struct pipeline_model *m, int to)
{
	const struct pipeline_inputs *in = &m->in;
	struct prediction *p = add_prediction(m, "num_workers", "num_workers", in->workers, to);

	if (!p)
		return NULL;
	if (in->workers <= 0 || in->worker_loop_cpus <= 0)
		snprintf(p->withheld, sizeof(p->withheld), "no DataLoader worker was seen computing: "
			 "there is no cost per batch to scale");
	else if (!m->cpu_known)
		snprintf(p->withheld, sizeof(p->withheld), "the machine's CPU use over the window is "
			 "unknown, so is what the workers could use");
	else if (in->worker_loop_io / in->workers > PREDICT_WORKER_IO)
		snprintf(p->withheld, sizeof(p->withheld), "the workers wait on storage %.0f%% of "
			 "their time: what more reads in flight buy depends on the storage, which the "
			 "model does not have", 100 * in->worker_loop_io / in->workers);
	else if (m->rate > PREDICT_FIT_HI)
		snprintf(p->withheld, sizeof(p->withheld), "the model allows %.2fx today's rate: "
			 "neither the workers (on-CPU %.0f%%) nor the trainer nor the CPUs explain its "
			 "wait for data, so something unmodelled (the hand-off, collate, a lock) limits "
			 "it", m->rate, 100 * in->worker_loop_cpus / in->workers);
	else if (m->rate < PREDICT_FIT_LO)
		snprintf(p->withheld, sizeof(p->withheld), "the measurements do not add up: the "
			 "model allows only %.2fx today's rate", m->rate);
	if (p->withheld[0])
		return p;
	p->speedup = pipeline_rate_with_workers(m, to, &p->limit) / m->rate;
	if (p->limit == LIMIT_CPUS && m->other_cpus >= PREDICT_OTHER_CPU)
		competing(m, p, to);
	return p;
}

int pipeline_workers_to_saturate(const struct pipeline_model *m)
{
	double cap, need;
	enum predict_limit which;
	int k;

	if (!m->fits || m->in.workers <= 0 || m->in.worker_loop_cpus <= 0)
		return 0;
	cap = min_limit(m->limit_trainer, 0, m->limit_cpus, &which);
	if (cap <= 0)
		return PREDICT_MAX_WORKERS;
	/* k workers allow k / worker_loop_cpus; the rest allow cap. */
	need = cap * m->in.worker_loop_cpus;
	if (need >= PREDICT_MAX_WORKERS)
		return PREDICT_MAX_WORKERS;
	/* the smallest whole k >= need */
	k = (int)need;
	if (k < need - 1e-9)
		k++;
	if (k < m->in.workers)
		k = m->in.workers;
	return k;
}

const struct prediction *pipeline_predict_threads(struct pipeline_model *m, int to)
{
	const struct pipeline_inputs *in = &m->in;
	struct prediction *p = add_prediction(m, "intra_op_threads", "torch.set_num_threads",
					      in->compute_threads, to);
	double f = clamp(in->trainer_running, 0, 1);

	if (!p)
		return NULL;
	p->limit = LIMIT_NONE;
	if (pipeline_no_idle_cpu(m)) {
		p->bound = 1.0;
		snprintf(p->withheld, sizeof(p->withheld), "no CPU is idle: another compute thread "
			 "would only take turns with this one");
		return p;
	}
	if (in->compute_threads != 1 || to <= 1) {
		snprintf(p->withheld, sizeof(p->withheld), "%d threads of the trainer's process "
			 "compute already: the trace does not separate their parallel work from "
			 "OpenMP's spinning", in->compute_threads);
		return p;
	}
	/* Amdahl with every on-CPU moment of the trainer parallel: the most it could be. */
	p->bound = 1.0 / ((1 - f) + f / to);
	snprintf(p->withheld, sizeof(p->withheld), "one compute thread: the trace cannot show how "
		 "much of the step would run in parallel (large tensor ops and convolutions do; the "
		 "Python between ops, small ops and a single-threaded BLAS do not)");
	return p;
}

double pipeline_threads_bound(double running, double serial, int to)
{
	double f = clamp(running, 0, 1), q = clamp(serial, 0, 1);

	if (to < 1)
		to = 1;
	return 1.0 / ((1 - f) + f * (q + (1 - q) / to));
}
