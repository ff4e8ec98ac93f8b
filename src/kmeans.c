/*
 * kmeans.c - SQL entry points gpu_kmeans, gpu_kmeans_fit, gpu_kmeans_assign.
 *
 * Each call: check the arguments, resolve the columns, pick the device, read
 * the relation into a data set (streamed to the GPU as it is read), run the
 * algorithm in the compute layer, then return rows.  gpu_kmeans and
 * gpu_kmeans_assign return value-per-call, so a call in the select list
 * streams its rows; device memory is released before the first row goes out.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_gpu.h"

PG_FUNCTION_INFO_V1(gpu_kmeans);
PG_FUNCTION_INFO_V1(gpu_kmeans_fit);
PG_FUNCTION_INFO_V1(gpu_kmeans_assign);

/* argument positions shared by gpu_kmeans and gpu_kmeans_fit */
enum
{
	A_RELATION, A_K, A_COLUMNS, A_ID_COLUMN, A_MAX_ITER, A_TOL, A_INIT,
	A_INIT_CENTROIDS, A_SEED, A_METRIC, A_N_INIT
};

/* the most starts n_init may ask for */
#define MAX_N_INIT 1000

/* gpu_kmeans_assign's */
enum
{
	AA_RELATION, AA_CENTROIDS, AA_COLUMNS, AA_ID_COLUMN, AA_METRIC
};

static void
require_arg(FunctionCallInfo fcinfo, int n, const char *name)
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
static double *
matrix_arg(ArrayType *a, const char *name, int rows, int cols, int *rows_out)
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
 * The metric argument at position n: 'euclidean' or 'cosine' (an extension
 * script of 1.1 passes none: euclidean)
 */
static pggpu_metric
metric_arg(FunctionCallInfo fcinfo, int n)
{
	char	   *m;

	if (PG_NARGS() <= n)
		return PGGPU_METRIC_EUCLIDEAN;
	require_arg(fcinfo, n, "metric");
	m = text_to_cstring(PG_GETARG_TEXT_PP(n));
	if (pg_strcasecmp(m, "euclidean") == 0)
		return PGGPU_METRIC_EUCLIDEAN;
	if (pg_strcasecmp(m, "cosine") == 0)
		return PGGPU_METRIC_COSINE;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown metric \"%s\"", m),
			 errhint("Use 'euclidean' or 'cosine'.")));
}

/* metric cosine: ERROR on a zero row of a centroid matrix (it has no direction) */
static void
no_zero_rows(const double *m, int k, int d, const char *name)
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

/* reads the relation; errors when nothing is usable; notes skipped rows */
static PgGpuData *
load(const PgGpuSource *src, pggpu_metric metric, bool want_ids, PgGpuRows *rows,
	 const char *skipped)
{
	PgGpuData  *data = pg_gpu_data_open(pg_gpu_choose_backend(), src->ncols,
										(int64) src->expected_rows);

	pggpu_data_set_metric(data->ds, metric);
	pggpu_data_set_double_only(data->ds, pg_gpu_kmeans_precision == PG_GPU_PRECISION_DOUBLE);
	pg_gpu_read_source(src, data->ds, want_ids, rows);
	if (rows->ninvalid > 0 && src->veckind != PG_GPU_VEC_NONE)
		ereport(NOTICE,
				(errmsg("%lld of %lld rows of \"%s\" have a NULL vector, or NULL, NaN or infinite elements%s; %s",
						(long long) rows->ninvalid, (long long) (rows->ninvalid + rows->nvalid),
						src->relname, src->normalize ? ", or a zero vector" : "", skipped)));
	else if (rows->ninvalid > 0)
		ereport(NOTICE,
				(errmsg("%lld of %lld rows of \"%s\" have NULL, NaN or infinite values in the used columns%s; %s",
						(long long) rows->ninvalid, (long long) (rows->ninvalid + rows->nvalid),
						src->relname, src->normalize ? ", or are zero in all of them" : "", skipped)));
	return data;
}

