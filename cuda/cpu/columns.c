/*
 * columns.c - the CPU backend's maps of all the rows' values: their range
 * and power-of-two scale (../compute.c), their column statistics and affine
 * map (standard scaling: see pggpu_data_standardize in ../columns.c), the
 * rows scaled to norm 1 (cosine), in the roundings the GPU's make
 * (compute_internal.h: pggpu_col_sum, pggpu_affine, pggpu_normalize_at).
 */
#include "compute_internal.h"

/* values between two calls of the interrupt callback (a few milliseconds) */
#define POLL_VALUES ((int64_t) 1 << 22)

/* before tile t: the interrupt callback, every POLL_VALUES values or so */
static void
poll_tiles(pggpu_data *ds, int64_t t)
{
	int64_t		per = ((int64_t) ds->d << ds->log_b);
	int64_t		every = per >= POLL_VALUES ? 1 : POLL_VALUES / per;

	if (ds->interrupt && t % every == 0)
		ds->interrupt(ds->interrupt_arg);
}

/*
 * Standard scaling and a power-of-two scale rewrite the values: rows held
 * as floats are widened to doubles first (the statistics before the map)
 */
static pggpu_status
widen(pggpu_data *ds, pggpu_error *err)
{
	return ds->narrow_held ? ds->ops->widen(ds, err) : PGGPU_OK;
}

pggpu_status
pggpu_cpu_col_sums(pggpu_data *ds, const double *center, double *sums, pggpu_error *err)
{
	pggpu_status st = widen(ds, err);
	const double *x = pggpu_cpu_rows(ds);
	int64_t		b = (int64_t) 1 << ds->log_b;
	int64_t		tiles = (ds->n + b - 1) >> ds->log_b;
	const double *dist2,
			   *rw;

	if (st != PGGPU_OK)
		return st;
	pggpu_cpu_draw_state(ds, &dist2, &rw);
	for (int64_t t = 0; t < tiles; t++)
	{
		int64_t		rows = ds->n - t * b < b ? ds->n - t * b : b;

		poll_tiles(ds, t);
		for (int j = 0; j < ds->d; j++)
			sums[t * ds->d + j] = pggpu_col_sum(x + (t * ds->d + j) * b, rw ? rw + t * b : NULL, rows, center, j);
	}
	return PGGPU_OK;
}

pggpu_status
pggpu_cpu_col_affine(pggpu_data *ds, const double *sub, const double *div, pggpu_error *err)
{
	pggpu_status st = widen(ds, err);
	double	   *x = pggpu_cpu_rows(ds);
	int64_t		b = (int64_t) 1 << ds->log_b;
	int64_t		tiles = (ds->n + b - 1) >> ds->log_b;

	if (st != PGGPU_OK)
		return st;
	for (int64_t t = 0; t < tiles; t++)
	{
		int64_t		rows = ds->n - t * b < b ? ds->n - t * b : b;

		poll_tiles(ds, t);
		for (int j = 0; j < ds->d; j++)
		{
			double	   *col = x + (t * ds->d + j) * b;

			for (int64_t r = 0; r < rows; r++)
				col[r] = pggpu_affine(col[r], sub[j], div[j]);
		}
	}
	return PGGPU_OK;
}

pggpu_status
pggpu_cpu_unit_rows(pggpu_data *ds, pggpu_error *err)
{
	pggpu_status st = widen(ds, err);
	double	   *x = pggpu_cpu_rows(ds);
	int64_t		b = (int64_t) 1 << ds->log_b;

	if (st != PGGPU_OK)
		return st;
	for (int64_t i = 0; i < ds->n; i++)
	{
		if ((i & (b - 1)) == 0)
			poll_tiles(ds, i >> ds->log_b);
		(void) pggpu_normalize_at(x + pggpu_at(i, 0, ds->d, ds->log_b), b, ds->d, 1.0);
	}
	return PGGPU_OK;
}

/* the values of the tiles in use (the rows past n are 0) */
static int64_t
used_elems(pggpu_data *ds)
{
	int64_t		b = (int64_t) 1 << ds->log_b;

	return ((ds->n + b - 1) >> ds->log_b) * b * ds->d;
}


static void
poll_now(pggpu_data *ds)
{
	if (ds->interrupt)
		ds->interrupt(ds->interrupt_arg);
}

pggpu_status
pggpu_cpu_range(pggpu_data *ds, double *lo, double *hi, pggpu_error *err)
{
	const double *x = pggpu_cpu_rows(ds);
	const float *xf = pggpu_cpu_rows_f32(ds);
	const uint16_t *xh = pggpu_cpu_rows_f16(ds);
	int64_t		len = used_elems(ds);
	double		l = INFINITY,
				h = 0;

	(void) err;
	for (int64_t i0 = 0; i0 < len; i0 += POLL_VALUES)
	{
		int64_t		i1 = len - i0 < POLL_VALUES ? len : i0 + POLL_VALUES;

		poll_now(ds);
		for (int64_t i = i0; i < i1; i++)
		{
			double		a = fabs(pggpu_cpu_value(x, xf, xh, i));

			h = a > h ? a : h;
			l = a > 0 && a < l ? a : l;
		}
	}
	*lo = l;
	*hi = h;
	return PGGPU_OK;
}

pggpu_status
pggpu_cpu_scale(pggpu_data *ds, double factor, pggpu_error *err)
{
	pggpu_status st = widen(ds, err);
	double	   *x = pggpu_cpu_rows(ds);
	int64_t		len = used_elems(ds);

	if (st != PGGPU_OK)
		return st;
	for (int64_t i0 = 0; i0 < len; i0 += POLL_VALUES)
	{
		int64_t		i1 = len - i0 < POLL_VALUES ? len : i0 + POLL_VALUES;

		poll_now(ds);
		for (int64_t i = i0; i < i1; i++)
			x[i] *= factor;
	}
	return PGGPU_OK;
}
