/*
 * backend_cpu.c - the CPU backend: the reference the CUDA kernels are tested
 * against, and what users get without a GPU.  Plain C, single-threaded (it
 * runs inside a PostgreSQL backend).
 *
 * Arithmetic rules shared with backend_gpu.cu, so both give bit-identical
 * distances: a squared distance is summed over columns in order 0..d-1 from
 * 0.0, each term (x - c) * (x - c) rounded on its own (no fused
 * multiply-add; this file is built with -ffp-contract=off).
 *
 * The passes over the rows work on blocks of RB = 32 consecutive rows of a
 * tile, with GCC's vector extensions (vectors of 8 doubles, which the
 * compiler maps onto the machine's registers): each vector lane is one row,
 * and keeps that row's rule above, so the results are bit-identical to the
 * plain loop over rows.  On x86-64 the block routines are built for AVX-512,
 * AVX2 and the baseline, one picked at load time (target_clones).
 */
#include "compute_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RB 32					/* rows in a block; divides every tile */
#define VW 8					/* doubles in a vector */
#define NV (RB / VW)

typedef struct cpu_state
{
	double	   *X;				/* tiled SoA, cap_tiles tiles */
	int64_t		cap_tiles;
	bool		finished;		/* a partial batch was pushed */
	/* k-means state */
	double	   *C;
	int32_t    *labels;
	double	   *dist2;
	double	   *sums;
	int64_t    *cnt;
	double	   *xb;				/* a block of rows, column j at xb + j * RB */
	/* the PGGPU_PICK_SAMPLE draw km_point made in its pass (see next_key) */
	bool		drawn;
	uint64_t	drawn_key;
	int64_t		drawn_row;
} cpu_state;

#define ST(ds) ((cpu_state *) (ds)->impl)
#define TILE(ds) ((int64_t) 1 << (ds)->log_b)

static pggpu_status
oom(pggpu_error *err, int64_t bytes)
{
	return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY,
					  "out of host memory allocating %.1f MB", bytes / 1048576.0);
}

static pggpu_status
ensure_tiles(pggpu_data *ds, int64_t tiles, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int64_t		tile_bytes = TILE(ds) * ds->d * (int64_t) sizeof(double);
	int64_t		cap = s->cap_tiles ? s->cap_tiles : 1;
	double	   *x;

	if (tiles <= s->cap_tiles)
		return PGGPU_OK;
	while (cap < tiles)
		cap *= 2;
	x = (double *) realloc(s->X, cap * tile_bytes);
	if (x == NULL)
		return oom(err, cap * tile_bytes);
	s->X = x;
	s->cap_tiles = cap;
	return PGGPU_OK;
}

static pggpu_status
cpu_open(pggpu_data *ds, int gpu_index, int64_t expected_rows, pggpu_error *err)
{
	(void) gpu_index;
	(void) expected_rows;
	ds->impl = calloc(1, sizeof(cpu_state));
	if (ds->impl == NULL)
		return oom(err, sizeof(cpu_state));
	return ensure_tiles(ds, 1, err);
}

/* the staging buffer is the next tile of the data itself: no copy */
static double *
cpu_batch(pggpu_data *ds)
{
	return ST(ds)->X + (ds->n >> ds->log_b) * TILE(ds) * ds->d;
}

static pggpu_status
cpu_push(pggpu_data *ds, int64_t nrows, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	double	   *t = cpu_batch(ds);
	int64_t		b = TILE(ds);

	if (s->finished)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no batch may follow a partial batch");
	for (int j = 0; j < ds->d && nrows < b; j++)
		memset(t + j * b + nrows, 0, sizeof(double) * (b - nrows));
	ds->n += nrows;
	if (nrows < b)
	{
		s->finished = true;
		return PGGPU_OK;
	}
	return ensure_tiles(ds, (ds->n >> ds->log_b) + 1, err);
}

static void
cpu_km_free(cpu_state *s)
{
	free(s->C), free(s->labels), free(s->dist2), free(s->sums), free(s->cnt);
	free(s->xb);
	s->C = s->dist2 = s->sums = s->xb = NULL;
	s->labels = NULL;
	s->cnt = NULL;
}

static void
cpu_close(pggpu_data *ds)
{
	cpu_state  *s = ST(ds);

	if (s == NULL)
		return;
	cpu_km_free(s);
	free(s->X);
	free(s);
	ds->impl = NULL;
}

static int64_t
used_elems(pggpu_data *ds)
{
	return ((ds->n + TILE(ds) - 1) >> ds->log_b) * TILE(ds) * ds->d;
}

static pggpu_status
cpu_maxabs(pggpu_data *ds, double *out, pggpu_error *err)
{
	const double *x = ST(ds)->X;
	int64_t		len = used_elems(ds);
	double		m = 0;

	(void) err;
	for (int64_t i = 0; i < len; i++)
		if (fabs(x[i]) > m)
			m = fabs(x[i]);
	*out = m;
	return PGGPU_OK;
}

