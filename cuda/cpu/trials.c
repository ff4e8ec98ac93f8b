/*
 * trials.c - what the driver's seeding reads of the CPU backend's rows
 * (pggpu_ops keys, get_rows and km_trials): their content keys, rows by
 * index, and greedy k-means++'s trials, the reference the GPU's trials.cu
 * matches bit for bit: the same terms, summed in the same order.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../compute_internal.h"
#include "blocks.h"

pggpu_status
pggpu_cpu_keys(pggpu_data *ds, uint64_t *keys, pggpu_error *err)
{
	double	   *buf = (double *) malloc(sizeof(double) * RB * ds->d);

	if (buf == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	/* a block of RB rows at a time in vector lanes (the rest of the last tile is zeros) */
	for (int64_t i0 = 0; i0 < ds->n; i0 += RB)
	{
		uint64_t	kb[RB];
		int			m = ds->n - i0 < RB ? (int) (ds->n - i0) : RB;
		int64_t		stride;
		const double *x = pggpu_cpu_block(ds, i0, buf, &stride);

		if (keys_block(x, stride, ds->d, kb))
			memcpy(keys + i0, kb, sizeof(uint64_t) * m);
		else
			for (int q = 0; q < m; q++)
				keys[i0 + q] = pggpu_row_key(x + q, stride, ds->d);
	}
	free(buf);
	return PGGPU_OK;
}

pggpu_status
pggpu_cpu_get_rows(pggpu_data *ds, const int64_t *rows, int64_t m, double *out, pggpu_error *err)
{
	const double *X = pggpu_cpu_rows(ds);
	const float *Xf = pggpu_cpu_rows_f32(ds);
	const uint16_t *Xh = pggpu_cpu_rows_f16(ds);
	int64_t		tile = (int64_t) 1 << ds->log_b;

	(void) err;
	for (int64_t i = 0; i < m; i++)
		for (int j = 0; j < ds->d; j++)
			out[i * ds->d + j] = pggpu_cpu_value(X, Xf, Xh, pggpu_at(rows[i], 0, ds->d, ds->log_b) + j * tile);
	return PGGPU_OK;
}

/* see pggpu_ops: the sources' rows pushed into dst a batch at a time, all on the CPU */
pggpu_status
pggpu_cpu_copy_rows(pggpu_data *dst, pggpu_data *const *srcs, int nsrc, const int *which, const int64_t *rows,
					int64_t m, const int *e, pggpu_error *err)
{
	int64_t		b = pggpu_data_batch_rows(dst);

	if (dst->n != 0 || nsrc < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "rows cannot be copied from these data sets to that one");
	for (int p = 0; p < nsrc; p++)
		if (srcs[p]->backend != PGGPU_BACKEND_CPU || srcs[p]->parked || srcs[p]->d != dst->d ||
			e[p] < -1022 || e[p] > 1023)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "rows cannot be copied from these data sets to that one");
	for (int64_t i0 = 0; i0 < m; i0 += b)
	{
		int64_t		take = m - i0 < b ? m - i0 : b;
		double	   *buf = pggpu_data_batch(dst);
		float	   *buf32 = pggpu_data_batch_f32(dst);
		uint16_t   *buf16 = pggpu_data_batch_f16(dst);
		pggpu_status st;

		if (!buf && !buf32 && !buf16)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a batch of rows");

		for (int64_t t = 0; t < take; t++)
		{
			int			p = which ? which[i0 + t] : 0;
			pggpu_data *src = p >= 0 && p < nsrc ? srcs[p] : NULL;
			const double *X = src ? pggpu_cpu_rows(src) : NULL;
			const float *Xf = src ? pggpu_cpu_rows_f32(src) : NULL;
			const uint16_t *Xh = src ? pggpu_cpu_rows_f16(src) : NULL;
			int64_t		tile = src ? (int64_t) 1 << src->log_b : 0;
			double		f = src ? ldexp(1.0, e[p]) : 0;

			if ((X == NULL && Xf == NULL && Xh == NULL) || rows[i0 + t] < 0 || rows[i0 + t] >= src->n)
				return pggpu_fail(err, PGGPU_ERR_INVALID, "row %lld is not in the data set",
								  (long long) rows[i0 + t]);
			/* (dst narrow: the sources' values held so, unscaled; pggpu_copy_rows) */
			for (int j = 0; j < dst->d; j++)
				pggpu_batch_put(buf, buf32, buf16, j * b + t,
								pggpu_cpu_value(X, Xf, Xh, pggpu_at(rows[i0 + t], 0, src->d, src->log_b) + j * tile) * f);
		}
		if ((st = pggpu_data_push(dst, take, err)) != PGGPU_OK)
			return st;
	}
	return PGGPU_OK;
}

_Static_assert(PGGPU_DRAW_ROWS % RB == 0, "a block of the draw is whole blocks of rows");

typedef struct trials_job
{
	pggpu_data *ds;
	const double *dist2;
	const double *rw;
	const double *cand;			/* m x d */
	int			m;
	int64_t		b0,
				b1;				/* its blocks */
	double	   *bsum;			/* m x nblocks */
	int64_t		nblocks;
} trials_job;

