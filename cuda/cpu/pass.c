/*
 * cpu/pass.c - the CPU backend's passes over the rows (pass.h): parts taken
 * by threads, interrupts polled.
 *
 * Parts: a pass over the rows is cut into parts, contiguous ranges of rows
 * (kmeans.c choose_parts), each done in row order by one thread with its
 * own sums, counts and draw, combined in part order at the end: every
 * thread count gives the same result to the last bit.
 */
#include "blocks.h"
#include "pass.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

/* the calling thread, while others run: stop them all on a pending interrupt */
static void
poll_pending(pass *ps)
{
	pggpu_data *ds = ps->ds;

	if (ds->interrupt && !ps->no_poll && ds->pending())
		atomic_store(&ps->stop, true);
}

/*
 * Every POLL_ROWS rows: false when the thread must leave its part here.  On
 * one thread that is the caller's callback itself (it may longjmp).  With
 * others running it may not be called: the calling thread polls
 * ds->pending (here, at the start of the pass and while it waits for the
 * others), and on a pending interrupt every thread stops; cpu_pass_run then
 * calls the callback with no other thread running.
 */
bool
cpu_poll_pass(pass *ps, bool caller)
{
	pggpu_data *ds = ps->ds;

	if (ds->interrupt == NULL)
		return true;
	if (!ps->threaded)
	{
		ds->interrupt(ds->interrupt_arg);
		return true;
	}
	if (caller)
		poll_pending(ps);
	return !atomic_load_explicit(&ps->stop, memory_order_relaxed);
}

static void
run_parts(pass *ps, int t, bool caller)
{
	cpu_state  *s = ST(ps->ds);
	int			i;

	while ((i = atomic_fetch_add(&ps->next, 1)) < s->nparts)
	{
		part	   *pt = &s->parts[i];

		if (pt->pos < pt->end)
			ps->rows(ps, pt, t, caller);
		if (atomic_load(&ps->stop))
			return;
	}
}

typedef struct worker
{
	pass	   *ps;
	int			t;
} worker;

static void *
worker_main(void *arg)
{
	worker	   *w = (worker *) arg;

	run_parts(w->ps, w->t, false);
	atomic_fetch_sub(&w->ps->active, 1);
	return NULL;
}

/*
 * Runs a pass: the calling thread and up to nthreads - 1 others (started
 * with every signal blocked, so that signals still go to the caller), joined
 * before it returns.  A thread that cannot be started leaves its share to
 * the others.
 */
void
cpu_pass_run(pass *ps)
{
	pggpu_data *ds = ps->ds;
	cpu_state  *s = ST(ds);
	/* with a callback but no way to poll it, one thread */
	int			threads = ds->interrupt && !ds->pending ? 1 : s->nthreads;

	double		work = (double) ds->d * (ps->kind == PASS_STEP ? ds->k : 1);
	double		budget = ds->poll_work > 0 ? ds->poll_work : (double) POLL_WORK;
	int64_t		poll_rows = POLL_ROWS;

	while (poll_rows > RB && poll_rows * work > budget)
		poll_rows >>= 1;
	ps->poll_mask = poll_rows - 1;
	ps->kchunk = RB * work > budget ? (int) (budget / (RB * ds->d)) : ds->k;
	if (ps->kchunk < 1)
		ps->kchunk = 1;
	for (int i = 0; i < s->nparts; i++)
		s->parts[i].pos = s->parts[i].start;
	ps->threaded = threads > 1;
	ps->no_poll = false;
	for (;;)
	{
		pthread_t	tid[PGGPU_MAX_THREADS];
		worker		w[PGGPU_MAX_THREADS];
		int			started = 0;
		bool		done = true;

		atomic_store(&ps->next, 0);
		atomic_store(&ps->stop, false);
		atomic_store(&ps->active, 0);
		if (threads > 1)
		{
			sigset_t	all,
						old;

			sigfillset(&all);
			pthread_sigmask(SIG_SETMASK, &all, &old);
			for (int t = 1; t < threads; t++)
			{
				w[started].ps = ps;
				w[started].t = t;
				atomic_fetch_add(&ps->active, 1);
				if (pthread_create(&tid[started], NULL, worker_main, &w[started]) != 0)
				{
					atomic_fetch_sub(&ps->active, 1);
					break;
				}
				started++;
			}
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			poll_pending(ps);
		}
		run_parts(ps, 0, true);
		/* out of parts: keep polling while the others finish theirs */
		while (atomic_load(&ps->active) > 0)
		{
			poll_pending(ps);
			sched_yield();
		}
		for (int t = 0; t < started; t++)
			pthread_join(tid[t], NULL);
		for (int i = 0; i < s->nparts; i++)
			done &= s->parts[i].pos == s->parts[i].end;
		if (done)
			return;
		/* stopped for a pending interrupt: the callback, on this thread alone */
		ds->interrupt(ds->interrupt_arg);
		/* it came back: the interrupt is held off; finish the pass */
		ps->no_poll = true;
	}
}
