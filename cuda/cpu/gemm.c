/*
 * cpu/gemm.c - the CPU backend's labelling through OpenBLAS's GEMM (gemm.h).
 *
 * For d and k where it pays (cpu_gemm_wanted, measured), a Lloyd pass labels
 * a panel of rows at a time: the rows less the column means mu (so that the
 * error is that of the spread, not of the distance from the origin), one
 * dgemm with the centroids less mu, then per row the two least
 * A_c = |x|^2 - 2 x.c + |c|^2.  A bound E on |A_c - D_c|, D_c the plain
 * loop's |x - c|^2 (blocks.c: over columns in order, each term rounded),
 * settles the row when the runner-up is more than 2E above the least;
 * else every centroid within 2E of the least is measured by the plain loop
 * (lowest index on ties).  The winner's distance is always the plain
 * loop's.  So labels and distances are those of nearest_block, bit for bit,
 * and the sums and counts that follow are the same.
 *
 * The bound.  With u = 2^-53, for rows and centroids less mu held as x', c'
 * (each element rounded once, relative u): the product, the norms and the
 * two additions are each within (d + 2) u (|x'| + |c'|)^2 of their exact
 * values, the rounding of x', c' moves the distance by at most
 * 2u (|x'| + |c'|)^2 + O(u^2), and D_c itself is within (d + 2) u D_c
 * <= (d + 2) u (|x'| + |c'|)^2 (1 + 2u) of |x - c|^2 (d terms >= 0, each
 * rounded twice).  So |A_c - D_c| <= (2d + 8) u s^2 (1 + O(u)), s = |x'| +
 * max |c'|; E takes twice that, (d + 4) 2^-51 s^2.  Any order of summation
 * in the BLAS keeps the product's part of it (d u per product at most).
 */
#include "gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Where the plain loop (blocks.c, 8 rows a vector, k d multiply-adds a row)
 * is as fast: measured on a 2-core x86-64-v3 (AVX2) and a 16-core machine,
 * one thread, 10^5 rows: at d = 8 the plain loop wins at every k, at d = 16
 * GEMM from k = 32 (see README, CPU path).
 */
#define GEMM_MIN_D 16
#define GEMM_MIN_K 32
/* most doubles of a panel's products (per thread) */
#define GEMM_PANEL_DOUBLES ((int64_t) 1 << 20)
/* a panel's work at most, in polls' budgets (GEMM is that much faster) */
#define GEMM_POLL_FACTOR 64

bool
cpu_gemm_wanted(int d, int k, int force)
{
	if (force == PGGPU_LABEL_LLOYD)
		return false;
	if (force == PGGPU_LABEL_GEMM)
		return true;
	return d >= GEMM_MIN_D && k >= GEMM_MIN_K;
}

int
cpu_gemm_panel_rows(int d, int k, double poll_budget)
{
	int			p = GEMM_PANEL;

	while (p > 32 && ((int64_t) p * k > GEMM_PANEL_DOUBLES ||
					  (double) p * k * d > GEMM_POLL_FACTOR * poll_budget))
		p >>= 1;
	/* even 32 rows would hold off interrupts too long: the plain loop (it cuts k) */
	if ((double) p * k * d > GEMM_POLL_FACTOR * poll_budget || (int64_t) p * k > 4 * GEMM_PANEL_DOUBLES)
		return 0;
	return p;
}

/* a thread's workspace: xo, xc (panel x d each), G (panel x k), xn (panel), cand (k ints) */
static int64_t
ws_doubles(int d, int k, int panel)
{
	return 2 * (int64_t) panel * d + (int64_t) panel * k + panel + (k + 1) / 2 + 8;
}

bool
cpu_gemm_open(cpu_gemm *g, const double *X, int64_t n, int d, int log_b, int k,
			  int threads, int panel)
{
	const char *why;

	memset(g, 0, sizeof(*g));
	if ((g->ob = pggpu_openblas_load(&why)) == NULL || panel < 1)
		return false;
	g->panel = panel;
	g->threads = threads;
	g->ws_doubles = ws_doubles(d, k, panel);
	g->mu = (double *) calloc(d, sizeof(double));
	g->Cc = (double *) malloc(sizeof(double) * k * d);
	g->cn = (double *) malloc(sizeof(double) * k);
	g->ws = (double *) malloc(sizeof(double) * g->ws_doubles * threads);
	if (!g->mu || !g->Cc || !g->cn || !g->ws)
	{
		cpu_gemm_close(g);
		return false;
	}
	/* mu: any value keeps the answers exact; the column means make E small */
	for (int j = 0; j < d; j++)
	{
		double		s = 0;

		for (int64_t i = 0; i < n; i++)
			s += X[pggpu_at(i, j, d, log_b)];
		g->mu[j] = n > 0 ? s / n : 0;
	}
	return true;
}

