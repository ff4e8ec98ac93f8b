/*
 * kmeans_args.c - the k-means functions' arguments: each checked, with the
 * error a caller can act on (SQLSTATE, hint), and a fit's settings from them.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "pg_gpu.h"

#define MAX_N_INIT 1000


void
pg_gpu_require_arg(FunctionCallInfo fcinfo, int n, const char *name)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
}

/*
 * A two-dimensional float8 array of rows x cols (cols = -1: any), no NULLs,
 * finite; returns its elements row-major.
 */
double *
pg_gpu_matrix_arg(ArrayType *a, const char *name, int rows, int cols, int *rows_out)
{
	int			nd = ARR_NDIM(a);
	int		   *dims = ARR_DIMS(a);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	double	   *m;

	if (nd != 2 || (rows >= 0 && dims[0] != rows) || (cols >= 0 && dims[1] != cols))
	{
		if (rows >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("%s must be a %d x %d array (k rows of one value per column)",
							name, rows, cols),
					 errdetail("It has %d dimension(s)%s.", nd,
							   nd == 2 ? psprintf(", %d x %d", dims[0], dims[1]) : ""),
					 errhint("Write it as ARRAY[[x1, y1, ...], [x2, y2, ...], ...].")));
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a two-dimensional array with %d columns (one row per centroid)",
						name, cols),
				 errdetail("It has %d dimension(s)%s.", nd,
						   nd == 2 ? psprintf(", %d x %d", dims[0], dims[1]) : ""),
				 errhint("Write it as ARRAY[[x1, y1, ...], [x2, y2, ...], ...] with values in the order of the columns used.")));
	}
	deconstruct_array(a, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
	m = palloc(sizeof(double) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain NULL", name)));
		m[i] = DatumGetFloat8(elems[i]);
		if (!isfinite(m[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must contain only finite values", name)));
	}
	*rows_out = dims[0];
	return m;
}

/*
 * The metric argument at position n: 'euclidean' or 'cosine', and with
 * inner_product 'inner_product' too (gpu_knn) (an extension script of 1.1
 * passes none: euclidean)
 */
pggpu_metric
pg_gpu_metric_arg(FunctionCallInfo fcinfo, int n, bool inner_product)
{
	char	   *m;

	if (PG_NARGS() <= n)
		return PGGPU_METRIC_EUCLIDEAN;
	pg_gpu_require_arg(fcinfo, n, "metric");
	m = text_to_cstring(PG_GETARG_TEXT_PP(n));
	if (pg_strcasecmp(m, "euclidean") == 0)
		return PGGPU_METRIC_EUCLIDEAN;
	if (pg_strcasecmp(m, "cosine") == 0)
		return PGGPU_METRIC_COSINE;
	if (inner_product && pg_strcasecmp(m, "inner_product") == 0)
		return PGGPU_METRIC_INNER_PRODUCT;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown metric \"%s\"", m),
			 errhint(inner_product ? "Use 'euclidean', 'cosine' or 'inner_product'." : "Use 'euclidean' or 'cosine'.")));
}

/* metric cosine: ERROR on a zero row of a centroid matrix (it has no direction) */
void
pg_gpu_no_zero_rows(const double *m, int k, int d, const char *name)
{
	for (int c = 0; c < k; c++)
	{
		bool		zero = true;

		for (int j = 0; j < d; j++)
			zero &= m[(int64) c * d + j] == 0;
		if (zero)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("row %d of %s is zero, which has no direction for metric cosine", c + 1, name)));
	}
}

/* sample => m (argument n, where the function has it); 0 when NULL */
int64
pg_gpu_sample_arg(FunctionCallInfo fcinfo, int n)
{
	int64		m;

	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return 0;
	m = PG_GETARG_INT64(n);
	if (m < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sample must be at least 1, not %lld", (long long) m),
				 errhint("sample => m fits on m rows drawn by the seed; leave it NULL to fit on every row.")));
	return m;
}

/* the sample holds at least k rows */
void
pg_gpu_check_sample(int64 sample, int k)
{
	if (sample > 0 && sample < k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sample (%lld) is smaller than k (%d)", (long long) sample, k),
				 errhint("Draw at least k rows; peers draw 50 to 256 a cluster.")));
}

/*
 * The settings of a fit at these argument positions (-1: absent from this
 * function): max_iter, tol, init, seed, metric, n_init, scale
 */