static void *
trials_run(void *arg)
{
	trials_job *jb = (trials_job *) arg;
	pggpu_data *ds = jb->ds;
	int			d = ds->d;
	double	   *t = (double *) malloc(sizeof(double) * PGGPU_DRAW_ROWS * jb->m);
	double	   *buf = (double *) malloc(sizeof(double) * RB * d);

	if (t == NULL || buf == NULL)
	{
		free(t), free(buf);
		return (void *) 1;
	}
	/*
	 * RB rows at a time in vector lanes (point_block: each distance summed
	 * over the columns in order, each term rounded on its own, as the GPU
	 * sums it); a row at a time, a chain of dependent additions, seeding
	 * 10^5 x 384 at k = 256 took 73 s on 2 threads, now 9.3 s (the set's
	 * 65,536 rows read once a step: about what the memory gives)
	 */
	for (int64_t b = jb->b0; b < jb->b1; b++)
	{
		for (int r0 = 0; r0 < PGGPU_DRAW_ROWS; r0 += RB)
		{
			int64_t		i0 = b * PGGPU_DRAW_ROWS + r0;
			/* (a tile holds whole blocks of the draw, its rows past n zeros) */
			int64_t		stride;
			const double *x = pggpu_cpu_block(ds, i0 < ds->n ? i0 : 0, buf, &stride);

			for (int c = 0; c < jb->m; c++)
			{
				double		dd[RB];

				if (i0 < ds->n)
					point_block(x, stride, d, jb->cand + (int64_t) c * d, dd, true);
				for (int q = 0; q < RB; q++)
					t[c * PGGPU_DRAW_ROWS + r0 + q] = i0 + q < ds->n ?
						pggpu_trial_term(jb->dist2[i0 + q], dd[q], jb->rw, i0 + q) : 0.0;
			}
		}
		for (int c = 0; c < jb->m; c++)
			jb->bsum[(int64_t) c * jb->nblocks + b] = pggpu_trial_block(t + c * PGGPU_DRAW_ROWS);
	}
	free(t), free(buf);
	return NULL;
}

pggpu_status
pggpu_cpu_trials(pggpu_data *ds, const double *dist2, const double *rw, const int64_t *rows, int m,
				 double *pot, pggpu_error *err)
{
	const double *X = pggpu_cpu_rows(ds);
	const float *Xf = pggpu_cpu_rows_f32(ds);
	const uint16_t *Xh = pggpu_cpu_rows_f16(ds);
	int			d = ds->d;
	int64_t		tile = (int64_t) 1 << ds->log_b;
	int64_t		nblocks = (ds->n + PGGPU_DRAW_ROWS - 1) / PGGPU_DRAW_ROWS;
	int			nt = ds->threads > 1 ? ds->threads : 1;
	double	   *cand = (double *) malloc(sizeof(double) * (m > 0 ? m : 1) * d);
	double	   *bsum = (double *) malloc(sizeof(double) * (m > 0 ? m : 1) * (nblocks > 0 ? nblocks : 1));
	trials_job *jobs = (trials_job *) calloc(nt, sizeof(trials_job));
	pthread_t  *th = (pthread_t *) calloc(nt, sizeof(pthread_t));
	bool	   *started = (bool *) calloc(nt, sizeof(bool));
	bool		failed = false;

	if (!cand || !bsum || !jobs || !th || !started)
	{
		free(cand), free(bsum), free(jobs), free(th), free(started);
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	}
	for (int c = 0; c < m; c++)
		for (int j = 0; j < d; j++)
			cand[(int64_t) c * d + j] = pggpu_cpu_value(X, Xf, Xh, pggpu_at(rows[c], 0, d, ds->log_b) + j * tile);
	if (nt > nblocks)
		nt = nblocks > 0 ? (int) nblocks : 1;
	for (int w = 0; w < nt; w++)
	{
		jobs[w] = (trials_job) {ds, dist2, rw, cand, m, nblocks * w / nt, nblocks * (w + 1) / nt,
		bsum, nblocks};
		/* (the calling thread takes job 0, and any a thread could not start) */
		if (w > 0)
			started[w] = pthread_create(&th[w], NULL, trials_run, &jobs[w]) == 0;
	}
	failed |= trials_run(&jobs[0]) != NULL;
	for (int w = 1; w < nt; w++)
	{
		void	   *rv = NULL;

		if (started[w])
			pthread_join(th[w], &rv);
		else
			rv = trials_run(&jobs[w]);
		failed |= rv != NULL;
	}
	for (int c = 0; c < m && !failed; c++)
	{
		double		s = 0;

		for (int64_t b = 0; b < nblocks; b++)
			s = PGGPU_ADD(s, bsum[(int64_t) c * nblocks + b]);
		pot[c] = s;
	}
	free(cand), free(bsum), free(jobs), free(th), free(started);
	return failed ? pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory") : PGGPU_OK;
}

/* the draws (km_pick), then the potentials of the rows drawn (the others INFINITY) */
pggpu_status
pggpu_cpu_km_trials(pggpu_data *ds, const uint64_t *keys, int m, int64_t *rows, double *pot,
					pggpu_error *err)
{
	const double *dist2,
			   *rw;
	int64_t		got[64] = {0};
	double		gpot[64];
	int			ng = 0;
	pggpu_status st;

	if (m > 64)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "%d trials, more than 64", m);
	for (int t = 0; t < m; t++)
	{
		if ((st = ds->ops->km_pick(ds, PGGPU_PICK_SAMPLE, keys[t], &rows[t], err)) != PGGPU_OK)
			return st;
		pot[t] = INFINITY;
		if (rows[t] >= 0)
			got[ng++] = rows[t];
	}
	pggpu_cpu_draw_state(ds, &dist2, &rw);
	if ((st = pggpu_cpu_trials(ds, dist2, rw, got, ng, gpot, err)) != PGGPU_OK)
		return st;
	for (int t = 0, g = 0; t < m; t++)
		if (rows[t] >= 0)
			pot[t] = gpot[g++];
	return PGGPU_OK;
}
