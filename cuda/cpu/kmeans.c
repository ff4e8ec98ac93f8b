/*
 * cpu/kmeans.c - the CPU backend: the reference the CUDA kernels are tested
 * against, and what users get without a GPU.  Plain C; its passes over the
 * rows may use several threads (pggpu_data_set_threads, see "Parts" below).
 *
 * Arithmetic rules shared with the CUDA backend (gpu/), so both give bit-identical
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
#include "blocks.h"
#include "gemm.h"
#include "pass.h"
#include "state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/*
 * Parts: a pass over the rows is cut into parts, contiguous ranges of rows,
 * each done in row order by one thread with its own sums, counts and draw,
 * combined in part order at the end.  The cut depends only on n, k and d,
 * never on the number of threads, so every thread count gives the same
 * result to the last bit; up to PART_ROWS rows are one part, summed exactly
 * as one loop over the rows sums them.  (PART_ROWS was 65536 until November
 * 2026: 10^5 rows were 2 parts, so 2 threads at most; 2048 lets 16 threads
 * share them, at up to MAX_PARTS k (d + 1) additions to combine the parts.)
 */
#define PART_ROWS 2048			/* ceil(n / PART_ROWS) parts, capped below */
#define MAX_PARTS 64
#define PART_SUMS_BYTES ((int64_t) 128 << 20)	/* all parts' sums, at most */


static void
cpu_km_free(cpu_state *s)
{
	free(s->C), free(s->labels), free(s->dist2), free(s->sums), free(s->cnt), free(s->C_lab);
	free(s->xb), free(s->xw), free(s->parts), free(s->part_sums), free(s->part_cnt);
	free(s->mass), free(s->part_mass);
	s->mass = s->part_mass = NULL;
	cpu_gemm_close(&s->gemm);
	s->gemm_tried = false;
	s->part_cnt = NULL;
	s->C = s->dist2 = s->sums = s->xb = s->part_sums = s->C_lab = NULL;
	s->stale = false;
	s->xw = NULL;
	s->parts = NULL;
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
	free(s->Xf);
	free(s->Xh);
	free(s->rw);
	free(s);
	ds->impl = NULL;
}

/* zeroed memory on whole 64-byte cache lines, or NULL */
static void *
cache_lines(size_t bytes)
{
	size_t		size = (bytes + 63) / 64 * 64;
	void	   *p = aligned_alloc(64, size ? size : 64);

	if (p)
		memset(p, 0, size);
	return p;
}

/* n rounded up to a whole cache line of 8-byte values */
static inline int64_t
pad8(int64_t n)
{
	return (n + 7) / 8 * 8;
}

/* the parts of a pass over n rows (see "Parts"), a function of n, k and d */
static int
choose_parts(int64_t n, int k, int d)
{
	int64_t		by_rows = (n + PART_ROWS - 1) / PART_ROWS;
	int64_t		by_memory = PART_SUMS_BYTES / (((int64_t) k * d + k) * 8);
	int64_t		p = by_rows < MAX_PARTS ? by_rows : MAX_PARTS;

	if (p > by_memory)
		p = by_memory;
	return p < 1 ? 1 : (int) p;
}