static pggpu_status
cpu_scale(pggpu_data *ds, double factor, pggpu_error *err)
{
	double	   *x = ST(ds)->X;
	int64_t		len = used_elems(ds);

	(void) err;
	for (int64_t i = 0; i < len; i++)
		x[i] *= factor;
	return PGGPU_OK;
}

static pggpu_status
cpu_km_begin(pggpu_data *ds, int k, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int64_t		n = ds->n > 0 ? ds->n : 1;
	int64_t		kd = (int64_t) k * ds->d;

	cpu_km_free(s);
	s->C = (double *) malloc(sizeof(double) * kd);
	s->sums = (double *) malloc(sizeof(double) * kd);
	s->cnt = (int64_t *) malloc(sizeof(int64_t) * k);
	s->labels = (int32_t *) malloc(sizeof(int32_t) * n);
	/* whole blocks: point_block writes the last one's rows past n too */
	s->dist2 = (double *) calloc(n + RB, sizeof(double));
	s->xb = (double *) malloc(sizeof(double) * RB * ds->d);
	if (!s->C || !s->sums || !s->cnt || !s->labels || !s->dist2 || !s->xb)
	{
		cpu_km_free(s);
		return oom(err, (2 * kd + k + 3 * n + RB * ds->d) * 8);
	}
	memset(s->labels, 0xff, sizeof(int32_t) * n);
	s->drawn = false;
	return PGGPU_OK;
}

static pggpu_status
cpu_put_centroids(pggpu_data *ds, const double *C, pggpu_error *err)
{
	(void) err;
	memcpy(ST(ds)->C, C, sizeof(double) * ds->k * ds->d);
	return PGGPU_OK;
}

static pggpu_status
cpu_get_centroids(pggpu_data *ds, double *C, pggpu_error *err)
{
	(void) err;
	memcpy(C, ST(ds)->C, sizeof(double) * ds->k * ds->d);
	return PGGPU_OK;
}

/* ---- blocks of rows --------------------------------------------------------- */


typedef double vd __attribute__((vector_size(VW * sizeof(double))));
typedef int64_t vl __attribute__((vector_size(VW * sizeof(int64_t))));
typedef uint64_t vu __attribute__((vector_size(VW * sizeof(uint64_t))));

/* -DPGGPU_NO_CLONES: one copy, for the -march given (tests of each copy) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PGGPU_NO_CLONES)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

/* rows between two calls of the caller's interrupt callback in a pass */
#define POLL_ROWS 4096

/* a vector from 8 doubles at any alignment (a macro: no vector-valued calls) */
#define LOAD_VD(v, p) memcpy(&(v), (p), sizeof(vd))

static inline void
poll_interrupts(pggpu_data *ds, int64_t i)
{
	if (ds->interrupt && (i & (POLL_ROWS - 1)) == 0)
		ds->interrupt(ds->interrupt_arg);
}

/* the block of rows i .. i + RB - 1: column j at x + j * tile */
static inline const double *
block_at(pggpu_data *ds, int64_t i)
{
	return ST(ds)->X + pggpu_at(i, 0, ds->d, ds->log_b);
}

/*
 * Nearest of the k centroids (lowest index on ties) and its squared distance
 * for each row of a block: best[RB], lab[RB].
 */
CLONES static void
nearest_block(const double *x, int64_t b, int d, const double *C, int k,
			  double *best_out, int32_t *lab_out)
{
	vd			best[NV];
	vl			lab[NV];

#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
	{
		best[v] = (vd) {0} + INFINITY;
		lab[v] = (vl) {0};
	}
	for (int c = 0; c < k; c++)
	{
		const double *cc = C + (int64_t) c * d;
		vd			acc[NV];

#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			acc[v] = (vd) {0};
		for (int j = 0; j < d; j++)
		{
			const double *xj = x + j * b;
			double		cj = cc[j];

#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
			{
				vd			t;

				LOAD_VD(t, xj + v * VW);
				t -= cj;
				acc[v] += t * t;
			}
		}
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
		{
			vl			m = (vl) (acc[v] < best[v]);

			best[v] = (vd) (((vl) acc[v] & m) | ((vl) best[v] & ~m));
			lab[v] = (lab[v] & ~m) | (((vl) {0} + c) & m);
		}
	}
	for (int v = 0; v < NV; v++)
		for (int q = 0; q < VW; q++)
		{
			best_out[v * VW + q] = best[v][q];
			lab_out[v * VW + q] = (int32_t) lab[v][q];
		}
}

/*
 * The squared distance d of each row of a block to centroid cc, into the
 * block's w[RB]: w := d (set) or w := min(w, d).
 */
