/*
 * columns.c - the CPU backend's column statistics and affine map of the
 * rows (standard scaling: see pggpu_data_standardize in ../columns.c), in
 * the roundings the GPU's make (compute_internal.h: pggpu_col_sum,
 * pggpu_affine).
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

pggpu_status
pggpu_cpu_col_sums(pggpu_data *ds, const double *center, double *sums, pggpu_error *err)
{
	const double *x = pggpu_cpu_rows(ds);
	int64_t		b = (int64_t) 1 << ds->log_b;
	int64_t		tiles = (ds->n + b - 1) >> ds->log_b;

	(void) err;
	for (int64_t t = 0; t < tiles; t++)
	{
		int64_t		rows = ds->n - t * b < b ? ds->n - t * b : b;

		poll_tiles(ds, t);
		for (int j = 0; j < ds->d; j++)
			sums[t * ds->d + j] = pggpu_col_sum(x + (t * ds->d + j) * b, rows, center, j);
	}
	return PGGPU_OK;
}

pggpu_status
pggpu_cpu_col_affine(pggpu_data *ds, const double *sub, const double *div, pggpu_error *err)
{
	double	   *x = pggpu_cpu_rows(ds);
	int64_t		b = (int64_t) 1 << ds->log_b;
	int64_t		tiles = (ds->n + b - 1) >> ds->log_b;

	(void) err;
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
