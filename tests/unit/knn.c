/*
 * knn.c - nearest neighbours (pggpu_knn): each backend by each route (the
 * plain loop, the certified product) against a reference written here
 * (every row's plain-loop distance, the n least by (distance, row)), bit
 * for bit, and with a bound (the rows within it): exact ties kept in row
 * order, the negative inner product, n beyond a tile's rows, a tile of no
 * rows, queries in several batches on the GPU, its two selections (a
 * block a query up to 32, a sort beyond), queries taken from the host's
 * memory a batch at a time, the product's pruning, its rows
 * too large or too small for floats, duplicates, the interrupt
 * between blocks of work, and tiles put a part at a time (parts pinned for
 * the GPU and not, one tile filling while the other is compared).
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

/* the n least by (distance, key: rank[r], or r), by insertion: the keys into idx */
static void
reference(const double *Q, int64_t nq, const double *B, int64_t nb, int d, pggpu_metric metric, int n,
		  const int32_t *rank, int64_t *idx, double *dist)
{
	for (int64_t i = 0; i < nq; i++)
	{
		int64_t    *ri = idx + i * n;
		double	   *rd = dist + i * n;
		int			m = 0;

		for (int64_t r = 0; r < nb; r++)
		{
			double		v = ref_dist(Q + i * d, B + r * d, d, metric);
			int64_t		key = rank ? rank[r] : r;
			int			p = m < n ? m++ : n;

			while (p > 0 && (v < rd[p - 1] || (v == rd[p - 1] && key < ri[p - 1])))
			{
				if (p < n)
					rd[p] = rd[p - 1], ri[p] = ri[p - 1];
				p--;
			}
			if (p < n)
				rd[p] = v, ri[p] = key;
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

/*
 * Results with a bound: the entries within bound[q] as the reference's
 * (those beyond may be left out, or be other rows), every entry's distance
 * that row's own, in order
 */
static int64_t
bounded_bad(const double *Q, int64_t nq, const double *B, int64_t nb, const int64_t *row_of, int d, pggpu_metric metric, int n,
			const double *bound, const int64_t *ri, const double *rd, const int64_t *idx, const double *dist)
{
	int64_t		bad = 0;

	for (int64_t i = 0; i < nq; i++)
		for (int r = 0; r < n; r++)
		{
			int64_t		e = i * n + r;
			bool		ref_in = ri[e] >= 0 && rd[e] <= bound[i];

			if (ref_in)
				bad += idx[e] != ri[e] || memcmp(&dist[e], &rd[e], sizeof(double)) != 0;
			else if (idx[e] >= nb || idx[e] < -1)
				bad++;
			else if (idx[e] >= 0)
				bad += dist[e] <= bound[i] || dist[e] != ref_dist(Q + i * d, B + row_of[idx[e]] * d, d, metric) ||
					(r > 0 && dist[e] < dist[e - 1]);
		}
	return bad;
}

static bool float_tiles;		/* knn_case_frac: tiles of floats, where the rows are */

static const char *const route_names[] = {"auto", "plain loop", "product"};

/*
 * Each backend by each route against the reference, bit for bit; then with
 * a bound (half the reference's n-th distance, and some queries' none):
 * the rows within it the same; rank NULL or a permutation (ties by it).
 * Returns the product's pairs measured on the CPU (over pairs: *frac), for
 * the cases that check it prunes.
 */
static void
knn_case_frac(const char *name, const double *Q, int64_t nq, const double *B, int64_t nb, int d,
			  pggpu_metric metric, int n, const int32_t *rank, double *frac)
{
	int64_t    *ri = malloc(sizeof(int64_t) * (nq * n + 1));
	double	   *rd = malloc(sizeof(double) * (nq * n + 1));
	double	   *bound = malloc(sizeof(double) * (nq + 1));
	int64_t    *row_of = malloc(sizeof(int64_t) * (nb + 1));
	/* rows that are floats go as floats (the buffer's other type) where the case asks */
	bool		f32 = float_tiles;

	for (int64_t i = 0; i < nb * d && f32; i++)
		f32 = (double) (float) B[i] == B[i];
	for (int64_t r = 0; r < nb; r++)
		row_of[rank ? rank[r] : r] = r;
	reference(Q, nq, B, nb, d, metric, n, rank, ri, rd);
	for (int64_t i = 0; i < nq; i++)
		bound[i] = i % 3 == 2 || ri[i * n + n - 1] < 0 ? INFINITY : rd[i * n + n - 1] / 2;
	if (frac)
		*frac = -1;
	for (int be = 0; be < 2; be++)
		for (int route = PGGPU_KNN_PLAIN; route <= PGGPU_KNN_PRODUCT; route++)
			for (int bounded = 0; bounded < 2; bounded++)
			{
				pggpu_knn  *kn;
				pggpu_error err = {0};
				int64_t    *idx = malloc(sizeof(int64_t) * (nq * n + 1));
				double	   *dist = malloc(sizeof(double) * (nq * n + 1));
				int64_t		bad = 0;
				pggpu_status st;

				snprintf(case_name, sizeof(case_name), "knn %s on the %s, %s%s%s", name, be ? "GPU" : "CPU",
						 route_names[route], bounded ? ", bounded" : "", f32 ? ", float tiles" : "");
				if (be == 1 && !have_gpu)
				{
					gpu_skipped++;
					free(idx), free(dist);
					continue;
				}
				/* (UNIT_TRACE: each case named as it starts, for a crash on a host without a debugger) */
				if (getenv("UNIT_TRACE"))
					fprintf(stderr, "%s\n", case_name);
				knn_interrupts = 0;
				pggpu_knn_force_route((pggpu_knn_route) route);
				st = pggpu_knn_open(&kn, be ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU, -1, d, metric, Q, nq, n, &err);
				pggpu_knn_force_route(PGGPU_KNN_AUTO);
				if (st != PGGPU_OK)
				{
					CHECK(false, "open: %s", err.msg);
					free(idx), free(dist);
					continue;
				}
				pggpu_knn_set_interrupts(kn, count_interrupt, NULL);
				/* the GPU's product selects up to 32 a query; the CPU's needs OpenBLAS */
				if (route == PGGPU_KNN_PRODUCT && (be == 0 || n <= 32))
					CHECK(pggpu_knn_route_taken(kn) == PGGPU_KNN_PRODUCT, "the product was not taken");
				if (pggpu_knn_tile(kn, B, nb, f32, rank, bounded ? bound : NULL, idx, dist, &err) != PGGPU_OK)
					CHECK(false, "tile: %s", err.msg);
				else
				{
					int64_t		pairs,
								measured;

					if (bounded)
						bad = bounded_bad(Q, nq, B, nb, row_of, d, metric, n, bound, ri, rd, idx, dist);
					else
						for (int64_t i = 0; i < nq * n; i++)
							bad += idx[i] != ri[i] || memcmp(&dist[i], &rd[i], sizeof(double)) != 0;
					CHECK(bad == 0, "%lld of %lld neighbours differ from the reference", (long long) bad,
						  (long long) (nq * n));
					/* a CPU tile of over 2^24 terms polls; the GPU polls a tile */
					if ((double) nq * nb * d > 3.0 * (1 << 24) || (be == 1 && nb > 0))
						CHECK(knn_interrupts > 0 || nq == 0, "never polled for interrupts");
					pggpu_knn_counts(kn, &pairs, &measured);
					CHECK(pairs == nq * nb && measured <= pairs &&
						  (pggpu_knn_route_taken(kn) == PGGPU_KNN_PRODUCT || measured == pairs),
						  "%lld pairs, %lld measured", (long long) pairs, (long long) measured);
					if (frac && be == 0 && route == PGGPU_KNN_PRODUCT && !bounded && pairs > 0)
						*frac = (double) measured / pairs;
				}
				pggpu_knn_close(kn);
				free(idx), free(dist);
			}
	free(ri), free(rd), free(bound), free(row_of);
}

static void
knn_case(const char *name, const double *Q, int64_t nq, const double *B, int64_t nb, int d,
		 pggpu_metric metric, int n)
{
	knn_case_frac(name, Q, nq, B, nb, d, metric, n, NULL, NULL);
}

/*
 * A part of rows r0..r0+n of B by columns (pitch apart: value j of row r
 * at j * pitch + r) or by rows (r * pitch + j), in memory pinned for the
 * GPUs (pggpu_host_register, whole pages) or not
 */
static void *
part_of(const double *B, int64_t r0, int64_t n, int64_t pitch, int d, bool f32, bool by_rows, bool pin,
		size_t *bytes)
{
	size_t		vb = f32 ? sizeof(float) : sizeof(double);
	char	   *p;

	*bytes = (vb * (size_t) pitch * (by_rows ? n : d) + 4095) & ~(size_t) 4095;
	p = aligned_alloc(4096, *bytes);
	for (int j = 0; j < d; j++)
		for (int64_t r = 0; r < n; r++)
		{
			int64_t		e = by_rows ? r * pitch + j : j * pitch + r;

			if (f32)
				((float *) p)[e] = (float) B[(r0 + r) * d + j];
			else
				((double *) p)[e] = B[(r0 + r) * d + j];
		}
	if (pin)
		CHECK(pggpu_host_register(p, *bytes), "a part could not be pinned");
	return p;
}

/* a tile's results against the reference over its rows alone */
static void
tile_check(pggpu_knn *kn, const double *Q, int64_t nq, const double *B, int64_t nb, int d, pggpu_metric metric,
		   int n, const char *what)
{
	int64_t    *ri = malloc(sizeof(int64_t) * nq * n),
			   *idx = malloc(sizeof(int64_t) * nq * n);
	double	   *rd = malloc(sizeof(double) * nq * n),
			   *dist = malloc(sizeof(double) * nq * n);
	pggpu_error err = {0};
	int64_t		bad = 0;

	reference(Q, nq, B, nb, d, metric, n, NULL, ri, rd);
	if (pggpu_knn_finish(kn, idx, dist, &err) != PGGPU_OK)
		CHECK(false, "finish: %s", err.msg);
	else
	{
		for (int64_t i = 0; i < nq * n; i++)
			bad += idx[i] != ri[i] || memcmp(&dist[i], &rd[i], sizeof(double)) != 0;
		CHECK(bad == 0, "%s: %lld of %lld neighbours differ from the reference", what, (long long) bad,
			  (long long) (nq * n));
	}
	free(ri), free(idx), free(rd), free(dist);
}

/*
 * Two tiles put a part at a time (parts of 1 row, a few hundred and the
 * rest, by columns further apart than their rows or by rows further apart
 * than their values, two of three by rows (flip: by columns), every other
 * one pinned on the GPU, the tile's room
 * larger than its rows), the second filled while the first is compared;
 * each tile's results against the reference
 */
static void
put_case(const char *name, const double *Q, int64_t nq, const double *B0, int64_t nb, int d, pggpu_metric metric,
		 int n, bool f32, bool flip)
{
	int64_t		half = nb / 2;
	/* (floats: the reference on the rows rounded as the tiles hold them) */
	double	   *B = malloc(sizeof(double) * (nb * d + 1));

	for (int64_t i = 0; i < nb * d; i++)
		B[i] = f32 ? (double) (float) B0[i] : B0[i];

	for (int be = 0; be < 2; be++)
	{
		pggpu_knn  *kn;
		pggpu_error err = {0};
		int			part = 0;

		snprintf(case_name, sizeof(case_name), "knn put: %s on the %s%s%s", name, be ? "GPU" : "CPU",
				 f32 ? ", floats" : "", flip ? ", flipped" : "");
		if (be == 1 && !have_gpu)
		{
			gpu_skipped++;
			continue;
		}
		if (getenv("UNIT_TRACE"))
			fprintf(stderr, "%s\n", case_name);
		if (pggpu_knn_open(&kn, be ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU, -1, d, metric, Q, nq, n, &err) != PGGPU_OK)
		{
			CHECK(false, "open: %s", err.msg);
			continue;
		}
		CHECK(pggpu_knn_put(kn, 0, B, 1, 1, false, false, &err) == PGGPU_ERR_INVALID, "a put before a fill accepted");
		for (int t = 0; t < 2; t++)
		{
			int64_t		lo = t == 0 ? 0 : half,
						hi = t == 0 ? half : nb;

			if (pggpu_knn_fill(kn, hi - lo + 5, f32, &err) != PGGPU_OK)
			{
				CHECK(false, "fill: %s", err.msg);
				break;
			}
			CHECK(pggpu_knn_put(kn, hi - lo, B, 6, 6, false, false, &err) == PGGPU_ERR_INVALID,
				  "a put past the tile's room accepted");
			CHECK(pggpu_knn_put(kn, 0, B, d - 1, 1, true, false, &err) == PGGPU_ERR_INVALID,
				  "rows closer than their values accepted");
			for (int64_t r = lo; r < hi; part++)
			{
				int64_t		take = r == lo ? 1 : part % 3 == 1 ? 300 : hi - r;
				size_t		bytes;
				bool		pin = be == 1 && part % 2 == 1;
				bool		by_rows = (part % 3 != 0) != flip;
				int64_t		pitch = by_rows ? d + 2 : take + 3;
				void	   *p;

				take = take < hi - r ? take : hi - r;
				p = part_of(B, r, take, pitch, d, f32, by_rows, pin, &bytes);
				if (pggpu_knn_put(kn, r - lo, p, pitch, take, by_rows, pin, &err) != PGGPU_OK)
					CHECK(false, "put: %s", err.msg);
				if (pin)
					pggpu_host_unregister(p);
				free(p);
				r += take;
			}
			if (t == 1)
				tile_check(kn, Q, nq, B, half, d, metric, n, "the first tile");
			if (pggpu_knn_start(kn, hi - lo, NULL, NULL, &err) != PGGPU_OK)
				CHECK(false, "start: %s", err.msg);
		}
		tile_check(kn, Q, nq, B + half * d, nb - half, d, metric, n, "the second tile");
		pggpu_knn_close(kn);
	}
	free(B);
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
	/* tiles of floats: the grid's rows (quarters) and rows rounded to float */
	float_tiles = true;
	{
		double	   *Q = rows(25, 40, 3, false);
		double	   *B = rows(2000, 40, 4, false);

		for (int64_t i = 0; i < 2000 * 40; i++)
			B[i] = (float) B[i];
		knn_case("float tiles, 25 x 2000, d 40, n 7", Q, 25, B, 2000, 40, PGGPU_METRIC_EUCLIDEAN, 7);
		knn_case("float tiles, inner product", Q, 25, B, 2000, 40, PGGPU_METRIC_INNER_PRODUCT, 7);
		knn_case("float tiles, n 50 (a sort)", Q, 25, B, 2000, 40, PGGPU_METRIC_EUCLIDEAN, 50);
		free(Q), free(B);
	}
	float_tiles = false;
	/* ties by a rank that is not the row order (the caller's ids), both routes, both selections */
	{
		int64_t		nb = 2500;
		double	   *Q = rows(30, 20, 5, true);
		double	   *B = rows(nb, 20, 6, true);
		int32_t    *rank = malloc(sizeof(int32_t) * nb);

		for (int64_t r = 0; r < nb; r++)
			rank[r] = (int32_t) ((r * 997) % nb);	/* (997 and 2500 coprime: a permutation) */
		for (int64_t r = 0; r < nb; r++)
			memcpy(B + r * 20, B + (r % 300) * 20, sizeof(double) * 20);
		knn_case_frac("ranked ties, 30 x 2500, d 20, n 9", Q, 30, B, nb, 20, PGGPU_METRIC_EUCLIDEAN, 9, rank, NULL);
		knn_case_frac("ranked ties, n 40 (a sort)", Q, 30, B, nb, 20, PGGPU_METRIC_EUCLIDEAN, 40, rank, NULL);
		free(Q), free(B), free(rank);
	}
	/*
	 * The product's cases: wide random rows (it must leave most pairs
	 * unmeasured), duplicated rows (exact ties the bound cannot split),
	 * rows too large for floats and rows that underflow them (measured
	 * always), the inner product, and a base far from the queries' mean
	 */
	{
		int64_t		nq = 40,
					nb = 3000;
		int			d = 96;
		double	   *Q = rows(nq, d, 7, false);
		double	   *B = rows(nb, d, 8, false);
		double		frac;

		knn_case_frac("product, 40 x 3000, d 96, n 10", Q, nq, B, nb, d, PGGPU_METRIC_EUCLIDEAN, 10, NULL, &frac);
		snprintf(case_name, sizeof(case_name), "knn product prunes");
		CHECK(frac >= 0 && frac < 0.2, "the product measured %.3f of the pairs", frac);
		knn_case("product, inner product", Q, nq, B, nb, d, PGGPU_METRIC_INNER_PRODUCT, 10);
		/* duplicates: every row of B seven times over, queries among them */
		for (int64_t r = 0; r < nb; r++)
			memcpy(B + r * d, B + (r / 7) * d, sizeof(double) * d);
		memcpy(Q, B + 70 * d, sizeof(double) * d);
		knn_case("product, duplicated rows", Q, nq, B, nb, d, PGGPU_METRIC_EUCLIDEAN, 12);
		/* magnitudes beyond the product (2^45), tiny values (2^-140), and an offset base */
		for (int j = 0; j < d; j++)
		{
			B[5 * d + j] = ldexp(B[5 * d + j], 45);
			B[9 * d + j] = ldexp(B[9 * d + j], -140);
			Q[3 * d + j] = ldexp(Q[3 * d + j], -140);
			Q[4 * d + j] = ldexp(Q[4 * d + j], 45);
		}
		knn_case("product, huge and tiny rows", Q, nq, B, nb, d, PGGPU_METRIC_EUCLIDEAN, 10);
		for (int64_t i = 0; i < nb * d; i++)
			B[i] += 1000;
		knn_case("product, a base far off", Q, nq, B, nb, d, PGGPU_METRIC_EUCLIDEAN, 5);
		free(Q);
		free(B);
	}
	/* queries the GPU takes from the host's memory, 7 at a time (both routes, ties, a sort) */
	{
		double	   *Q = rows(40, 24, 21, true);
		double	   *B = rows(3000, 24, 22, true);

		pggpu_knn_force_resident(7);
		knn_case("queries 7 at a time from the host, n 10", Q, 40, B, 3000, 24, PGGPU_METRIC_EUCLIDEAN, 10);
		knn_case("queries 7 at a time from the host, n 40", Q, 40, B, 3000, 24, PGGPU_METRIC_EUCLIDEAN, 40);
		knn_case("queries 7 at a time from the host, inner product", Q, 40, B, 3000, 24,
				 PGGPU_METRIC_INNER_PRODUCT, 10);
		pggpu_knn_force_resident(0);
		free(Q), free(B);
	}
	/* tiles put a part at a time: doubles and floats, both routes' shapes, a part beyond the bounce buffer */
	{
		double	   *Q = rows(12, 40, 31, false);
		double	   *B = rows(9000, 40, 32, true);
		double	   *W = rows(7000, 400, 33, false);

		put_case("9000 rows, d 40, n 8", Q, 12, B, 9000, 40, PGGPU_METRIC_EUCLIDEAN, 8, false, false);
		put_case("9000 rows, d 40, n 8", Q, 12, B, 9000, 40, PGGPU_METRIC_EUCLIDEAN, 8, true, true);
		put_case("9000 rows, d 40, n 40, inner product", Q, 12, B, 9000, 40, PGGPU_METRIC_INNER_PRODUCT, 40, true,
				 false);
		free(Q);
		Q = rows(5, 400, 34, false);
		for (int flip = 0; flip < 2; flip++)
			put_case("7000 rows, d 400, a part beyond the bounce buffer", Q, 5, W, 7000, 400, PGGPU_METRIC_EUCLIDEAN,
					 5, flip, flip);
		free(Q), free(B), free(W);
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