typedef struct KmeansOut
{
	PgGpuSource src;
	PgGpuRows	rows;
	int			k;
	int32	   *labels;
	double	   *distances;		/* gpu_kmeans_assign only */
	double	   *centroids;
	int64	   *sizes;
	double		inertia;
	int			iterations;
	bool		converged;
	char	   *device;
	int64		next;			/* next row to return */
	/* stages, for the DEBUG2 timing message (k-means only) */
	const char *fname;			/* set by k-means; NULL: no message */
	double		read_ms;
	double		push_ms;
	double		seed_ms;
	double		iterate_ms;
	TimestampTz returning;		/* when the first row was returned */
} KmeansOut;

static double
ms_since(TimestampTz start)
{
	return (GetCurrentTimestamp() - start) / 1000.0;
}

/* the GPU's plan of the call's steps (cuda/route.h), at DEBUG2 */
static void
log_route(const pggpu_data *ds)
{
	if (*pggpu_data_route(ds))
		elog(DEBUG2, "pg_gpu: %s", pggpu_data_route(ds));
}

/*
 * The stages of one k-means call, at DEBUG2 (SET client_min_messages =
 * debug2): reading the rows (transfer: of which waiting on host-to-device
 * copies), seeding, iterating, and producing the result rows.
 */
static void
log_stages(const KmeansOut *o, double return_ms)
{
	if (o->fname == NULL || !message_level_is_interesting(DEBUG2))
		return;
	elog(DEBUG2, "pg_gpu: %s stages (ms): read %.1f, transfer %.1f, seed %.1f, iterate %.1f, iterations %d, return %.1f",
		 o->fname, o->read_ms, o->push_ms, o->seed_ms, o->iterate_ms, o->iterations, return_ms);
}

