/*
 * cpu/rows.c - the CPU backend's rows: tiles of the data set itself (its
 * staging batch is the next tile: no copy), of doubles, of floats for a
 * FLOAT32 set (4 bytes a value) or of halves for a FLOAT16 set (2 bytes)
 * until an op that rewrites the values widens them; the halves' widening
 * (a run at a time, and one by one); and the views the passes read the
 * rows through (a block of rows as doubles, a value).
 */
#include "compute_internal.h"
#include "blocks.h"
#include "state.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* bytes of a value as the set holds it */
static size_t
held_size(const pggpu_data *ds)
{
	return ds->f16_held ? sizeof(uint16_t) : ds->narrow_held ? sizeof(float) : sizeof(double);
}

static pggpu_status
ensure_tiles(pggpu_data *ds, int64_t tiles, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int64_t		tile_bytes = TILE(ds) * ds->d * (int64_t) held_size(ds);
	int64_t		cap = s->cap_tiles ? s->cap_tiles : 1;
	void	   *x;

	if (tiles <= s->cap_tiles)
		return PGGPU_OK;
	while (cap < tiles)
		cap *= 2;
	x = realloc(ds->f16_held ? (void *) s->Xh : ds->narrow_held ? (void *) s->Xf : (void *) s->X,
				cap * tile_bytes);
	if (x == NULL)
		return oom(err, cap * tile_bytes);
	if (ds->f16_held)
		s->Xh = (uint16_t *) x;
	else if (ds->narrow_held)
		s->Xf = (float *) x;
	else
		s->X = (double *) x;
	s->cap_tiles = cap;
	return PGGPU_OK;
}

/* every half as a float, for the widening one by one (pggpu_cpu_half) */
float		pggpu_cpu_half_table[65536];

static void
fill_half_table(void)
{
	for (uint32_t h = 0; h < 65536; h++)
		pggpu_cpu_half_table[h] = pggpu_half_to_float((uint16_t) h);
}

/* rows pushed as floats are held as floats, halves as halves (set before the first push) */
pggpu_status
pggpu_cpu_dtype(pggpu_data *ds, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	static pthread_once_t table_once = PTHREAD_ONCE_INIT;

	free(s->X);
	free(s->Xf);
	free(s->Xh);
	s->X = NULL;
	s->Xf = NULL;
	s->Xh = NULL;
	s->cap_tiles = 0;
	ds->narrow_held = ds->f32 || ds->f16;
	ds->f16_held = ds->f16;
	if (ds->f16)
		pthread_once(&table_once, fill_half_table);
	return ensure_tiles(ds, 1, err);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)	/* (clang, the fuzzer's: no "f16c" feature test) */
#include <immintrin.h>

/* n halves to floats with the CPU's F16C conversion (exact), 8 at a time */
__attribute__((target("avx,f16c")))
static void
halves_f16c(const uint16_t *h, float *dst, int64_t n)
{
	int64_t		j = 0;

	for (; j + 8 <= n; j += 8)
		_mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (h + j))));
	for (; j < n; j++)
		dst[j] = pggpu_cpu_half(h[j]);
}

static bool
have_f16c(void)
{
	static int	have = -1;

	if (have < 0)
		have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
	return have;
}
#define HAVE_F16C() have_f16c()
#else
#define HAVE_F16C() false
#define halves_f16c(h, dst, n) ((void) 0)
#endif

void
pggpu_cpu_halves(const uint16_t *h, float *dst, int64_t n)
{
	if (HAVE_F16C())
		halves_f16c(h, dst, n);
	else
		for (int64_t j = 0; j < n; j++)
			dst[j] = pggpu_cpu_half(h[j]);
}

/* the rows as doubles from now on (their values about to be rewritten) */
pggpu_status
pggpu_cpu_widen(pggpu_data *ds, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	int64_t		len = s->cap_tiles * TILE(ds) * ds->d;
	double	   *x;

	if (!ds->narrow_held)
		return PGGPU_OK;
	if ((x = (double *) malloc(sizeof(double) * len)) == NULL)
		return oom(err, sizeof(double) * len);
	for (int64_t i = 0; i < len; i++)
		x[i] = s->Xh ? (double) pggpu_cpu_half(s->Xh[i]) : (double) s->Xf[i];
	free(s->Xf);
	free(s->Xh);
	s->Xf = NULL;
	s->Xh = NULL;
	s->X = x;
	ds->narrow_held = false;
	ds->f16_held = false;
	return PGGPU_OK;
}

