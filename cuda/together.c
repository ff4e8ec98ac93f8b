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
	atomic_int	active;
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

	js->t->job(js->t->arg, js->i, js->t->stop);
	atomic_fetch_sub(&js->t->active, 1);
	return NULL;
}

bool
pggpu_stopped(const pggpu_stop *stop)
{
	return stop != NULL && atomic_load_explicit(&stop->flag, memory_order_relaxed);
}

void
pggpu_run_together(pggpu_job_fn job, void *arg, int n, pggpu_pending_fn pending, pggpu_stop *stop)
{
	pthread_t	tid[PGGPU_MAX_THREADS];
	job_slot	js[PGGPU_MAX_THREADS];
	bool		started[PGGPU_MAX_THREADS];
	together	t = {job, arg, stop};
	sigset_t	all,
				old;

	atomic_store(&stop->flag, false);
	atomic_store(&t.active, 0);
	/* signals stay with the calling thread (PostgreSQL's handlers) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < n && i < PGGPU_MAX_THREADS; i++)
	{
		js[i].t = &t;
		js[i].i = i;
		atomic_fetch_add(&t.active, 1);
		started[i] = pthread_create(&tid[i], NULL, job_main, &js[i]) == 0;
		if (!started[i])
			atomic_fetch_sub(&t.active, 1);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* a job no thread took runs here (unpolled while it runs) */
	for (int i = 0; i < n; i++)
		if (i >= PGGPU_MAX_THREADS || !started[i])
			job(arg, i, stop);
	while (atomic_load(&t.active) > 0)
	{
		struct timespec ts = {0, 200000};

		if (pending && pending())
			atomic_store(&stop->flag, true);
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < n && i < PGGPU_MAX_THREADS; i++)
		if (started[i])
			pthread_join(tid[i], NULL);
}

/* pggpu_stopped for a C callback's (void *) argument (the GPU's product loop) */
bool
pggpu_stopped_arg(void *stop)
{
	return pggpu_stopped((const pggpu_stop *) stop);
}
