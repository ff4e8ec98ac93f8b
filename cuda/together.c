/*
 * together.c - work of several GPUs at once, from one PostgreSQL backend: a
 * thread a job, while the calling thread (the backend's own, the only one
 * that may run its interrupt callback, which may longjmp) polls for a
 * pending interrupt.  The jobs never call back into the caller; they look at
 * the stop flag between their pieces of work (a part's step, a block of a
 * product) and leave when it is set.  Used by parts.c (a k-means step over
 * parts on several GPUs) and matmul.c (a product split by rows).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "compute_internal.h"

typedef struct together
{
	pggpu_job_fn job;
	void	   *arg;
	pggpu_stop *stop;
	int			active;			/* jobs not done (under mu) */
	pthread_mutex_t mu;
	pthread_cond_t done;		/* signalled by the last job */
} together;

typedef struct job_slot
{
	together   *t;
	int			i;
} job_slot;

static void *
job_main(void *p)
{
	job_slot   *js = (job_slot *) p;

	together   *t = js->t;

	t->job(t->arg, js->i, t->stop);
	pthread_mutex_lock(&t->mu);
	if (--t->active == 0)
		pthread_cond_signal(&t->done);
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

bool
pggpu_stopped(const pggpu_stop *stop)
{
	return stop != NULL && atomic_load_explicit(&stop->flag, memory_order_relaxed);
}

/*
 * The calling thread polls, then waits on a condition variable, woken by
 * the last job as it ends (a k-means step over shares lasts milliseconds: a
 * sleep's granularity would add to each) or after a millisecond to poll
 * again
 */
void
pggpu_run_together(pggpu_job_fn job, void *arg, int n, pggpu_pending_fn pending, pggpu_stop *stop)
{
	pthread_t	tid[PGGPU_MAX_THREADS];
	job_slot	js[PGGPU_MAX_THREADS];
	bool		started[PGGPU_MAX_THREADS];
	together	t = {job, arg, stop, 0};
	pthread_condattr_t ca;
	sigset_t	all,
				old;

	atomic_store(&stop->flag, false);
	pthread_mutex_init(&t.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t.done, &ca);
	pthread_condattr_destroy(&ca);
	/* signals stay with the calling thread (PostgreSQL's handlers) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < n && i < PGGPU_MAX_THREADS; i++)
	{
		js[i].t = &t;
		js[i].i = i;
		pthread_mutex_lock(&t.mu);
		t.active++;
		pthread_mutex_unlock(&t.mu);
		started[i] = pthread_create(&tid[i], NULL, job_main, &js[i]) == 0;
		if (!started[i])
		{
			pthread_mutex_lock(&t.mu);
			t.active--;
			pthread_mutex_unlock(&t.mu);
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* a job no thread took runs here (unpolled while it runs) */
	for (int i = 0; i < n; i++)
		if (i >= PGGPU_MAX_THREADS || !started[i])
			job(arg, i, stop);
	pthread_mutex_lock(&t.mu);
	while (t.active > 0)
	{
		struct timespec ts;

		if (pending && pending())
			atomic_store(&stop->flag, true);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 1000000;
		if (ts.tv_nsec >= 1000000000)
			ts.tv_sec++, ts.tv_nsec -= 1000000000;
		(void) pthread_cond_timedwait(&t.done, &t.mu, &ts);
	}
	pthread_mutex_unlock(&t.mu);
	for (int i = 0; i < n && i < PGGPU_MAX_THREADS; i++)
		if (started[i])
			pthread_join(tid[i], NULL);
	pthread_cond_destroy(&t.done);
	pthread_mutex_destroy(&t.mu);
}

/* pggpu_stopped for a C callback's (void *) argument (the GPU's product loop) */
bool
pggpu_stopped_arg(void *stop)
{
	return pggpu_stopped((const pggpu_stop *) stop);
}
