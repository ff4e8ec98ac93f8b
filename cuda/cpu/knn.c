/*
 * cpu/knn.c - nearest neighbours on the CPU, by either route (knn.c).
 * Plain: every query against every row of a tile by the plain loop (8 rows
 * of the tile a vector, each lane's sum over the columns in order, as
 * gpu/knn.cu's threads), then each query's n least by (distance, row)
 * through a bounded heap, ties to the lower rank.  Product: OpenBLAS's
 * sgemm of the centred float copies, PGGPU_KNN_KC columns a slice, for a
 * panel of queries; per query
 * the n-th least upper bound (A + margin) of the tile, then every row whose
 * lower bound is not above it (nor above the caller's bound) measured by
 * the plain loop (one row at a time: the same sums as a lane's) into the
 * same heap.  The same answers, bit for bit.
 */
#include "knn.h"
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

/* (v, r) into the heap of the m (< n: grows) least so far */
static inline void
heap_add(double *hv, int64_t *hi, int *m, int n, double v, int64_t r)
{
	if (*m < n)
	{
		/* grow: the new one at the end, sifted up */
		int			i = (*m)++;

		hv[i] = v, hi[i] = r;
		while (i > 0 && before(hv[(i - 1) / 2], hi[(i - 1) / 2], hv[i], hi[i]))
		{
			int			p = (i - 1) / 2;
			double		tv = hv[p];
			int64_t		ti = hi[p];

			hv[p] = hv[i], hi[p] = hi[i];
			hv[i] = tv, hi[i] = ti;
			i = p;
		}
	}
	else if (before(v, r, hv[0], hi[0]))
	{
		hv[0] = v, hi[0] = r;
		sift(hv, hi, *m, 0);
	}
}

/* the heap of m into ascending order, padded to n (-1 / inf) */
static void
heap_out(double *hv, int64_t *hi, int m, int n)
{
	/* the worst to the end, one by one */
	for (int e = m - 1; e > 0; e--)
	{
		double		tv = hv[0];
		int64_t		ti = hi[0];

		hv[0] = hv[e], hi[0] = hi[e];
		hv[e] = tv, hi[e] = ti;
		sift(hv, hi, e, 0);
	}
	for (int i = m; i < n; i++)
		hv[i] = INFINITY, hi[i] = -1;
}

/* the n least of v[0..nb) by (value, key: rank[r], or r), the least first, into idx (keys)/dist (-1 / inf past nb) */
static void
least(const double *v, int64_t nb, const int32_t *rank, int n, int64_t *idx, double *dist)
{
	int			m = 0;

	for (int64_t r = 0; r < nb; r++)
		heap_add(dist, idx, &m, n, v[r], rank ? rank[r] : r);
	heap_out(dist, idx, m, n);
}

/* one pair by the plain loop, the row's columns ld apart: a lane of query_dists, alone */
static double
plain_pair(const double *q, const double *b, int64_t ld, int d, bool inner)
{
	double		s = 0;

	for (int j = 0; j < d; j++)
	{
		double		t;

		if (inner)
			t = q[j] * b[j * ld];
		else
		{
			t = q[j] - b[j * ld];
			t = t * t;
		}
		s = s + t;
	}
	return inner ? -s : s;
}

/* the workspace: at least want doubles */
static pggpu_status
ws_room(pggpu_knn *kn, int64_t want, int64_t nb, pggpu_error *err)
{
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
	return PGGPU_OK;
}

/* interrupts polled every this many (row, column) terms */
#define POLL_TERMS ((double) (1 << 24))

static pggpu_status
plain_run(pggpu_knn *kn, const double *B, int64_t ld, int64_t nb, const int32_t *rank, int64_t *idx, double *dist,
		  pggpu_error *err)
{
	int			d = kn->d;
	int64_t		nb8 = (nb + 7) & ~(int64_t) 7;
	double	   *Bt,
			   *v;
	double		work = 0;
	pggpu_status st;

	if ((st = ws_room(kn, (nb8 + 8) * (d + 1), nb, err)) != PGGPU_OK)
		return st;
	Bt = kn->ws;
	v = kn->ws + (int64_t) d * nb8;
	for (int j = 0; j < d; j++)
	{
		memcpy(Bt + (int64_t) j * nb8, B + j * ld, sizeof(double) * (size_t) nb);
		memset(Bt + (int64_t) j * nb8 + nb, 0, sizeof(double) * (size_t) (nb8 - nb));
	}
	for (int64_t i = 0; i < kn->nq; i++)
	{
		query_dists(kn->Q + i * d, Bt, nb8, d, kn->metric == PGGPU_METRIC_INNER_PRODUCT, v);
		least(v, nb, rank, kn->n, idx + i * kn->n, dist + i * kn->n);
		work += (double) nb8 * d;
		if (work >= POLL_TERMS && kn->interrupt)
		{
			work = 0;
			kn->interrupt(kn->interrupt_arg);
		}
	}
	kn->measured += kn->nq * nb;
	return PGGPU_OK;
}

/* a panel's products at most (floats) */
#define PANEL_FLOATS ((int64_t) 1 << 22)