CLONES static void
point_block(const double *x, int64_t b, int d, const double *cc, double *w, bool set)
{
	vd			acc[NV];

#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
		acc[v] = (vd) {0};
	for (int j = 0; j < d; j++)
	{
		const double *xj = x + j * b;
		double		cj = cc[j];

#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
		{
			vd			t;

			LOAD_VD(t, xj + v * VW);
			t -= cj;
			acc[v] += t * t;
		}
	}
#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
	{
		vd			old;
		vl			m;

		LOAD_VD(old, w + v * VW);
		m = set ? (vl) {0} - 1 : (vl) (acc[v] < old);
		acc[v] = (vd) (((vl) acc[v] & m) | ((vl) old & ~m));
		memcpy(w + v * VW, &acc[v], sizeof(vd));
	}
}

static pggpu_status
cpu_km_step(pggpu_data *ds, bool update, pggpu_step_stats *out, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int			d = ds->d;
	int			k = ds->k;
	int64_t		b = TILE(ds);
	pggpu_step_stats st = {0, 0, 0.0};

	(void) err;
	s->drawn = false;
	if (update)
	{
		memset(s->sums, 0, sizeof(double) * k * d);
		memset(s->cnt, 0, sizeof(int64_t) * k);
	}
	for (int64_t i0 = 0; i0 < ds->n; i0 += RB)
	{
		const double *src = block_at(ds, i0);
		const double *x = s->xb;
		int			rows = ds->n - i0 < RB ? (int) (ds->n - i0) : RB;
		double		best[RB];
		int32_t		lab[RB];

		/*
		 * The block is read k times: copied first, since its columns lie a
		 * tile apart and would share the same few sets of the L1 cache.
		 */
		poll_interrupts(ds, i0);
		for (int j = 0; j < d; j++)
			memcpy(s->xb + j * RB, src + j * b, sizeof(double) * RB);
		nearest_block(x, RB, d, s->C, k, best, lab);
		for (int q = 0; q < rows; q++)
		{
			st.changed += s->labels[i0 + q] != lab[q];
			s->labels[i0 + q] = lab[q];
			s->dist2[i0 + q] = best[q];
			st.inertia += best[q];
		}
		/* each cluster's sums in row order, as a loop over rows adds them */
		if (update)
			for (int q = 0; q < rows; q++)
			{
				double	   *sum = s->sums + (int64_t) lab[q] * d;

				s->cnt[lab[q]]++;
				for (int j = 0; j < d; j++)
					sum[j] += x[j * RB + q];
			}
	}
	if (update)
		for (int c = 0; c < k; c++)
		{
			if (s->cnt[c] == 0)
			{
				st.empty++;
				continue;
			}
			for (int j = 0; j < d; j++)
				s->C[(int64_t) c * d + j] = s->sums[(int64_t) c * d + j] / (double) s->cnt[c];
		}
	*out = st;
	return PGGPU_OK;
}

static pggpu_status
cpu_km_counts(pggpu_data *ds, int64_t *counts, pggpu_error *err)
{
	cpu_state  *s = ST(ds);

	(void) err;
	memset(counts, 0, sizeof(int64_t) * ds->k);
	for (int64_t i = 0; i < ds->n; i++)
		counts[s->labels[i]]++;
	return PGGPU_OK;
}

/*
 * Both picks minimise a key, lowest row on ties: SAMPLE uses -log(u_i) / w_i
 * (an exponential race: row i wins with probability w_i / sum w), FARTHEST
 * uses -dist2 (rows already on their centroid never qualify: re-seeding an
 * empty cluster with one would change nothing).  backend_gpu.cu computes the
 * same keys.
 *
 * The race over rows [i0, i1), on from (*best, *row).  Since -log(u) >=
 * 1 - u, a row with 1 - u > best * w (with a margin far above the rounding
 * of either side) cannot win and needs no log: after the first few rows
 * best is small, and almost every row is settled by its hash alone.  The
 * winner is the one the plain loop finds.
 */
static inline void
race_row(double wi, double u, int64_t i, double *best, int64_t *row)
{
	double		kv = -log(u) / wi;

	if (kv < *best)
	{
		*best = kv;
		*row = i;
	}
}

/* pggpu_mix64 on a vector of 8 */
#define MIX64_V(z) \
	do { \
		(z) += 0x9e3779b97f4a7c15ULL; \
		(z) = ((z) ^ ((z) >> 30)) * 0xbf58476d1ce4e5b9ULL; \
		(z) = ((z) ^ ((z) >> 27)) * 0x94d049bb133111ebULL; \
		(z) ^= (z) >> 31; \
	} while (0)

/*
 * The race over the block of rows i0 .. i0 + RB - 1: pggpu_uniform of 8 rows
 * at a time; the log only for rows whose bound does not lose against the
 * best key at the block's start (a superset of those that can win).
 */