static pggpu_status
cpu_km_begin(pggpu_data *ds, int k, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int64_t		n = ds->n > 0 ? ds->n : 1;
	int64_t		kd = (int64_t) k * ds->d;
	int			nparts = choose_parts(ds->n, k, ds->d);
	/* whole blocks of the draw (PGGPU_DRAW_ROWS, a multiple of RB) */
	int64_t		span = ((ds->n + nparts - 1) / nparts + PGGPU_DRAW_ROWS - 1) /
		PGGPU_DRAW_ROWS * PGGPU_DRAW_ROWS;
	int			threads = ds->threads > 1 ? ds->threads : 1;

	pggpu_status st;

	if (threads > nparts)
		threads = nparts;
	if ((st = pggpu_weights_sync(ds, err)) != PGGPU_OK)
		return st;
	cpu_km_free(s);
	s->C = (double *) malloc(sizeof(double) * kd);
	s->C_lab = (double *) malloc(sizeof(double) * kd);
	s->sums = (double *) malloc(sizeof(double) * kd);
	s->cnt = (int64_t *) malloc(sizeof(int64_t) * k);
	s->mass = (double *) malloc(sizeof(double) * k);
	s->labels = (int32_t *) malloc(sizeof(int32_t) * n);
	/* whole blocks: point_block writes the last one's rows past n too */
	s->dist2 = (double *) calloc(n + RB, sizeof(double));
	s->xb = (double *) malloc(sizeof(double) * RB * ds->d * threads);
	if (s->Xh)
		s->xw = (float *) malloc(sizeof(float) * GEMM_PANEL * ds->d * threads);
	/* each part's own on its own cache lines: no false sharing */
	s->parts = (part *) cache_lines(sizeof(part) * nparts);
	if (nparts > 1)
	{
		s->part_sums = (double *) cache_lines(sizeof(double) * pad8(kd) * nparts);
		s->part_cnt = (int64_t *) cache_lines(sizeof(int64_t) * pad8(k) * nparts);
		s->part_mass = (double *) cache_lines(sizeof(double) * pad8(k) * nparts);
	}
	if (!s->C || !s->C_lab || !s->sums || !s->cnt || !s->mass || !s->labels || !s->dist2 || !s->xb || (s->Xh && !s->xw) ||
		!s->parts || (nparts > 1 && (!s->part_sums || !s->part_cnt || !s->part_mass)))
	{
		cpu_km_free(s);
		return oom(err, (3 * kd + k + 3 * n + RB * ds->d * threads) * 8 +
				   (s->Xh ? GEMM_PANEL * ds->d * threads * 4 : 0) +
				   (nparts > 1 ? (kd + k) * nparts * 8 : 0));
	}
	s->nthreads = threads;
	s->nparts = nparts;
	for (int i = 0; i < nparts; i++)
	{
		part	   *pt = &s->parts[i];

		pt->start = span * i < ds->n ? span * i : ds->n;
		pt->end = span * (i + 1) < ds->n ? span * (i + 1) : ds->n;
		pt->sums = nparts > 1 ? s->part_sums + pad8(kd) * i : NULL;
		pt->cnt = nparts > 1 ? s->part_cnt + pad8(k) * i : NULL;
		pt->mass = nparts > 1 ? s->part_mass + pad8(k) * i : NULL;
	}
	memset(s->labels, 0xff, sizeof(int32_t) * n);
	s->drawn = false;
	s->summed = false;
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
cpu_km_gather(pggpu_data *ds, const int64_t *rows, int m, pggpu_error *err)
{
	cpu_state  *s = ST(ds);

	(void) err;
	for (int c = 0; c < m; c++)
		for (int j = 0; j < ds->d; j++)
			s->C[(int64_t) c * ds->d + j] = pggpu_cpu_value(s->X, s->Xf, s->Xh, pggpu_at(rows[c], j, ds->d, ds->log_b));
	return PGGPU_OK;
}

static pggpu_status
cpu_get_centroids(pggpu_data *ds, double *C, pggpu_error *err)
{
	(void) err;
	memcpy(C, ST(ds)->C, sizeof(double) * ds->k * ds->d);
	return PGGPU_OK;
}

static pggpu_status
cpu_km_normalize(pggpu_data *ds, double norm, pggpu_error *err)
{
	(void) err;
	pggpu_normalize_rows(ST(ds)->C, ds->k, ds->d, norm);
	return PGGPU_OK;
}

/* ---- blocks of rows --------------------------------------------------------- */



/*
 * Column j of the block PREFETCH_BLOCKS ahead, fetched as column j of this
 * one is copied: a block's columns lie a tile apart, more streams than the
 * hardware prefetcher follows (about 20% off a Lloyd pass at N = 10^6, d = 8;
 * issuing all columns at once, before or after the copy, gained nothing).
 * Past the end of the data it is a hint to nowhere: prefetches do not fault.
 */
#define PREFETCH_BLOCKS 4

static inline void
prefetch_column(const void *col, size_t size)
{
	const char *ahead = (const char *) col + PREFETCH_BLOCKS * RB * size;

	for (size_t at = 0; at < RB * size; at += 64)
		__builtin_prefetch(ahead + at);
}

/*
 * Both picks minimise a key, lowest row on ties: SAMPLE is the two-stage
 * exponential race of compute_internal.h (blocks by their weight, then a
 * row of the winning block), FARTHEST uses -dist2 (rows already on their
 * centroid never qualify: re-seeding an empty cluster with one would change
 * nothing).  gpu/seed.cu computes the same keys.
 */

/* stage 1 of the draw for the block at rows i0 ..: on from (*best, *blk) */
static void
race_block(const double *dist2, const double *rw, int64_t i0, int64_t n, uint64_t key,
		   double *best, int64_t *blk)
{
	int64_t		b = i0 / PGGPU_DRAW_ROWS;
	double		kv = pggpu_draw_key(key, b, pggpu_draw_weight(dist2, rw, i0, n));

	if (kv < *best)
	{
		*best = kv;
		*blk = b;
	}
}

/* stage 2: the row drawn in block blk (-1: none) */
static int64_t
race_rows(const double *dist2, const double *rw, int64_t blk, int64_t n, uint64_t key)
{
	uint64_t	k2 = pggpu_draw_row_key(key);
	double		best = INFINITY;
	int64_t		row = -1;

	for (int64_t i = blk * PGGPU_DRAW_ROWS; blk >= 0 && i < n && i < (blk + 1) * PGGPU_DRAW_ROWS; i++)
	{
		double		kv = pggpu_draw_key(k2, i, pggpu_draw_wt(dist2, rw, i));

		if (kv < best)
		{
			best = kv;
			row = i;
		}
	}
	return row;
}

/* ---- the k-means passes (cpu/pass.h runs them) ---------------------------- */

/*
 * nearest_block over the centroids in runs of ps->kchunk, polling between
 * runs; the same result (a later run wins only when strictly nearer).  False
 * when the thread must leave the block (nothing of it is kept).
 */
static bool
nearest_block_polled(pass *ps, bool caller, const double *x, int d, const double *C,
					 int k, double *best, int32_t *lab)
{
	double		b2[RB];
	int32_t		l2[RB];

	nearest_block(x, RB, d, C, ps->kchunk < k ? ps->kchunk : k, best, lab);
	for (int c0 = ps->kchunk; c0 < k; c0 += ps->kchunk)
	{
		if (!cpu_poll_pass(ps, caller))
			return false;
		nearest_block(x, RB, d, C + (int64_t) c0 * d, k - c0 < ps->kchunk ? k - c0 : ps->kchunk,
					  b2, l2);
		for (int q = 0; q < RB; q++)
			if (b2[q] < best[q])
			{
				best[q] = b2[q];
				lab[q] = l2[q] + c0;
			}
	}
	return true;
}

/*
 * sum[j] += row[j], j < d, 8 at a time (each element its own addition: the
 * same sums; the plain loop stayed scalar, sum and row possibly the same
 * memory: 11 % of a float32 iteration at d = 384, k = 256)
 */
typedef double vd8 __attribute__((vector_size(8 * sizeof(double))));

CLONES static void
add_row(double *sum, const double *row, int d)
{
	int			j = 0;

	for (; j + 8 <= d; j += 8)
	{
		vd8			a,
					b;

		memcpy(&a, sum + j, sizeof(a));
		memcpy(&b, row + j, sizeof(b));
		a += b;
		memcpy(sum + j, &a, sizeof(a));
	}
	for (; j < d; j++)
		sum[j] += row[j];
}

/*
 * sums[lab[l]] += row l of 8 float rows, l < m (column j's 8 rows a vector
 * at xf + j xj, readable whole): 8 columns at a time turned into 8 rows in
 * registers (an 8 x 8 transpose), each row's 8 values widened and added to
 * its cluster's, rows in order (the same sums as add_row's).  Turning the
 * rows a value at a time into a buffer, then add_row, took 17 % of a
 * float32 iteration at d = 768, k = 256 on the CI machine's EPYC.
 */
typedef float vf8 __attribute__((vector_size(8 * sizeof(float))));

#define UNPACK_LO(a, b) __builtin_shufflevector(a, b, 0, 8, 1, 9, 4, 12, 5, 13)
#define UNPACK_HI(a, b) __builtin_shufflevector(a, b, 2, 10, 3, 11, 6, 14, 7, 15)
#define PAIRS_LO(a, b) __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13)
#define PAIRS_HI(a, b) __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15)
#define HALVES_LO(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11)
#define HALVES_HI(a, b) __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15)

CLONES static void
add_rows_f32(double *sums, const int32_t *lab, int m, const float *xf, int64_t xj, int d)
{
	int			j0 = 0;

	for (; j0 + 8 <= d; j0 += 8)
	{
		vf8			v[8],
					a[8],
					c[8],
					r[8];

		for (int j = 0; j < 8; j++)
			memcpy(&v[j], xf + (int64_t) (j0 + j) * xj, sizeof(vf8));
		for (int j = 0; j < 8; j += 2)
		{
			a[j] = UNPACK_LO(v[j], v[j + 1]);
			a[j + 1] = UNPACK_HI(v[j], v[j + 1]);
		}
		/* c[0..3]: lanes l and l + 4 of columns 0-3, l = 0..3; c[4..7]: of columns 4-7 */
		for (int h = 0; h < 8; h += 4)
		{
			c[h] = PAIRS_LO(a[h], a[h + 2]);
			c[h + 1] = PAIRS_HI(a[h], a[h + 2]);
			c[h + 2] = PAIRS_LO(a[h + 1], a[h + 3]);
			c[h + 3] = PAIRS_HI(a[h + 1], a[h + 3]);
		}
		for (int l = 0; l < 4; l++)
		{
			r[l] = HALVES_LO(c[l], c[l + 4]);
			r[l + 4] = HALVES_HI(c[l], c[l + 4]);
		}
		for (int l = 0; l < m; l++)
		{
			double	   *sum = sums + (int64_t) lab[l] * d + j0;
			vd8			s,
						w = __builtin_convertvector(r[l], vd8);

			memcpy(&s, sum, sizeof(s));
			s += w;
			memcpy(sum, &s, sizeof(s));
		}
	}
	for (int l = 0; l < m; l++)
		for (int j = j0; j < d; j++)
			sums[(int64_t) lab[l] * d + j] += (double) xf[l + (int64_t) j * xj];
}

/*
 * Rows i0 .. i0 + rows - 1 labelled (lab, best; best NULL: distances not
 * measured): into labels and dist2, counted, and with update summed by
 * label in row order (element j of row
 * q at x[q * xq + j * xj], or xf[...] where x is NULL: floats).  rowbuf
 * (room for 8 x d, or NULL): the rows are far apart (a tile's columns);
 * 8 at a time turned into rows there first, each then added as a vector.
 */
static inline void
take_rows(cpu_state *s, bool update, int d, int64_t i0, int rows, const double *best,
		  const int32_t *lab, const double *x, const float *xf, int64_t xq, int64_t xj, double *sums,
		  int64_t *cnt, double *mass, int64_t *changed, double *inertia, double *rowbuf)
{
	const double *rw = s->rw ? s->rw + i0 : NULL;

	for (int q = 0; q < rows; q++)
	{
		*changed += s->labels[i0 + q] != lab[q];
		s->labels[i0 + q] = lab[q];
	}
	for (int q = 0; best && q < rows; q++)
	{
		s->dist2[i0 + q] = best[q];
		*inertia += rw ? PGGPU_MUL(rw[q], best[q]) : best[q];
	}
	/* each cluster's sums in row order, as a loop over rows adds them */
	if (update && rw)
		for (int q = 0; q < rows; q++)
		{
			double	   *sum = sums + (int64_t) lab[q] * d;

			cnt[lab[q]]++;
			mass[lab[q]] += rw[q];
			for (int j = 0; j < d; j++)
				sum[j] += PGGPU_MUL(rw[q], x ? x[q * xq + j * xj] : (double) xf[q * xq + j * xj]);
		}
	else if (update && rowbuf == NULL)
		for (int q = 0; q < rows; q++)
		{
			double	   *sum = sums + (int64_t) lab[q] * d;

			cnt[lab[q]]++;
			for (int j = 0; j < d; j++)
				sum[j] += x[q * xq + j * xj];
		}
	else if (update)
		for (int q0 = 0; q0 < rows; q0 += 8)
		{
			int			m = rows - q0 < 8 ? rows - q0 : 8;

			if (xf && xq == 1)
			{
				for (int l = 0; l < m; l++)
					cnt[lab[q0 + l]]++;
				add_rows_f32(sums, lab + q0, m, xf + q0, xj, d);
				continue;
			}
			if (x)
				for (int j = 0; j < d; j++)
					for (int l = 0; l < m; l++)
						rowbuf[l * d + j] = x[(q0 + l) * xq + j * xj];
			else
				for (int j = 0; j < d; j++)
					for (int l = 0; l < m; l++)
						rowbuf[l * d + j] = (double) xf[(q0 + l) * xq + j * xj];
			for (int l = 0; l < m; l++)
			{
				cnt[lab[q0 + l]]++;
				add_row(sums + (int64_t) lab[q0 + l] * d, rowbuf + l * d, d);
			}
		}
}

/*
 * The GEMM route's panel of rows i0 .. i0 + rows - 1 (within a tile):
 * column j at *src + j * *stride, or *src32 (floats) where the set holds
 * them; halves widened to floats first on thread t's room, a column at a
 * time (whole vectors of 8)
 */
static void
panel_at(pggpu_data *ds, int t, int64_t i0, int rows, const double **src, const float **src32,
		 int64_t *stride)
{
	cpu_state  *s = ST(ds);
	int			d = ds->d;
	int64_t		b = TILE(ds);
	int64_t		at = pggpu_at(i0, 0, d, ds->log_b);

	*src = s->X ? s->X + at : NULL;
	*src32 = s->Xf ? s->Xf + at : NULL;
	*stride = b;
	if (s->Xh)
	{
		float	   *w = s->xw + (int64_t) t * GEMM_PANEL * d;

		for (int j = 0; j < d; j++)
			pggpu_cpu_halves(s->Xh + at + j * b, w + (int64_t) j * GEMM_PANEL, (rows + 7) & ~7);
		*src32 = w;
		*stride = GEMM_PANEL;
	}
}

/* a Lloyd pass over the rest of a part */
static void
step_rows(pass *ps, part *pt, int t, bool caller)
{
	pggpu_data *ds = ps->ds;
	cpu_state  *s = ST(ds);
	int			d = ds->d;
	int			k = ds->k;
	int64_t		b = TILE(ds);
	double	   *x = s->xb + (int64_t) t * RB * d;
	double	   *sums = pt->sums ? pt->sums : s->sums;
	int64_t    *cnt = pt->cnt ? pt->cnt : s->cnt;
	double	   *mass = pt->mass ? pt->mass : s->mass;
	int64_t		changed;
	double		inertia;
	int64_t		i0;

	if (pt->pos == pt->start)
	{
		pt->changed = 0;
		pt->inertia = 0.0;
		if (ps->update)
		{
			memset(sums, 0, sizeof(double) * k * d);
			memset(cnt, 0, sizeof(int64_t) * k);
			memset(mass, 0, sizeof(double) * k);
		}
	}
	changed = pt->changed;
	inertia = pt->inertia;
	/* the GEMM route: panels (aligned, so within a tile), a poll each */
	i0 = pt->pos;
	for (; s->gemm.ob && i0 < pt->end; i0 += s->gemm.panel)
	{
		int			rows = pt->end - i0 < s->gemm.panel ? (int) (pt->end - i0) : s->gemm.panel;
		double		best[GEMM_PANEL];
		int32_t		lab[GEMM_PANEL];
		const double *src;
		const float *src32;
		int64_t		stride;

		if (!cpu_poll_pass(ps, caller))
			break;
		panel_at(ds, t, i0, rows, &src, &src32, &stride);
		cpu_gemm_label(&s->gemm, t, src, src32, stride, d, rows, k, ps->dists ? best : NULL, lab);
		take_rows(s, ps->update, d, i0, rows, ps->dists ? best : NULL, lab, src, src32, 1, stride,
				  sums, cnt, mass, &changed, &inertia, x);
	}
	/* else blocks of RB rows */
	for (; !s->gemm.ob && i0 < pt->end; i0 += RB)
	{
		int64_t		at = pggpu_at(i0, 0, d, ds->log_b);
		int			rows = pt->end - i0 < RB ? (int) (pt->end - i0) : RB;
		double		best[RB];
		int32_t		lab[RB];

		if (!cpu_keep_going(ps, i0, caller))
			break;

		/*
		 * The block is read k times: copied first (as doubles), since its
		 * columns lie a tile apart and would share the same few sets of the
		 * L1 cache.
		 */
		for (int j = 0; j < d; j++)
		{
			if (s->Xh)
			{
				const uint16_t *src = s->Xh + at + j * b;
				float		f[RB];

				pggpu_cpu_halves(src, f, RB);
				for (int q = 0; q < RB; q++)
					x[j * RB + q] = f[q];
				prefetch_column(src, sizeof(uint16_t));
			}
			else if (s->Xf)
			{
				const float *src = s->Xf + at + j * b;

				for (int q = 0; q < RB; q++)
					x[j * RB + q] = src[q];
				prefetch_column(src, sizeof(float));
			}
			else
			{
				memcpy(x + j * RB, s->X + at + j * b, sizeof(double) * RB);
				prefetch_column(s->X + at + j * b, sizeof(double));
			}
		}
		if (!nearest_block_polled(ps, caller, x, d, s->C, k, best, lab))
			break;
		take_rows(s, ps->update, d, i0, rows, best, lab, x, NULL, 1, RB, sums, cnt, mass, &changed,
				  &inertia, NULL);
	}
	pt->pos = i0 < pt->end ? i0 : pt->end;
	pt->changed = changed;
	pt->inertia = inertia;
}

/* km_point's pass over the rest of a part: dist2, and the draw */
static void
point_rows(pass *ps, part *pt, int t, bool caller)
{
	pggpu_data *ds = ps->ds;
	cpu_state  *s = ST(ds);
	double	   *buf = s->xb + (int64_t) t * RB * ds->d;

	if (pt->pos == pt->start)
	{
		pt->best = INFINITY;
		pt->row = -1;
	}
	for (int64_t i0 = pt->pos; i0 < pt->end; i0 += RB)
	{
		int			rows = pt->end - i0 < RB ? (int) (pt->end - i0) : RB;
		int64_t		stride;
		const double *x;

		if (!cpu_keep_going(ps, i0, caller))
		{
			pt->pos = i0;
			return;
		}
		x = pggpu_cpu_block(ds, i0, buf, &stride);
		point_block(x, stride, ds->d, ps->cc, s->dist2 + i0, ps->set);
		/* a block of the draw is complete (parts hold whole ones, but the last) */
		if (ps->key && ((i0 + RB) % PGGPU_DRAW_ROWS == 0 || i0 + rows == ds->n))
			race_block(s->dist2, s->rw, i0 / PGGPU_DRAW_ROWS * PGGPU_DRAW_ROWS, ds->n, *ps->key,
					   &pt->best, &pt->row);
	}
	pt->pos = pt->end;
}

/*
 * fresh_dists' pass over the rest of a part: each row's distance to its
 * centroid of the step that left them (C_lab), as the GEMM route measures
 * a winner's
 */
static void
dists_rows(pass *ps, part *pt, int t, bool caller)
{
	pggpu_data *ds = ps->ds;
	cpu_state  *s = ST(ds);
	int64_t		i0;

	for (i0 = pt->pos; i0 < pt->end; i0 += s->gemm.panel)
	{
		int			rows = pt->end - i0 < s->gemm.panel ? (int) (pt->end - i0) : s->gemm.panel;
		int32_t		own[GEMM_PANEL];
		double		out[GEMM_PANEL];
		const double *src;
		const float *src32;
		int64_t		stride;

		if (!cpu_poll_pass(ps, caller))
			break;
		panel_at(ds, t, i0, rows, &src, &src32, &stride);
		cpu_gemm_dists(src, src32, stride, ds->d, rows, s->labels + i0, s->C_lab, s->dist2 + i0, own,
					   out);
	}
	pt->pos = i0 < pt->end ? i0 : pt->end;
}

/*
 * The distances a step left (km_step without dists), measured before
 * anything reads dist2; the same values the step would have kept
 */
static void
fresh_dists(pggpu_data *ds)
{
	cpu_state  *s = ST(ds);
	pass		ps = {.ds = ds, .kind = PASS_DISTS, .rows = dists_rows};

	if (!s->stale)
		return;
	cpu_pass_run(&ps);
	s->stale = false;
}

static pggpu_status
cpu_km_step(pggpu_data *ds, bool update, bool dists, pggpu_step_stats *out, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int			d = ds->d;
	int			k = ds->k;
	pass		ps = {.ds = ds, .kind = PASS_STEP, .rows = step_rows, .update = update, .dists = true};
	pggpu_step_stats st = {0, 0, 0.0};

	(void) err;
	s->drawn = false;
	s->summed = false;
	if (!s->gemm_tried)
	{
		int			panel = cpu_gemm_panel_rows(d, k, ds->poll_work > 0 ? ds->poll_work : (double) POLL_WORK);

		s->gemm_tried = true;
		if (cpu_gemm_wanted(d, k, ds->narrow_held, ds->force.label) && panel > 0)
			cpu_gemm_open(&s->gemm, ds, k, s->nthreads, panel);
	}
	if (s->gemm.ob)
	{
		/* a product a thread: ours are the threads */
		pggpu_openblas_threads(s->gemm.ob, 1);
		cpu_gemm_centroids(&s->gemm, s->C, k, d);
		/* (the plain loop has each row's distance as it labels it: kept) */
		if (!dists)
		{
			ps.dists = false;
			memcpy(s->C_lab, s->C, sizeof(double) * k * d);
		}
	}
	cpu_pass_run(&ps);
	s->stale = !ps.dists;
	/* the parts in order */
	if (update && s->nparts > 1)
	{
		memset(s->sums, 0, sizeof(double) * k * d);
		memset(s->cnt, 0, sizeof(int64_t) * k);
		memset(s->mass, 0, sizeof(double) * k);
	}
	for (int i = 0; i < s->nparts; i++)
	{
		part	   *pt = &s->parts[i];

		if (pt->start == pt->end)
			continue;
		st.changed += pt->changed;
		st.inertia += ps.dists ? pt->inertia : NAN;
		if (update && pt->sums)
		{
			for (int64_t e = 0; e < (int64_t) k * d; e++)
				s->sums[e] += pt->sums[e];
			for (int c = 0; c < k; c++)
				s->cnt[c] += pt->cnt[c];
			for (int c = 0; s->rw && c < k; c++)
				s->mass[c] += pt->mass[c];
		}
	}
	/* (unweighted: the mass is the count; a cluster of no weight keeps its centroid) */
	for (int c = 0; update && !s->rw && c < k; c++)
		s->mass[c] = (double) s->cnt[c];
	if (update)
		for (int c = 0; c < k; c++)
		{
			st.empty += s->cnt[c] == 0;
			for (int j = 0; s->mass[c] > 0 && j < d; j++)
				s->C[(int64_t) c * d + j] = s->sums[(int64_t) c * d + j] / s->mass[c];
		}
	s->summed = update;
	*out = st;
	return PGGPU_OK;
}

static pggpu_status
cpu_km_sums(pggpu_data *ds, double *sums, int64_t *counts, double *mass, pggpu_error *err)
{
	cpu_state  *s = ST(ds);

	if (!s->summed)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no step with update to take sums of");
	memcpy(sums, s->sums, sizeof(double) * ds->k * ds->d);
	memcpy(counts, s->cnt, sizeof(int64_t) * ds->k);
	if (mass)
		memcpy(mass, s->mass, sizeof(double) * ds->k);
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

/* C[c] := row; dist2 per mode; with next_key, that draw in the same pass */
static pggpu_status
cpu_km_point(pggpu_data *ds, int64_t row, int c, int mode, const uint64_t *next_key,
			 pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int			d = ds->d;
	double	   *cc = s->C + (int64_t) c * d;
	int64_t		at = pggpu_at(row, 0, d, ds->log_b);
	pass		ps = {.ds = ds, .kind = PASS_POINT, .rows = point_rows, .cc = cc,
	.set = mode == PGGPU_D2_SET, .key = next_key};
	double		bk = INFINITY;
	int64_t		br = -1;

	(void) err;
	for (int j = 0; j < d; j++)
		cc[j] = pggpu_cpu_value(s->X, s->Xf, s->Xh, at + j * TILE(ds));
	if (mode == PGGPU_D2_KEEP)
		return PGGPU_OK;
	/* (SET measures every row again) */
	if (mode == PGGPU_D2_SET)
		s->stale = false;
	fresh_dists(ds);
	s->drawn = false;
	cpu_pass_run(&ps);
	if (next_key)
	{
		/* the parts in order: the first block of the smallest key; its row */
		for (int i = 0; i < s->nparts; i++)
			if (s->parts[i].start < s->parts[i].end && s->parts[i].best < bk)
			{
				bk = s->parts[i].best;
				br = s->parts[i].row;
			}
		s->drawn = true;
		s->drawn_key = *next_key;
		s->drawn_row = race_rows(s->dist2, s->rw, br, ds->n, *next_key);
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
	fresh_dists(ds);
	if (mode == PGGPU_PICK_SAMPLE)
	{
		if (s->drawn && s->drawn_key == key)
			br = s->drawn_row;
		else
		{
			for (int64_t i0 = 0; i0 < ds->n; i0 += PGGPU_DRAW_ROWS)
				race_block(s->dist2, s->rw, i0, ds->n, key, &best, &br);
			br = race_rows(s->dist2, s->rw, br, ds->n, key);
		}
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
cpu_km_weights(pggpu_data *ds, const double *w, pggpu_error *err)
{
	cpu_state  *s = ST(ds);

	free(s->rw);
	s->rw = NULL;
	s->drawn = false;
	if (w == NULL)
		return PGGPU_OK;
	if ((s->rw = (double *) malloc(sizeof(double) * (ds->n > 0 ? ds->n : 1))) == NULL)
		return oom(err, sizeof(double) * ds->n);
	memcpy(s->rw, w, sizeof(double) * ds->n);
	return PGGPU_OK;
}

static pggpu_status
cpu_km_fetch(pggpu_data *ds, int32_t *labels, double *dist2, pggpu_error *err)
{
	(void) err;
	if (labels)
		memcpy(labels, ST(ds)->labels, sizeof(int32_t) * ds->n);
	if (dist2)
	{
		fresh_dists(ds);
		memcpy(dist2, ST(ds)->dist2, sizeof(double) * ds->n);
	}
	return PGGPU_OK;
}

/* the repair's candidates straight from the distances held (no copy of them all) */
static pggpu_status
cpu_km_farthest(pggpu_data *ds, int m, int64_t cap, double *floor, int64_t *count, int64_t *rows,
				double *d2, pggpu_error *err)
{
	const double *D = ST(ds)->dist2;
	double	   *top = (double *) malloc(sizeof(double) * (m > 0 ? m : 1));

	fresh_dists(ds);
	if (top == NULL)
		return oom(err, sizeof(double) * (m > 0 ? m : 1));
	pggpu_farthest_rows(D, ds->n, m, cap, top, floor, count, rows, d2);
	free(top);
	return PGGPU_OK;
}

/* the draw's state, for cpu/trials.c */
void
pggpu_cpu_draw_state(pggpu_data *ds, const double **dist2, const double **rw)
{
	fresh_dists(ds);
	*dist2 = ST(ds)->dist2;
	*rw = ST(ds)->rw;
}

const pggpu_ops pggpu_cpu_ops = {
	.open = pggpu_cpu_open,
	.batch = pggpu_cpu_batch,
	.dtype = pggpu_cpu_dtype,
	.widen = pggpu_cpu_widen,
	.push = pggpu_cpu_push,
	.close = cpu_close,
	.range = pggpu_cpu_range,
	.scale = pggpu_cpu_scale,
	.km_begin = cpu_km_begin,
	.km_put_centroids = cpu_put_centroids,
	.km_get_centroids = cpu_get_centroids,
	.km_step = cpu_km_step,
	.km_counts = cpu_km_counts,
	.km_point = cpu_km_point,
	.km_pick = cpu_km_pick,
	.km_fetch = cpu_km_fetch,
	.km_farthest = cpu_km_farthest,
	.km_normalize = cpu_km_normalize,
	.km_weights = cpu_km_weights,
	.km_gather = cpu_km_gather,
	.col_sums = pggpu_cpu_col_sums,
	.col_affine = pggpu_cpu_col_affine,
	.unit_rows = pggpu_cpu_unit_rows,
	.keys = pggpu_cpu_keys,
	.get_rows = pggpu_cpu_get_rows,
	.km_trials = pggpu_cpu_km_trials,
	.copy_rows = pggpu_cpu_copy_rows,
	.km_sums = cpu_km_sums,
};