void
pg_gpu_parse_settings(FunctionCallInfo fcinfo, int a_max_iter, int a_tol, int a_init, int a_seed,
			   int a_metric, int a_n_init, int a_scale, FitSettings *fs)
{
	pggpu_kmeans_params *p = &fs->p;
	char	   *init;

	memset(fs, 0, sizeof(*fs));
	fs->metric = pg_gpu_metric_arg(fcinfo, a_metric, false);
	pg_gpu_require_arg(fcinfo, a_max_iter, "max_iter");
	pg_gpu_require_arg(fcinfo, a_tol, "tol");
	pg_gpu_require_arg(fcinfo, a_init, "init");
	pg_gpu_require_arg(fcinfo, a_seed, "seed");
	p->max_iter = PG_GETARG_INT32(a_max_iter);
	p->tol = PG_GETARG_FLOAT8(a_tol);
	p->seed = (uint64) PG_GETARG_INT64(a_seed);
	p->n_init = 1;
	if (PG_NARGS() > a_n_init)
	{
		pg_gpu_require_arg(fcinfo, a_n_init, "n_init");
		p->n_init = PG_GETARG_INT32(a_n_init);
		if (p->n_init < 1 || p->n_init > MAX_N_INIT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("n_init must be between 1 and %d, not %d", MAX_N_INIT, p->n_init),
					 errhint("n_init is the number of seeded starts; the one of least inertia is kept.")));
	}
	if (PG_NARGS() > a_scale)
	{
		char	   *sc;

		pg_gpu_require_arg(fcinfo, a_scale, "scale");
		sc = text_to_cstring(PG_GETARG_TEXT_PP(a_scale));
		if (pg_strcasecmp(sc, "standard") == 0)
			fs->standard = true;
		else if (pg_strcasecmp(sc, "none") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown scale \"%s\"", sc),
					 errhint("Use 'none', or 'standard' to cluster each column as (x - mean) / standard deviation.")));
		if (fs->standard && fs->metric == PGGPU_METRIC_COSINE)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("scale 'standard' does not apply to metric cosine"),
					 errhint("Cosine compares directions, which scaling the columns would change; use scale => 'none'.")));
	}
	init = text_to_cstring(PG_GETARG_TEXT_PP(a_init));
	if (p->max_iter < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_iter must be at least 1, not %d", p->max_iter)));
	if (!(p->tol >= 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tol must be a number >= 0"),
				 errhint("tol is the fraction of rows allowed to change cluster in the last iteration; 0 runs to a fixed point.")));
	if (pg_strcasecmp(init, "k-means++") == 0)
		p->init = PGGPU_INIT_KMEANSPP, fs->init = "k-means++";
	else if (pg_strcasecmp(init, "random") == 0)
		p->init = PGGPU_INIT_RANDOM, fs->init = "random";
	else if (pg_strcasecmp(init, "k-means||") == 0)
		p->init = PGGPU_INIT_PARALLEL, fs->init = "k-means||";
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown init \"%s\"", init),
				 errhint("Use 'k-means++', 'k-means||' or 'random', or pass init_centroids.")));
	p->check_interrupts = pg_gpu_check_interrupts;
}

/*
 * algorithm => 'lloyd' (the default; absent from an older script's
 * signature) or 'hierarchical' (cuda/hier.c: for very large k)
 */
void
pg_gpu_algorithm_arg(FunctionCallInfo fcinfo, int n, FitSettings *fs)
{
	char	   *a;

	fs->p.algorithm = PGGPU_ALGORITHM_LLOYD;
	if (PG_NARGS() <= n)
		return;
	pg_gpu_require_arg(fcinfo, n, "algorithm");
	a = text_to_cstring(PG_GETARG_TEXT_PP(n));
	if (pg_strcasecmp(a, "hierarchical") == 0)
		fs->p.algorithm = PGGPU_ALGORITHM_HIERARCHICAL;
	else if (pg_strcasecmp(a, "lloyd") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown algorithm \"%s\"", a),
				 errhint("Use 'lloyd', or 'hierarchical' for very large k (about sqrt(k) groups, then each group's share of k).")));
}

/* k between 1 and the usable rows */
void
pg_gpu_check_k(int k, const PgGpuRows *rows)
{
	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1, not %d", k)));
	if (rows && k > rows->nvalid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k (%d) is larger than the number of usable rows (%lld)",
						k, (long long) rows->nvalid),
				 errhint("Choose k at most the number of rows without NULL, NaN or infinite values.")));
}