void
cpu_gemm_close(cpu_gemm *g)
{
	free(g->mu);
	free(g->Cc);
	free(g->cn);
	free(g->ws);
	memset(g, 0, sizeof(*g));
}

void
cpu_gemm_centroids(cpu_gemm *g, const double *C, int k, int d)
{
	g->cmax = 0;
	for (int c = 0; c < k; c++)
	{
		double		s = 0;

		for (int j = 0; j < d; j++)
		{
			double		v = C[(int64_t) c * d + j] - g->mu[j];

			g->Cc[(int64_t) c * d + j] = v;
			s += v * v;
		}
		g->cn[c] = s;
		g->cmax = fmax(g->cmax, sqrt(s));
	}
}

/* the plain loop's |x - c|^2: over columns in order, each term rounded on its own */
static inline double
plain_dist(const double *x, const double *c, int d)
{
	double		acc = 0.0;

	for (int j = 0; j < d; j++)
	{
		double		t = x[j] - c[j];

		acc += t * t;
	}
	return acc;
}

void
cpu_gemm_label(const cpu_gemm *g, int t, const double *X, int d, int log_b,
			   int64_t i0, int rows, const double *C, int k, double *best,
			   int32_t *lab, const double **xo_out)
{
	int64_t		b = (int64_t) 1 << log_b;
	const double *src = X + pggpu_at(i0, 0, d, log_b);
	double	   *xo = g->ws + g->ws_doubles * t;
	double	   *xc = xo + (int64_t) g->panel * d;
	double	   *G = xc + (int64_t) g->panel * d;
	double	   *xn = G + (int64_t) g->panel * k;
	int		   *cand = (int *) (xn + g->panel);

	for (int q = 0; q < rows; q++)
	{
		double		s = 0;

		for (int j = 0; j < d; j++)
		{
			double		v = src[j * b + q];

			xo[(int64_t) q * d + j] = v;
			xc[(int64_t) q * d + j] = v - g->mu[j];
			s += xc[(int64_t) q * d + j] * xc[(int64_t) q * d + j];
		}
		xn[q] = s;
	}
	g->ob->dgemm(PGGPU_CBLAS_ROW_MAJOR, PGGPU_CBLAS_NO_TRANS, PGGPU_CBLAS_TRANS, rows, k, d,
				 1.0, xc, d, g->Cc, d, 0.0, G, k);
	for (int q = 0; q < rows; q++)
	{
		const double *gq = G + (int64_t) q * k;
		const double *x = xo + (int64_t) q * d;
		double		m1 = INFINITY,
					m2 = INFINITY,
					s = sqrt(xn[q]) + g->cmax,
					e2 = 2 * (d + 4) * 0x1p-51 * s * s;	/* 2E */
		int			c1 = 0,
					nc = 0;

		for (int c = 0; c < k; c++)
		{
			double		a = g->cn[c] - 2 * gq[c];

			if (a < m1)
			{
				m2 = m1;
				m1 = a;
				c1 = c;
			}
			else if (a < m2)
				m2 = a;
		}
		if (m2 - m1 > e2)
		{
			lab[q] = c1;
			best[q] = plain_dist(x, C + (int64_t) c1 * d, d);
			continue;
		}
		/* near-tied (or not finite): measure every centroid within 2E of the least */
		for (int c = 0; c < k; c++)
			if (!(g->cn[c] - 2 * gq[c] > m1 + e2))
				cand[nc++] = c;
		best[q] = INFINITY;
		lab[q] = 0;
		for (int i = 0; i < nc; i++)
		{
			double		v = plain_dist(x, C + (int64_t) cand[i] * d, d);

			if (v < best[q])
			{
				best[q] = v;
				lab[q] = cand[i];
			}
		}
	}
	*xo_out = xo;
}
