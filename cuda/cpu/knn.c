/*
 * cpu/knn.c - nearest neighbours on the CPU: every query against every row
 * of a tile by the plain loop (8 rows of the tile a vector, each lane's sum
 * over the columns in order, as gpu/knn.cu's threads), then each query's n
 * least by (distance, row) through a bounded heap.
 */
#include "compute_internal.h"
#include "cpu/blocks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef double vd8 __attribute__((vector_size(8 * sizeof(double))));

/* a query's distances to the tile's rows, 8 at a time (Bt: column j of rows r at Bt[j * nb8 + r]) */
CLONES static void
query_dists(const double *q, const double *Bt, int64_t nb8, int d, bool inner, double *out)
{
	for (int64_t r = 0; r < nb8; r += 8)
	{
		vd8			s = {0, 0, 0, 0, 0, 0, 0, 0};

		for (int j = 0; j < d; j++)
		{
			vd8			b,
						t;

			memcpy(&b, Bt + (int64_t) j * nb8 + r, sizeof(b));
			if (inner)
				t = q[j] * b;
			else
			{
				t = q[j] - b;
				t = t * t;
			}
			s = s + t;
		}
		if (inner)
			s = -s;
		memcpy(out + r, &s, sizeof(s));
	}
}

/* (value, row) a before b */
static inline bool
before(double av, int64_t ai, double bv, int64_t bi)
{
	return av < bv || (av == bv && ai < bi);
}

/* the heap's worst at its root: sift down from i */
static void
sift(double *hv, int64_t *hi, int m, int i)
{
	for (;;)
	{
		int			w = i,
					l = 2 * i + 1,
					r = l + 1;

		if (l < m && before(hv[w], hi[w], hv[l], hi[l]))
			w = l;
		if (r < m && before(hv[w], hi[w], hv[r], hi[r]))
			w = r;
		if (w == i)
			return;
		{
			double		tv = hv[i];
			int64_t		ti = hi[i];

			hv[i] = hv[w], hi[i] = hi[w];
			hv[w] = tv, hi[w] = ti;
		}
		i = w;
	}
}

/* the n least of v[0..nb) by (value, row), the least first, into idx/dist (-1 / inf past nb) */
static void
least(const double *v, int64_t nb, int n, int64_t *idx, double *dist)
{
	int			m = 0;

	for (int64_t r = 0; r < nb; r++)
	{
		if (m < n)
		{
			/* grow: the new one at the end, sifted up */
			int			i = m++;

			dist[i] = v[r], idx[i] = r;
			while (i > 0 && before(dist[(i - 1) / 2], idx[(i - 1) / 2], dist[i], idx[i]))
			{
				int			p = (i - 1) / 2;
				double		tv = dist[p];
				int64_t		ti = idx[p];

				dist[p] = dist[i], idx[p] = idx[i];
				dist[i] = tv, idx[i] = ti;
				i = p;
			}
		}
		else if (before(v[r], r, dist[0], idx[0]))
		{
			dist[0] = v[r], idx[0] = r;
			sift(dist, idx, m, 0);
		}
	}
	/* heap to ascending order: the worst to the end, one by one */
	for (int e = m - 1; e > 0; e--)
	{
		double		tv = dist[0];
		int64_t		ti = idx[0];

		dist[0] = dist[e], idx[0] = idx[e];
		dist[e] = tv, idx[e] = ti;
		sift(dist, idx, e, 0);
	}
	for (int i = m; i < n; i++)
		dist[i] = INFINITY, idx[i] = -1;
}

pggpu_status
pggpu_cpu_knn_tile(pggpu_knn *kn, const double *B, int64_t nb, int64_t *idx, double *dist,
				   pggpu_error *err)
{
	int			d = kn->d;
	int64_t		nb8 = (nb + 7) & ~(int64_t) 7;
	int64_t		want = (nb8 + 8) * (d + 1);
	double	   *Bt,
			   *v;
	/* interrupts polled every this many (row, column) terms */
	const double poll = 1 << 24;
	double		work = 0;

	/* (the workspace is the set's: an interrupt that leaves by longjmp leaves it to close) */
	if (kn->ws_doubles < want)
	{
		free(kn->ws);
		kn->ws_doubles = 0;
		kn->ws = (double *) malloc(sizeof(double) * (size_t) want);
		if (kn->ws == NULL)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a tile of %lld rows",
							  (long long) nb);
		kn->ws_doubles = want;
	}
	Bt = kn->ws;
	v = kn->ws + (int64_t) d * nb8;
	memset(Bt, 0, sizeof(double) * (size_t) d * (size_t) nb8);
	for (int64_t r = 0; r < nb; r++)
		for (int j = 0; j < d; j++)
			Bt[(int64_t) j * nb8 + r] = B[r * d + j];
	for (int64_t i = 0; i < kn->nq; i++)
	{
		query_dists(kn->Q + i * d, Bt, nb8, d, kn->metric == PGGPU_METRIC_INNER_PRODUCT, v);
		least(v, nb, kn->n, idx + i * kn->n, dist + i * kn->n);
		work += (double) nb8 * d;
		if (work >= poll && kn->interrupt)
		{
			work = 0;
			kn->interrupt(kn->interrupt_arg);
		}
	}
	return PGGPU_OK;
}
