/*
 * backend_cpu.c - the CPU backend: the reference the CUDA kernels are tested
 * against, and what users get without a GPU.  Plain C, single-threaded (it
 * runs inside a PostgreSQL backend).
 *
 * Arithmetic rules shared with backend_gpu.cu, so both give bit-identical
 * distances: a squared distance is summed over columns in order 0..d-1 from
 * 0.0, each term (x - c) * (x - c) rounded on its own (no fused
 * multiply-add; this file is built with -ffp-contract=off).
 */
#include "compute_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
	s->C = s->dist2 = s->sums = NULL;
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
	s->dist2 = (double *) malloc(sizeof(double) * n);
	if (!s->C || !s->sums || !s->cnt || !s->labels || !s->dist2)
	{
		cpu_km_free(s);
		return oom(err, (2 * kd + k + 3 * n) * 8);
	}
	memset(s->labels, 0xff, sizeof(int32_t) * n);
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

/* row i gathered into xi[0..d) */
static void
gather(pggpu_data *ds, int64_t i, double *xi)
{
	const double *p = ST(ds)->X + pggpu_at(i, 0, ds->d, ds->log_b);
	int64_t		b = TILE(ds);

	for (int j = 0; j < ds->d; j++)
		xi[j] = p[j * b];
}

static double
sqdist(const double *x, const double *c, int d)
{
	double		acc = 0.0;

	for (int j = 0; j < d; j++)
	{
		double		diff = x[j] - c[j];

		acc += diff * diff;
	}
	return acc;
}

static pggpu_status
cpu_km_step(pggpu_data *ds, bool update, pggpu_step_stats *out, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int			d = ds->d;
	int			k = ds->k;
	double	   *xi = (double *) malloc(sizeof(double) * d);
	pggpu_step_stats st = {0, 0, 0.0};

	if (xi == NULL)
		return oom(err, sizeof(double) * d);
	if (update)
	{
		memset(s->sums, 0, sizeof(double) * k * d);
		memset(s->cnt, 0, sizeof(int64_t) * k);
	}
	for (int64_t i = 0; i < ds->n; i++)
	{
		double		best = INFINITY;
		int32_t		bc = 0;

		gather(ds, i, xi);
		for (int c = 0; c < k; c++)
		{
			double		dd = sqdist(xi, s->C + (int64_t) c * d, d);

			if (dd < best)
			{
				best = dd;
				bc = c;
			}
		}
		st.changed += s->labels[i] != bc;
		s->labels[i] = bc;
		s->dist2[i] = best;
		st.inertia += best;
		if (update)
		{
			double	   *sum = s->sums + (int64_t) bc * d;

			s->cnt[bc]++;
			for (int j = 0; j < d; j++)
				sum[j] += xi[j];
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
	free(xi);
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

static pggpu_status
cpu_km_point(pggpu_data *ds, int64_t row, int c, int mode, const uint64_t *next_key,
			 pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int			d = ds->d;
	double	   *cc = s->C + (int64_t) c * d;
	double	   *xi;

	(void) next_key;			/* the pick makes its own pass */
	gather(ds, row, cc);
	if (mode == PGGPU_D2_KEEP)
		return PGGPU_OK;
	xi = (double *) malloc(sizeof(double) * d);
	if (xi == NULL)
		return oom(err, sizeof(double) * d);
	for (int64_t i = 0; i < ds->n; i++)
	{
		double		dd;

		gather(ds, i, xi);
		dd = sqdist(xi, cc, d);
		if (mode == PGGPU_D2_SET || dd < s->dist2[i])
			s->dist2[i] = dd;
	}
	free(xi);
	return PGGPU_OK;
}

/*
 * Both picks minimise a key, lowest row on ties: SAMPLE uses -log(u_i) / w_i
 * (an exponential race: row i wins with probability w_i / sum w), FARTHEST
 * uses -dist2 (rows already on their centroid never qualify: re-seeding an
 * empty cluster with one would change nothing).  backend_gpu.cu computes the
 * same keys.
 */
static pggpu_status
cpu_km_pick(pggpu_data *ds, int mode, uint64_t key, int64_t *row, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	double		best = INFINITY;
	int64_t		br = -1;

	(void) err;
	for (int64_t i = 0; i < ds->n; i++)
	{
		double		w = s->dist2[i];
		double		kv;

		if (mode == PGGPU_PICK_SAMPLE)
			kv = w > 0 ? -log(pggpu_uniform(key, i)) / w : INFINITY;
		else
			kv = w > 0 ? -w : INFINITY;
		if (kv < best)
		{
			best = kv;
			br = i;
		}
	}
	if (mode == PGGPU_PICK_FARTHEST && br >= 0)
		s->dist2[br] = -1.0;
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