static void
run_kmeans(FunctionCallInfo fcinfo, bool want_labels, KmeansOut *out)
{
	pggpu_kmeans_params p = {0};
	pggpu_kmeans_result res = {0};
	pggpu_error err = {0};
	char	   *init;
	double	   *given = NULL;
	PgGpuData  *data;
	TimestampTz start;
	pggpu_metric metric = metric_arg(fcinfo, A_METRIC);

	require_arg(fcinfo, A_RELATION, "relation");
	require_arg(fcinfo, A_K, "k");
	require_arg(fcinfo, A_MAX_ITER, "max_iter");
	require_arg(fcinfo, A_TOL, "tol");
	require_arg(fcinfo, A_INIT, "init");
	require_arg(fcinfo, A_SEED, "seed");

	p.k = PG_GETARG_INT32(A_K);
	p.max_iter = PG_GETARG_INT32(A_MAX_ITER);
	p.tol = PG_GETARG_FLOAT8(A_TOL);
	p.seed = (uint64) PG_GETARG_INT64(A_SEED);
	if (PG_NARGS() > A_N_INIT)
	{
		require_arg(fcinfo, A_N_INIT, "n_init");
		p.n_init = PG_GETARG_INT32(A_N_INIT);
		if (p.n_init < 1 || p.n_init > MAX_N_INIT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("n_init must be between 1 and %d, not %d", MAX_N_INIT, p.n_init),
					 errhint("n_init is the number of seeded starts; the one of least inertia is kept.")));
	}
	init = text_to_cstring(PG_GETARG_TEXT_PP(A_INIT));
	if (p.k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1, not %d", p.k)));
	if (p.max_iter < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_iter must be at least 1, not %d", p.max_iter)));
	if (!(p.tol >= 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tol must be a number >= 0"),
				 errhint("tol is the fraction of rows allowed to change cluster in the last iteration; 0 runs to a fixed point.")));
	if (pg_strcasecmp(init, "k-means++") == 0)
		p.init = PGGPU_INIT_KMEANSPP;
	else if (pg_strcasecmp(init, "random") == 0)
		p.init = PGGPU_INIT_RANDOM;
	else if (pg_strcasecmp(init, "k-means||") == 0)
		p.init = PGGPU_INIT_PARALLEL;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown init \"%s\"", init),
				 errhint("Use 'k-means++', 'k-means||' or 'random', or pass init_centroids.")));

	pg_gpu_resolve_source(PG_GETARG_OID(A_RELATION),
						  PG_ARGISNULL(A_COLUMNS) ? NULL : PG_GETARG_ARRAYTYPE_P(A_COLUMNS),
						  PG_ARGISNULL(A_ID_COLUMN) ? NULL : PG_GETARG_TEXT_PP(A_ID_COLUMN),
						  want_labels, metric == PGGPU_METRIC_COSINE, &out->src);
	if (!PG_ARGISNULL(A_INIT_CENTROIDS))
	{
		int			rows;

		given = matrix_arg(PG_GETARG_ARRAYTYPE_P(A_INIT_CENTROIDS), "init_centroids",
						   p.k, out->src.ncols, &rows);
		if (p.n_init > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("n_init = %d needs seeded starts, not init_centroids", p.n_init),
					 errhint("Leave n_init at 1 with init_centroids, or drop init_centroids to start from seeds.")));
		p.init = PGGPU_INIT_GIVEN;
		p.init_centroids = given;
		if (metric == PGGPU_METRIC_COSINE)
			no_zero_rows(given, p.k, out->src.ncols, "init_centroids");
	}

	start = GetCurrentTimestamp();
	data = load(&out->src, metric, want_labels, &out->rows,
				want_labels ? "they come back with cluster NULL" : "they take no part in the fit");
	out->read_ms = ms_since(start);
	out->push_ms = pggpu_data_push_seconds(data->ds) * 1e3;
	if (out->rows.nvalid == 0)
		pg_gpu_no_usable_rows(&out->src, &out->rows);
	if (p.k > out->rows.nvalid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k (%d) is larger than the number of usable rows (%lld)",
						p.k, (long long) out->rows.nvalid),
				 errhint("Choose k at most the number of rows without NULL, NaN or infinite values.")));

	out->k = p.k;
	out->centroids = MemoryContextAllocHuge(CurrentMemoryContext,
											sizeof(double) * p.k * out->src.ncols);
	out->sizes = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * p.k);
	res.centroids = out->centroids;
	res.sizes = out->sizes;
	if (want_labels)
		res.labels = out->labels =
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * out->rows.nvalid);
	p.check_interrupts = pg_gpu_check_interrupts;
	if (pggpu_kmeans(data->ds, &p, &res, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	log_route(data->ds);
	out->fname = want_labels ? "gpu_kmeans" : "gpu_kmeans_fit";
	/* as scikit-learn warns: a fit that max_iter cut short */
	if (!res.converged)
		ereport(NOTICE,
				(errmsg("%s: k-means stopped at max_iter = %d without converging",
						out->fname, p.max_iter),
				 errdetail("More rows than tol = %g of them (%.0f of %lld) changed cluster in the last iteration.",
						   p.tol, floor(p.tol * (double) out->rows.nvalid), (long long) out->rows.nvalid),
				 errhint("Raise max_iter or tol; gpu_kmeans_fit's converged column says the same.")));
	/* which device ran it, every call (DEBUG2: the fallback NOTICE comes once a session; tests run on either device) */
	elog(DEBUG2, "pg_gpu: %s on %s: %lld rows, k = %d, %d iterations%s",
		 out->fname, pggpu_data_device_name(data->ds),
		 (long long) out->rows.nvalid, p.k, res.iterations, res.converged ? ", converged" : "");
	out->inertia = res.inertia;
	out->iterations = res.iterations;
	out->converged = res.converged;
	out->device = pstrdup(pggpu_data_device_name(data->ds));
	out->seed_ms = res.seed_seconds * 1e3;
	out->iterate_ms = res.iterate_seconds * 1e3;
	pg_gpu_data_close(data);
}

/* builds the id/cluster[/distance] row r of a value-per-call result */
static HeapTuple
member_tuple(FuncCallContext *fc, KmeansOut *o)
{
	Datum		v[3];
	bool		nulls[3] = {false, false, false};
	int64		r = o->next++;

	if (r < o->rows.nvalid)
	{
		v[0] = Int64GetDatum(o->rows.ids[r]);
		v[1] = Int32GetDatum(o->labels[r] + 1);
		if (o->distances)
			v[2] = Float8GetDatum(o->distances[r]);
	}
	else
	{
		v[0] = Int64GetDatum(o->rows.invalid_ids[r - o->rows.nvalid]);
		nulls[1] = nulls[2] = true;
	}
	return heap_form_tuple(fc->tuple_desc, v, nulls);
}

static Datum
member_srf(PG_FUNCTION_ARGS, void (*run) (FunctionCallInfo, KmeansOut *))
{
	FuncCallContext *fc;
	KmeansOut  *o;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext old;
		TupleDesc	td;

		fc = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(fc->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		fc->tuple_desc = BlessTupleDesc(td);
		o = palloc0(sizeof(KmeansOut));
		run(fcinfo, o);
		fc->user_fctx = o;
		MemoryContextSwitchTo(old);
		o->returning = GetCurrentTimestamp();
	}
	fc = SRF_PERCALL_SETUP();
	o = (KmeansOut *) fc->user_fctx;
	if (o->next < o->rows.nvalid + o->rows.ninvalid)
		SRF_RETURN_NEXT(fc, HeapTupleGetDatum(member_tuple(fc, o)));
	log_stages(o, ms_since(o->returning));
	SRF_RETURN_DONE(fc);
}

static void
run_kmeans_labels(FunctionCallInfo fcinfo, KmeansOut *o)
{
	run_kmeans(fcinfo, true, o);
}

Datum
gpu_kmeans(PG_FUNCTION_ARGS)
{
	return member_srf(fcinfo, run_kmeans_labels);
}

Datum
gpu_kmeans_fit(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KmeansOut	o;
	Datum		v[6];
	bool		nulls[6] = {false};
	Datum	   *cd;
	Datum	   *sd;
	int			d;
	int			dims[2];
	int			lbs[2] = {1, 1};
	TimestampTz returning;

	InitMaterializedSRF(fcinfo, 0);
	memset(&o, 0, sizeof(o));
	run_kmeans(fcinfo, false, &o);
	returning = GetCurrentTimestamp();
	d = o.src.ncols;
	cd = palloc(sizeof(Datum) * o.k * d);
	sd = palloc(sizeof(Datum) * o.k);
	for (int64 i = 0; i < (int64) o.k * d; i++)
		cd[i] = Float8GetDatum(o.centroids[i]);
	for (int c = 0; c < o.k; c++)
		sd[c] = Int64GetDatum(o.sizes[c]);
	dims[0] = o.k;
	dims[1] = d;
	v[0] = PointerGetDatum(construct_md_array(cd, NULL, 2, dims, lbs, FLOAT8OID, 8,
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	v[1] = PointerGetDatum(construct_array(sd, o.k, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
	v[2] = Float8GetDatum(o.inertia);
	v[3] = Int32GetDatum(o.iterations);
	v[4] = BoolGetDatum(o.converged);
	v[5] = CStringGetTextDatum(o.device);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	log_stages(&o, ms_since(returning));
	return (Datum) 0;
}

/* gpu_kmeans_assign(relation, centroids, columns, id_column, metric) */
static void
run_assign(FunctionCallInfo fcinfo, KmeansOut *o)
{
	pggpu_error err = {0};
	PgGpuData  *data;
	double	   *centroids;
	pggpu_metric metric = metric_arg(fcinfo, AA_METRIC);

	require_arg(fcinfo, AA_RELATION, "relation");
	require_arg(fcinfo, AA_CENTROIDS, "centroids");
	pg_gpu_resolve_source(PG_GETARG_OID(AA_RELATION),
						  PG_ARGISNULL(AA_COLUMNS) ? NULL : PG_GETARG_ARRAYTYPE_P(AA_COLUMNS),
						  PG_ARGISNULL(AA_ID_COLUMN) ? NULL : PG_GETARG_TEXT_PP(AA_ID_COLUMN),
						  true, metric == PGGPU_METRIC_COSINE, &o->src);
	centroids = matrix_arg(PG_GETARG_ARRAYTYPE_P(AA_CENTROIDS), "centroids", -1, o->src.ncols, &o->k);
	if (o->k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("centroids must have at least one row")));
	if (metric == PGGPU_METRIC_COSINE)
		no_zero_rows(centroids, o->k, o->src.ncols, "centroids");
	data = load(&o->src, metric, true, &o->rows, "they come back with cluster NULL");
	o->labels = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * Max(o->rows.nvalid, 1));
	o->distances = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * Max(o->rows.nvalid, 1));
	if (pggpu_assign(data->ds, centroids, o->k, o->labels, o->distances, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	log_route(data->ds);
	pg_gpu_data_close(data);
}

Datum
gpu_kmeans_assign(PG_FUNCTION_ARGS)
{
	return member_srf(fcinfo, run_assign);
}