pggpu_status
pggpu_cpu_open(pggpu_data *ds, int gpu_index, int64_t expected_rows, pggpu_error *err)
{
	(void) gpu_index;
	(void) expected_rows;
	ds->impl = calloc(1, sizeof(cpu_state));
	if (ds->impl == NULL)
		return oom(err, sizeof(cpu_state));
	return ensure_tiles(ds, 1, err);
}

/* the staging buffer is the next tile of the data itself: no copy */
void *
pggpu_cpu_batch(pggpu_data *ds)
{
	cpu_state  *s = ST(ds);
	int64_t		at = (ds->n >> ds->log_b) * TILE(ds) * ds->d;

	return ds->f16_held ? (void *) (s->Xh + at) : ds->narrow_held ? (void *) (s->Xf + at) : (void *) (s->X + at);
}

/*
 * The tile's first nrows rows, written by rows (values of in bytes: 8, 4,
 * or 2 for halves), turned into its columns (values as held) in place,
 * through a copy of them, 32 rows at a time: a row's cache lines serve its
 * columns, a column's store runs 32 values.  A set held wide from its
 * first row (pggpu_data_hold_wide) widens floats and halves so.
 */
static pggpu_status
turn_rows(pggpu_data *ds, char *t, int64_t nrows, size_t in, pggpu_error *err)
{
	const int	d = ds->d;
	const int64_t b = TILE(ds);
	char	   *rows = (char *) malloc(in * nrows * d);

	if (rows == NULL)
		return oom(err, in * nrows * d);
	memcpy(rows, t, in * nrows * d);
#define TURN(Tin, Tout, value) \
	for (int64_t r0 = 0; r0 < nrows; r0 += 32) \
	{ \
		int64_t		r1 = r0 + 32 < nrows ? r0 + 32 : nrows; \
		for (int j = 0; j < d; j++) \
			for (int64_t r = r0; r < r1; r++) \
			{ \
				Tin			v = ((const Tin *) rows)[r * d + j]; \
				((Tout *) t)[j * b + r] = (value); \
			} \
	}
	if (!ds->narrow_held && in == sizeof(float))
		TURN(float, double, (double) v)
	else if (!ds->narrow_held && in == sizeof(uint16_t))
		TURN(uint16_t, double, (double) pggpu_cpu_half(v))
	else if (in == sizeof(double))
		TURN(double, double, v)
	else if (in == sizeof(float))
		TURN(float, float, v)
	else
		TURN(uint16_t, uint16_t, v)
#undef TURN
	free(rows);
	return PGGPU_OK;
}

pggpu_status
pggpu_cpu_push(pggpu_data *ds, int64_t nrows, bool by_rows, pggpu_error *err)
{
	cpu_state  *s = ST(ds);
	char	   *t = (char *) pggpu_cpu_batch(ds);
	int64_t		b = TILE(ds);
	size_t		size = held_size(ds);
	pggpu_status st;

	if (s->finished)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no batch may follow a partial batch");
	if (by_rows && (st = turn_rows(ds, t, nrows, ds->f16 ? sizeof(uint16_t) : ds->f32 ? sizeof(float) : sizeof(double),
								   err)) != PGGPU_OK)
		return st;
	for (int j = 0; j < ds->d && nrows < b; j++)
		memset(t + (j * b + nrows) * size, 0, size * (b - nrows));
	ds->n += nrows;
	if (nrows < b)
	{
		s->finished = true;
		return PGGPU_OK;
	}
	return ensure_tiles(ds, (ds->n >> ds->log_b) + 1, err);
}

double *
pggpu_cpu_rows(pggpu_data *ds)
{
	return ST(ds)->X;
}

const float *
pggpu_cpu_rows_f32(pggpu_data *ds)
{
	return ST(ds)->Xf;
}

const uint16_t *
pggpu_cpu_rows_f16(pggpu_data *ds)
{
	return ST(ds)->Xh;
}

const double *
pggpu_cpu_block(pggpu_data *ds, int64_t i0, double *buf, int64_t *stride)
{
	cpu_state  *s = ST(ds);
	int64_t		b = TILE(ds);
	int64_t		at = pggpu_at(i0, 0, ds->d, ds->log_b);

	if (!ds->narrow_held)
	{
		*stride = b;
		return s->X + at;
	}
	for (int j = 0; j < ds->d; j++)
	{
		float		f[RB];

		if (s->Xh)
			pggpu_cpu_halves(s->Xh + at + j * b, f, RB);
		for (int q = 0; q < RB; q++)
			buf[j * RB + q] = s->Xh ? f[q] : s->Xf[at + j * b + q];
	}
	*stride = RB;
	return buf;
}