static pggpu_status
product_run(pggpu_knn *kn, const double *B, int64_t ld, int64_t nb, const int32_t *rank, const double *bound,
			int64_t *idx, double *dist, pggpu_error *err)
{
	const char *why;
	const pggpu_openblas *ob = pggpu_openblas_load(&why);
	int			d = kn->d,
				n = kn->n,
				m = nb < n ? (int) nb : n;
	bool		inner = kn->metric == PGGPU_METRIC_INNER_PRODUCT;
	double		h = pggpu_knn_depth(d);
	int64_t		panel = PANEL_FLOATS / nb;
	float	   *Bf,
			   *S;
	double	   *bn,
			   *bs,
			   *lo,
			   *uv;
	int64_t    *ui;
	double		work = 0;
	pggpu_status st;

	panel = panel < 1 ? 1 : panel > 256 ? 256 : panel;
	/* Bf (nb x d floats) and S (panel x nb floats) as doubles' room, bn, bs, lo, then the heap's */
	if ((st = ws_room(kn, (nb * d + 1) / 2 + (panel * nb + 1) / 2 + 3 * nb + 2 * (int64_t) n + 4, nb, err)) !=
		PGGPU_OK)
		return st;
	Bf = (float *) kn->ws;
	S = (float *) (kn->ws + (nb * d + 1) / 2);
	bn = kn->ws + (nb * d + 1) / 2 + (panel * nb + 1) / 2;
	bs = bn + nb;
	lo = bs + nb;
	uv = lo + nb;
	ui = (int64_t *) (uv + n);
	/* the rows less mu as floats (by columns, as B), their norms summed column by column */
	for (int64_t r = 0; r < nb; r++)
		bn[r] = 0;
	for (int j = 0; j < d; j++)
		for (int64_t r = 0; r < nb; r++)
		{
			float		f = (float) (B[j * ld + r] - kn->mu[j]);

			Bf[(int64_t) j * nb + r] = f;
			bn[r] += (double) f * f;
		}
	for (int64_t r = 0; r < nb; r++)
		bs[r] = isfinite(bn[r]) && sqrt(bn[r]) <= PGGPU_KNN_MAX_NORM ? sqrt(bn[r]) : INFINITY;
	pggpu_openblas_threads(ob, kn->threads);
	for (int64_t i0 = 0; i0 < kn->nq; i0 += panel)
	{
		int			p = (int) (kn->nq - i0 < panel ? kn->nq - i0 : panel);

		for (int j0 = 0; j0 < d; j0 += PGGPU_KNN_KC)
			ob->sgemm(PGGPU_CBLAS_ROW_MAJOR, PGGPU_CBLAS_NO_TRANS, PGGPU_CBLAS_NO_TRANS, p, (int) nb,
					  d - j0 < PGGPU_KNN_KC ? d - j0 : PGGPU_KNN_KC, 1.0f, kn->Qf + i0 * d + j0, d,
					  Bf + (int64_t) j0 * nb, (int) nb, j0 ? 1.0f : 0.0f, S, (int) nb);
		work += (double) p * nb * d / 16;
		for (int i = 0; i < p; i++)
		{
			int64_t		q = i0 + i;
			const float *Sq = S + (int64_t) i * nb;
			double		tau;
			int			u = 0;

			/* the m-th least upper bound of the tile's rows (each row's lower bound kept) */
			for (int64_t r = 0; r < nb; r++)
			{
				double		a,
							e;

				if (!(kn->qs[q] <= PGGPU_KNN_MAX_NORM && bs[r] <= PGGPU_KNN_MAX_NORM))
				{
					lo[r] = -INFINITY;
					heap_add(uv, ui, &u, m, INFINITY, r);
					continue;
				}
				a = inner ? -(double) Sq[r] : kn->qn[q] + bn[r] - 2 * (double) Sq[r];
				e = pggpu_knn_margin(kn->qs[q], bs[r], h, d);
				lo[r] = a - e;
				heap_add(uv, ui, &u, m, a + e, r);
			}
			tau = uv[0];		/* (the heap's root: its greatest) */
			if (bound && bound[q] < tau)
				tau = bound[q];
			/* every row that could be among the m least, measured */
			u = 0;
			for (int64_t r = 0; r < nb; r++)
				if (lo[r] <= tau)
				{
					heap_add(dist + q * n, idx + q * n, &u, m, plain_pair(kn->Q + q * d, B + r, ld, d, inner),
							 rank ? rank[r] : r);
					kn->measured++;
					work += d;
				}
			heap_out(dist + q * n, idx + q * n, u, n);
			work += nb;
			if (work >= POLL_TERMS && kn->interrupt)
			{
				work = 0;
				kn->interrupt(kn->interrupt_arg);
			}
		}
	}
	return PGGPU_OK;
}

pggpu_status
pggpu_cpu_knn_run(pggpu_knn *kn, const void *B, bool f32, int64_t ld, int64_t nb, const int32_t *rank,
				  const double *bound, int64_t *idx, double *dist, pggpu_error *err)
{
	const double *Bd = (const double *) B;

	/* floats widened first (exactly: the same values), into the workspace's end */
	if (f32)
	{
		double	   *w;

		if (kn->wide_doubles < nb * kn->d)
		{
			free(kn->wide);
			kn->wide_doubles = 0;
			if ((kn->wide = (double *) malloc(sizeof(double) * (size_t) (nb * kn->d))) == NULL)
				return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a tile of %lld rows",
								  (long long) nb);
			kn->wide_doubles = nb * kn->d;
		}
		w = kn->wide;
		for (int j = 0; j < kn->d; j++)
			for (int64_t r = 0; r < nb; r++)
				w[(int64_t) j * nb + r] = ((const float *) B)[j * ld + r];
		Bd = w;
		ld = nb;
	}
	if (kn->route == PGGPU_KNN_PRODUCT)
		return product_run(kn, Bd, ld, nb, rank, bound, idx, dist, err);
	return plain_run(kn, Bd, ld, nb, rank, idx, dist, err);
}