CLONES static void
race_block(const double *w, int64_t i0, uint64_t key, double *best, int64_t *row)
{
	double		bk = *best;

	for (int v = 0; v < NV; v++)
	{
		vu			z = (vu) {0, 1, 2, 3, 4, 5, 6, 7} + (uint64_t) (i0 + v * VW);
		vd			u,
					wv;
		vl			cand;

		MIX64_V(z);
		z ^= key;
		MIX64_V(z);
		u = __builtin_convertvector((z >> 11) + 1, vd) * (1.0 / 9007199254740992.0);
		LOAD_VD(wv, w + v * VW);
		cand = (vl) (wv > 0) & ~(vl) (1.0 - u > bk * wv * (1.0 + 1e-9));
		for (int q = 0; q < VW; q++)
			if (cand[q])
				race_row(wv[q], u[q], i0 + v * VW + q, &bk, row);
	}
	*best = bk;
}

/* the race over rows [i0, i1), i0 a multiple of RB, on from (*best, *row) */
static void
race(const double *w, int64_t i0, int64_t i1, uint64_t key, double *best,
	 int64_t *row)
{
	int64_t		i = i0;

	for (; i + RB <= i1; i += RB)
		race_block(w + i, i, key, best, row);
	for (; i < i1; i++)
	{
		double		u;

		if (!(w[i] > 0))
			continue;			/* key +infinity */
		u = pggpu_uniform(key, i);
		if (!(1.0 - u > *best * w[i] * (1.0 + 1e-9)))
			race_row(w[i], u, i, best, row);
	}
}

/* C[c] := row; dist2 per mode; with next_key, that draw in the same pass */
static pggpu_status
cpu_km_point(pggpu_data *ds, int64_t row, int c, int mode, const uint64_t *next_key,
			 pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int			d = ds->d;
	int64_t		b = TILE(ds);
	double	   *cc = s->C + (int64_t) c * d;
	const double *p = s->X + pggpu_at(row, 0, d, ds->log_b);
	double		bk = INFINITY;
	int64_t		br = -1;

	(void) err;
	for (int j = 0; j < d; j++)
		cc[j] = p[j * b];
	if (mode == PGGPU_D2_KEEP)
		return PGGPU_OK;
	s->drawn = false;
	for (int64_t i0 = 0; i0 < ds->n; i0 += RB)
	{
		int			rows = ds->n - i0 < RB ? (int) (ds->n - i0) : RB;

		poll_interrupts(ds, i0);
		point_block(block_at(ds, i0), b, d, cc, s->dist2 + i0, mode == PGGPU_D2_SET);
		if (next_key)
			race(s->dist2, i0, i0 + rows, *next_key, &bk, &br);
	}
	if (next_key)
	{
		s->drawn = true;
		s->drawn_key = *next_key;
		s->drawn_row = br;
	}
	return PGGPU_OK;
}

static pggpu_status
cpu_km_pick(pggpu_data *ds, int mode, uint64_t key, int64_t *row, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	double		best = INFINITY;
	int64_t		br = -1;

	(void) err;
	if (mode == PGGPU_PICK_SAMPLE)
	{
		if (s->drawn && s->drawn_key == key)
			br = s->drawn_row;
		else
			race(s->dist2, 0, ds->n, key, &best, &br);
		*row = br;
		return PGGPU_OK;
	}
	for (int64_t i = 0; i < ds->n; i++)
	{
		double		w = s->dist2[i];

		if (w > 0 && -w < best)
		{
			best = -w;
			br = i;
		}
	}
	if (br >= 0)
	{
		s->dist2[br] = -1.0;
		s->drawn = false;
	}
	*row = br;
	return PGGPU_OK;
}

static pggpu_status
cpu_km_fetch(pggpu_data *ds, int32_t *labels, double *dist2, pggpu_error *err)
{
	(void) err;
	if (labels)
		memcpy(labels, ST(ds)->labels, sizeof(int32_t) * ds->n);
	if (dist2)
		memcpy(dist2, ST(ds)->dist2, sizeof(double) * ds->n);
	return PGGPU_OK;
}

const pggpu_ops pggpu_cpu_ops = {
	.open = cpu_open,
	.batch = cpu_batch,
	.push = cpu_push,
	.close = cpu_close,
	.maxabs = cpu_maxabs,
	.scale = cpu_scale,
	.km_begin = cpu_km_begin,
	.km_put_centroids = cpu_put_centroids,
	.km_get_centroids = cpu_get_centroids,
	.km_step = cpu_km_step,
	.km_counts = cpu_km_counts,
	.km_point = cpu_km_point,
	.km_pick = cpu_km_pick,
	.km_fetch = cpu_km_fetch,
};
