/*
 * cpu/pass.h - the CPU backend's passes over a data set's rows (pass.c): the
 * rows cut into parts (state.h), the parts taken by the calling thread and
 * up to ds->threads - 1 others, interrupts polled on the way.  kmeans.c
 * says what a pass does to a part's rows (pass.rows).  Plain C, for the
 * files of cuda/cpu/ only.
 */
#ifndef PG_GPU_CPU_PASS_H
#define PG_GPU_CPU_PASS_H

#include <stdatomic.h>

#include "state.h"

/*
 * Interrupts are polled every POLL_ROWS rows of a pass at most, and at least
 * every POLL_WORK squared differences (x_j - c_j)^2, a few milliseconds:
 * fewer rows between polls when k d is large, and within a block of rows,
 * between runs of centroids, when one block is more than that.
 */
#define POLL_ROWS 4096
#define POLL_WORK ((int64_t) 1 << 22)

enum
{
	PASS_STEP,					/* a Lloyd pass */
	PASS_POINT,					/* km_point's pass */
	PASS_DISTS					/* the distances a step left (kmeans.c fresh_dists) */
};

typedef struct pass pass;

struct pass
{
	pggpu_data *ds;
	int			kind;
	/* the rest of part pt (from pt->pos), on thread t (0: the caller's) */
	void		(*rows) (pass *ps, part *pt, int t, bool caller);
	bool		update;			/* PASS_STEP: sum the rows by label too */
	bool		dists;			/* PASS_STEP: the GEMM route measures the winners' distances */
	const double *cc;			/* PASS_POINT: the new centroid */
	bool		set;			/* PASS_POINT: dist2 := d (else the min) */
	const uint64_t *key;		/* PASS_POINT: the draw to make, or NULL */
	int64_t		poll_mask;		/* poll where (row & poll_mask) == 0 */
	int			kchunk;			/* PASS_STEP: centroids between polls */
	bool		threaded;		/* other threads may run: poll, don't call */
	bool		no_poll;		/* the callback returned with one pending */
	atomic_int	next;			/* the next part to take */
	atomic_bool stop;			/* an interrupt is pending: leave the parts */
	atomic_int	active;			/* other threads still running */
};

/*
 * Runs a pass over every part (each from its start): the calling thread
 * and up to nthreads - 1 others, joined before it returns.
 */
void		cpu_pass_run(pass *ps);

/*
 * Every POLL_ROWS rows: false when the thread must leave its part here (an
 * interrupt is pending; cpu_pass_run calls the callback, then goes on).
 */
bool		cpu_poll_pass(pass *ps, bool caller);

/* cpu_poll_pass at the rows where a poll is due */
static inline bool
cpu_keep_going(pass *ps, int64_t i0, bool caller)
{
	return (i0 & ps->poll_mask) != 0 || cpu_poll_pass(ps, caller);
}

#endif							/* PG_GPU_CPU_PASS_H */
