/*
 * knn.c - nearest neighbours (pggpu_knn): each backend against a reference
 * written here (every row's plain-loop distance, the n least by (distance,
 * row)), bit for bit: exact ties kept in row order, the negative inner
 * product, n beyond a tile's rows, a tile of no rows, queries in several
 * batches on the GPU, its two selections (a block a query up to 32, a
 * sort beyond), and the interrupt between blocks of work.
 */
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double
ref_dist(const double *q, const double *b, int d, pggpu_metric metric)
{
	double		s = 0;

	for (int j = 0; j < d; j++)
	{
		if (metric == PGGPU_METRIC_INNER_PRODUCT)
			s += q[j] * b[j];
		else
		{
			double		t = q[j] - b[j];

			s += t * t;
		}
	}
	return metric == PGGPU_METRIC_INNER_PRODUCT ? -s : s;
}

/* the n least by (distance, row), by insertion */
static void
reference(const double *Q, int64_t nq, const double *B, int64_t nb, int d, pggpu_metric metric, int n,
		  int64_t *idx, double *dist)
{
	for (int64_t i = 0; i < nq; i++)
	{
		int64_t    *ri = idx + i * n;
		double	   *rd = dist + i * n;
		int			m = 0;

		for (int64_t r = 0; r < nb; r++)
		{
			double		v = ref_dist(Q + i * d, B + r * d, d, metric);
			int			p = m < n ? m++ : n;

			/* (ties: a later row after the earlier) */
			while (p > 0 && v < rd[p - 1])
			{
				if (p < n)
					rd[p] = rd[p - 1], ri[p] = ri[p - 1];
				p--;
			}
			if (p < n)
				rd[p] = v, ri[p] = r;
		}
		for (int r = m; r < n; r++)
			rd[r] = INFINITY, ri[r] = -1;
	}
}

static int	knn_interrupts;

static void
count_interrupt(void *arg)
{
	(void) arg;
	knn_interrupts++;
}

static void
knn_case(const char *name, const double *Q, int64_t nq, const double *B, int64_t nb, int d,
		 pggpu_metric metric, int n)
{
	int64_t    *ri = malloc(sizeof(int64_t) * (nq * n + 1));
	double	   *rd = malloc(sizeof(double) * (nq * n + 1));

	reference(Q, nq, B, nb, d, metric, n, ri, rd);
	for (int be = 0; be < 2; be++)
	{
		pggpu_knn  *kn;
		pggpu_error err = {0};
		int64_t    *idx = malloc(sizeof(int64_t) * (nq * n + 1));
		double	   *dist = malloc(sizeof(double) * (nq * n + 1));
		int64_t		bad = 0;

		snprintf(case_name, sizeof(case_name), "knn %s on the %s", name, be ? "GPU" : "CPU");
		if (be == 1 && !have_gpu)
		{
			gpu_skipped++;
			free(idx), free(dist);
			continue;
		}
		knn_interrupts = 0;
		if (pggpu_knn_open(&kn, be ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU, -1, d, metric, Q, nq, n, &err) !=
			PGGPU_OK)
		{
			CHECK(false, "open: %s", err.msg);
			free(idx), free(dist);
			continue;
		}
		pggpu_knn_set_interrupts(kn, count_interrupt, NULL);
		if (pggpu_knn_tile(kn, B, nb, idx, dist, &err) != PGGPU_OK)
			CHECK(false, "tile: %s", err.msg);
		else
		{
			for (int64_t i = 0; i < nq * n; i++)
				bad += idx[i] != ri[i] || memcmp(&dist[i], &rd[i], sizeof(double)) != 0;
			CHECK(bad == 0, "%lld of %lld neighbours differ from the reference", (long long) bad,
				  (long long) (nq * n));
			/* a CPU tile of over 2^24 terms polls; the GPU polls a batch (a tile of rows) */
			if ((double) nq * nb * d > 3.0 * (1 << 24) || (be == 1 && nb > 0))
				CHECK(knn_interrupts > 0 || nq == 0, "never polled for interrupts");
		}
		pggpu_knn_close(kn);
		free(idx), free(dist);
	}
	free(ri), free(rd);
}

/* values on a grid of quarters: many exact ties */
static double *
rows(int64_t m, int d, unsigned seed, bool grid)
{
	double	   *x = malloc(sizeof(double) * (m * d + 1));

	srand(seed);
	for (int64_t i = 0; i < m * d; i++)
		x[i] = grid ? (rand() % 9) * 0.25 : (rand() / (double) RAND_MAX - 0.5) * 10;
	return x;
}

void
test_knn(void)
{
	static const struct
	{
		int64_t		nq,
					nb;
		int			d,
					n;
		pggpu_metric metric;
		bool		grid;
	}			cases[] = {
		{7, 50, 3, 5, PGGPU_METRIC_EUCLIDEAN, false},
		{33, 1000, 17, 10, PGGPU_METRIC_EUCLIDEAN, false},
		{12, 400, 2, 9, PGGPU_METRIC_EUCLIDEAN, true},	/* ties */
		{20, 500, 40, 7, PGGPU_METRIC_INNER_PRODUCT, false},
		{20, 500, 3, 12, PGGPU_METRIC_INNER_PRODUCT, true},
		{5, 30, 64, 45, PGGPU_METRIC_EUCLIDEAN, false},	/* n beyond the tile */
		{9, 3000, 5, 32, PGGPU_METRIC_EUCLIDEAN, true},	/* the GPU's block select at its most */
		{6, 3000, 5, 33, PGGPU_METRIC_EUCLIDEAN, true},	/* and a sort past it */
		{4, 0, 8, 3, PGGPU_METRIC_EUCLIDEAN, false},	/* no rows */
		{300, 70000, 4, 10, PGGPU_METRIC_EUCLIDEAN, true},	/* batches on the GPU; polls */
	};

	for (int c = 0; c < (int) (sizeof(cases) / sizeof(cases[0])); c++)
	{
		char		name[120];
		double	   *Q = rows(cases[c].nq, cases[c].d, 11 + c, cases[c].grid);
		double	   *B = rows(cases[c].nb, cases[c].d, 101 + c, cases[c].grid);

		snprintf(name, sizeof(name), "%lld x %lld, d %d, n %d, %s%s", (long long) cases[c].nq,
				 (long long) cases[c].nb, cases[c].d, cases[c].n,
				 cases[c].metric == PGGPU_METRIC_INNER_PRODUCT ? "inner product" : "euclidean",
				 cases[c].grid ? ", ties" : "");
		knn_case(name, Q, cases[c].nq, B, cases[c].nb, cases[c].d, cases[c].metric, cases[c].n);
		free(Q);
		free(B);
	}
	/* a bad call */
	{
		pggpu_knn  *kn;
		pggpu_error err = {0};
		double		q[2] = {0, 0};

		snprintf(case_name, sizeof(case_name), "knn n = 0");
		CHECK(pggpu_knn_open(&kn, PGGPU_BACKEND_CPU, -1, 2, PGGPU_METRIC_EUCLIDEAN, q, 1, 0, &err) ==
			  PGGPU_ERR_INVALID && kn == NULL, "n = 0 accepted");
	}
}
