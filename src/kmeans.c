/*
 * kmeans.c - SQL entry points gpu_kmeans, gpu_kmeans_fit, gpu_kmeans_assign
 * (by centroids), gpu_kmeans_apply (by a model), gpu_kmeans_choose_k.
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
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_gpu.h"

PG_FUNCTION_INFO_V1(gpu_kmeans);
PG_FUNCTION_INFO_V1(gpu_kmeans_fit);
PG_FUNCTION_INFO_V1(gpu_kmeans_assign);
PG_FUNCTION_INFO_V1(gpu_kmeans_apply);
PG_FUNCTION_INFO_V1(gpu_kmeans_choose_k);
PG_FUNCTION_INFO_V1(gpu_kmeans_keyed);
PG_FUNCTION_INFO_V1(gpu_kmeans_fit_keyed);
PG_FUNCTION_INFO_V1(gpu_kmeans_assign_keyed);
PG_FUNCTION_INFO_V1(gpu_kmeans_apply_keyed);

/*
 * The keyed overloads' id_type (keys.c): after the relation and k (or the
 * centroids, the model), before the arguments with defaults; left out
 * before the calls, so that both overloads have the positions below
 */
#define A_ID_TYPE 2

/* a function's two entry points: bigint ids, and its keyed overload's */
#define ENTRY_POINTS(name, call) \
	Datum name(PG_FUNCTION_ARGS) { static const Oid none[2]; return call(fcinfo, none); } \
	Datum name##_keyed(PG_FUNCTION_ARGS) { return pg_gpu_call_keyed(fcinfo, A_ID_TYPE, 1, call); }

/* argument positions shared by gpu_kmeans and gpu_kmeans_fit */
enum
{
	A_RELATION, A_K, A_COLUMNS, A_ID_COLUMN, A_MAX_ITER, A_TOL, A_INIT,
	A_INIT_CENTROIDS, A_SEED, A_METRIC, A_N_INIT, A_SCALE, A_MEMBERSHIPS, A_FIT_SAMPLE
};

/* gpu_kmeans's sample: where gpu_kmeans_fit has memberships */
#define A_KM_SAMPLE A_MEMBERSHIPS
/* algorithm and weight_column: the arguments after sample (gpu_kmeans's and gpu_kmeans_fit's) */
#define A_ALGORITHM(a_sample) ((a_sample) + 1)
#define A_WEIGHT_COLUMN(a_sample) ((a_sample) + 2)

/* gpu_kmeans_choose_k's */
enum
{
	AK_RELATION, AK_KS, AK_COLUMNS, AK_MAX_ITER, AK_TOL, AK_INIT, AK_SEED, AK_METRIC,
	AK_N_INIT, AK_SCALE, AK_SAMPLE_SIZE, AK_SAMPLE, AK_WEIGHT_COLUMN
};

/* the most values of k gpu_kmeans_choose_k fits, and rows its silhouette takes */
#define MAX_KS 100
#define MAX_SAMPLE 20000

/* gpu_kmeans_assign's, and gpu_kmeans_apply's */
enum
{
	AA_RELATION, AA_CENTROIDS, AA_COLUMNS, AA_ID_COLUMN, AA_METRIC
};
enum
{
	AM_RELATION, AM_MODEL, AM_ID_COLUMN
};

static double
ms_since(TimestampTz start)
{
	return (GetCurrentTimestamp() - start) / 1000.0;
}

/*
 * reads the relation (for a fit into k clusters at most; 0: a labelling);
 * notes skipped rows.  Cosine on a GPU, of floats or halves: the rows read
 * as they are stored (the workers write them by rows, skipping zero ones),
 * held as doubles from the first, and scaled to norm 1 on the device once
 * read, the same values as the workers' scaling gives (pggpu_unit_row):
 * the read moves half the bytes and spends no pass of its own on them.
 */
static PgGpuData *
load(const PgGpuSource *src, const FitSettings *fs, bool want_ids, PgGpuRows *rows,
	 const char *skipped, int k)
{
	TimestampTz start = GetCurrentTimestamp();
	pggpu_backend backend = pg_gpu_choose_backend();
	PgGpuData  *data = pg_gpu_data_open(backend, src->ncols, (int64) src->expected_rows, k);
	PgGpuSource stored = *src;
	/* the read stage's parts, at DEBUG2 (beside the scan's own "read of") */
	double		open_ms = ms_since(start),
				source_ms,
				unit_ms = 0;

	stored.normalize = false;
	stored.skip_zero = true;
	pg_gpu_data_set_kmeans(data, fs->metric, pg_gpu_kmeans_precision == PG_GPU_PRECISION_DOUBLE);
	if (src->normalize && !fs->standard && backend == PGGPU_BACKEND_GPU &&
		src->veckind != PG_GPU_VEC_NONE && pg_gpu_source_dtype(&stored, false) != PGGPU_FLOAT64)
	{
		pg_gpu_data_set_dtype(data, pg_gpu_source_dtype(&stored, false));
		pg_gpu_data_hold_wide(data);
		pg_gpu_read_source(&stored, data, want_ids, rows);
		source_ms = ms_since(start) - open_ms;
		pg_gpu_data_unit_rows(data);
		unit_ms = ms_since(start) - open_ms - source_ms;
	}
	else
	{
		pg_gpu_data_set_dtype(data, pg_gpu_source_dtype(src, fs->standard));
		pg_gpu_read_source(src, data, want_ids, rows);
		source_ms = ms_since(start) - open_ms;
	}
	elog(DEBUG2, "pg_gpu: load of \"%s\" (ms): opening the data set %.1f, reading %.1f, scaling the rows to norm 1 %.1f",
		 src->relname, open_ms, source_ms, unit_ms);
	if (data->nshares > 1)
		elog(DEBUG1, "pg_gpu: %lld rows of \"%s\" dealt to %d shares on %s",
			 (long long) rows->nvalid, src->relname, data->nshares, pg_gpu_data_device(data));
	if (data->nparts > data->nshares)
		elog(DEBUG1, "pg_gpu: %lld rows of \"%s\" in %d parts of up to %lld rows (pg_gpu.kmeans_gpu_memory = %d MB), streamed through %s",
			 (long long) rows->nvalid, src->relname, data->nparts, (long long) pggpu_data_rows(data->parts[0]),
			 pg_gpu_kmeans_gpu_memory, pg_gpu_data_device(data));
	pg_gpu_notice_skipped(src, rows, skipped);
	return data;
}

/*
 * sample => m: the fit's rows m of the relation's usable rows drawn by the
 * seed (all of them where it has no more), *usable: how many it has
 */
static PgGpuData *
load_sample(const PgGpuSource *src, const FitSettings *fs, PgGpuRows *rows, const char *skipped,
			int k, int64 *usable)
{
	double		expect = src->expected_rows > 0 ? Min(src->expected_rows, (double) fs->sample) :
		(double) fs->sample;
	PgGpuData  *data = pg_gpu_data_open(pg_gpu_choose_backend(), src->ncols, (int64) expect, k);
	PgGpuRows	all;
	pggpu_dtype dtype = pg_gpu_source_dtype(src, fs->standard);

	pg_gpu_data_set_kmeans(data, fs->metric, pg_gpu_kmeans_precision == PG_GPU_PRECISION_DOUBLE);
	/* (a sample keeps halves as floats, as the data set holds them: pg_gpu_read_sample) */
	pg_gpu_data_set_dtype(data, dtype == PGGPU_FLOAT16 ? PGGPU_FLOAT32 : dtype);
	*usable = pg_gpu_read_sample(src, data, fs->sample, fs->p.seed, rows);
	elog(DEBUG1, "pg_gpu: a sample of %lld of the %lld usable rows of \"%s\"",
		 (long long) rows->nvalid, (long long) *usable, src->relname);
	all = *rows;
	all.nvalid = *usable;
	pg_gpu_notice_skipped(src, &all, skipped);
	return data;
}

/*
 * A Citus distributed table: its rows loaded on the nodes that hold its
 * shards (citus_kmeans.c), scaled by mean and std when given; NULL when the
 * call reads them here instead (not distributed, pg_gpu.citus_nodes off, or
 * why_not: what keeps this call off the nodes)
 */
static PgGpuCluster *
load_on_nodes(const PgGpuSource *src, pggpu_metric metric, bool want_ids, const double *mean,
			  const double *std, PgGpuRows *rows, const char *skipped, const char *why_not)
{
	PgGpuCluster *cl;

	if (!pg_gpu_on_nodes(src->relid, why_not))
		return NULL;
	cl = pg_gpu_cluster_load(src, metric, want_ids, mean, std, rows);
	pg_gpu_notice_skipped(src, rows, skipped);
	return cl;
}

typedef struct KmeansOut
{
	PgGpuSource src;
	PgGpuRows	rows;
	int			k;
	int32	   *labels;
	double	   *distances;		/* gpu_kmeans_assign and gpu_kmeans_apply only */
	int64		cap_valid;		/* and the room of their arrays */
	int64		cap_invalid;
	double	   *centroids;
	int64	   *sizes;
	double		inertia;
	int			iterations;
	bool		converged;
	int64		changed;		/* rows that changed cluster in the last iteration */
	int			groups;			/* algorithm 'hierarchical': its groups and the rows its fits ran on */
	int64		trained;
	int64		usable;			/* the relation's usable rows (more than rows.nvalid with a sample) */
	bool		want_model;		/* gpu_kmeans_fit: its model column */
	char	   *device;
	int64		next;			/* next row to return */
	Oid			keytype;		/* id_type (a keyed overload's), else InvalidOid: bigint */
	PgGpuKeys	labelled;		/* a labelling's ids, across its chunks */
	PgGpuCluster *cluster;		/* the rows are on a Citus cluster's nodes */
	/* k-means: the settings, the scaling and the centroids compared (for the model) */
	FitSettings fs;
	bool		given;			/* init_centroids */
	double	   *mean;			/* scale 'standard': d each, else NULL */
	double	   *std;
	double	   *scaled;			/* k x d: the centroids as compared (standardized) */
	/* stages, for the DEBUG2 timing message (k-means only) */
	const char *fname;			/* set by k-means; NULL: no message */
	double		read_ms;
	double		push_ms;
	double		seed_ms;
	double		iterate_ms;
	TimestampTz returning;		/* when the first row was returned */
} KmeansOut;

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

/* the compute layer's progress, into pg_stat_activity (progress.c) */
static void
fit_progress(void *arg, int start, int iteration)
{
	const KmeansOut *o = (const KmeansOut *) arg;
	char		starts[64] = "";

	if (o->fs.p.n_init > 1)
		snprintf(starts, sizeof(starts), " (start %d of %d)", start + 1, o->fs.p.n_init);
	if (iteration == 0)
		pg_gpu_progress(true, "k = %d, seeding%s, %lld rows", o->k, starts, (long long) o->rows.nvalid);
	else
		pg_gpu_progress(false, "k = %d, iteration %d of at most %d%s, %lld rows", o->k, iteration,
						o->fs.p.max_iter, starts, (long long) o->rows.nvalid);
}

/* scale 'standard': the rows of data standardized, their means and deviations in out */
static void
standardize(PgGpuData *data, const FitSettings *fs, KmeansOut *out)
{
	pggpu_error err = {0};
	int			d = out->src.ncols;

	if (!fs->standard)
		return;
	out->mean = palloc(sizeof(double) * d);
	out->std = palloc(sizeof(double) * d);
	if (pggpu_data_standardize_parts(data->parts, data->nparts, out->mean, out->std, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
}

/*
 * One fit of k clusters on the loaded data (standardized already where
 * scale is 'standard'; given centroids in the columns' units): results in
 * out, centroids in the columns' units (out->scaled: as compared)
 */
static void
fit_data(PgGpuData *data, const FitSettings *fs, int k, double *given, bool want_labels,
		 KmeansOut *out)
{
	pggpu_kmeans_params p = fs->p;
	pggpu_kmeans_result res = {0};
	pggpu_error err = {0};
	int			d = out->src.ncols;

	p.k = k;
	p.progress = fit_progress;
	p.progress_arg = out;
	out->k = k;
	if (given)
	{
		p.init = PGGPU_INIT_GIVEN;
		p.init_centroids = given;
		if (fs->standard)
			for (int64 i = 0; i < (int64) k * d; i++)
				given[i] = (given[i] - out->mean[i % d]) / out->std[i % d];
	}
	out->k = k;
	out->centroids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * k * d);
	out->sizes = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * k);
	res.centroids = out->centroids;
	res.sizes = out->sizes;
	if (want_labels && !out->cluster)
		res.labels = out->labels =
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * out->rows.nvalid);
	/* several parts (rows beyond the GPU's memory): the compute layer streams them */
	if (out->cluster)
		pg_gpu_cluster_fit(out->cluster, &p, &res);
	else if ((data->nparts > 1 ? pggpu_kmeans_parts(data->parts, data->nparts, &p, &res, &err) :
			  pggpu_kmeans(data->ds, &p, &res, &err)) != PGGPU_OK)
		pg_gpu_raise(&err);
	else
		log_route(data->ds);
	/* the centroids in the columns' units; the model keeps those compared too */
	out->scaled = out->centroids;
	if (fs->standard)
	{
		out->scaled = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * k * d);
		memcpy(out->scaled, out->centroids, sizeof(double) * k * d);
		for (int64 i = 0; i < (int64) k * d; i++)
			out->centroids[i] = out->scaled[i] * out->std[i % d] + out->mean[i % d];
	}
	out->inertia = res.inertia;
	out->iterations = res.iterations;
	out->converged = res.converged;
	out->changed = res.changed;
	out->groups = res.groups;
	out->trained = res.trained;
	out->device = pstrdup(out->cluster ? pg_gpu_cluster_device(out->cluster) :
						  pg_gpu_data_device(data));
	/* the nodes' memberships: each row's nearest final centroid, with its id */
	if (want_labels && out->cluster)
		pg_gpu_cluster_labels(out->cluster, out->scaled, k, &out->rows, &out->labels, NULL);
	out->seed_ms = res.seed_seconds * 1e3;
	out->iterate_ms = res.iterate_seconds * 1e3;
	/* which device ran it, every call (DEBUG2: the fallback NOTICE comes once a session; tests run on either device) */
	elog(DEBUG2, "pg_gpu: %s on %s: %lld rows, k = %d, %d iterations%s",
		 out->fname, out->device, (long long) out->rows.nvalid, k, res.iterations,
		 res.converged ? ", converged" : "");
}

/* as scikit-learn warns: a fit that max_iter cut short */
static void
notice_not_converged(const KmeansOut *out, const FitSettings *fs)
{
	if (out->converged)
		return;
	ereport(NOTICE,
			(errmsg("%s: k-means stopped at max_iter = %d without converging",
					out->fname, fs->p.max_iter),
			 errdetail("%lld of %lld rows changed cluster in the last iteration; tol = %g allows at most %.0f.",
					   (long long) out->changed, (long long) out->rows.nvalid,
					   fs->p.tol, floor(fs->p.tol * (double) out->rows.nvalid)),
			 errhint("Raise max_iter or tol; gpu_kmeans_fit's converged column says the same.")));
}

/* the model of a fit (src, settings and results of out) as jsonb; NULL: too large */
static Datum
model_datum(const KmeansOut *o, const FitSettings *fs, bool *isnull)
{
	PgGpuModel	m = {0};
	Datum		model;

	m.k = o->k;
	m.d = o->src.ncols;
	m.ncols = o->src.natts;
	m.columns = o->src.colnames;
	m.types = palloc(sizeof(char *) * m.ncols);
	for (int i = 0; i < m.ncols; i++)
		m.types[i] = format_type_be(o->src.coltypes[i]);
	m.veckind = o->src.veckind;
	m.metric = fs->metric;
	m.standard = fs->standard;
	m.mean = o->mean;
	m.std = o->std;
	m.centroids = o->centroids;
	m.scaled = o->scaled;
	m.sizes = o->sizes;
	m.inertia = o->inertia;
	m.iterations = o->iterations;
	m.converged = o->converged;
	m.rows = o->usable;
	/* (a sample of every row is no sample) */
	m.sample = o->rows.nvalid < o->usable ? o->rows.nvalid : 0;
	m.hierarchical = fs->p.algorithm == PGGPU_ALGORITHM_HIERARCHICAL;
	m.groups = o->groups;
	m.trained = o->trained;
	m.weights = o->src.wname ? o->src.wname : o->src.mweights ? "M" : NULL;
	m.relation = o->src.qualname;
	m.init = o->given ? "given" : fs->init;
	m.seed = (int64) fs->p.seed;
	m.n_init = fs->p.n_init;
	m.max_iter = fs->p.max_iter;
	m.tol = fs->p.tol;
	m.device = o->device;
	/* too large by the estimate: said before the fit */
	*isnull = !pg_gpu_model_fits(o->k, m.d, fs->standard);
	if (*isnull)
		return (Datum) 0;
	model = pg_gpu_model_to_jsonb(&m, isnull);
	if (*isnull)
		pg_gpu_model_too_large(o->fname, o->k, o->src.ncols, fs->standard, false);
	return model;
}

/*
 * A fit of the relation (argument a_sample: sample's, -1: none).  want_ids:
 * the rows' ids and clusters are wanted, in out->labels by the fit, or
 * where it fit on a sample by the caller's pg_gpu_label_rows after it.
 */
static void
run_kmeans(FunctionCallInfo fcinfo, bool want_ids, int a_sample, KmeansOut *out)
{
	double	   *given = NULL;
	PgGpuData  *data;
	TimestampTz start;
	FitSettings *fs = &out->fs;
	int			k;
	const char *skipped;
	bool		want_labels;

	pg_gpu_require_arg(fcinfo, A_RELATION, "relation");
	pg_gpu_require_arg(fcinfo, A_K, "k");
	pg_gpu_parse_settings(fcinfo, A_MAX_ITER, A_TOL, A_INIT, A_SEED, A_METRIC, A_N_INIT, A_SCALE, fs);
	fs->sample = a_sample >= 0 ? pg_gpu_sample_arg(fcinfo, a_sample) : 0;
	if (a_sample >= 0)
		pg_gpu_algorithm_arg(fcinfo, A_ALGORITHM(a_sample), fs);
	want_labels = want_ids && fs->sample == 0;
	k = PG_GETARG_INT32(A_K);
	pg_gpu_check_k(k, NULL);
	pg_gpu_check_sample(fs->sample, k);
	if (out->fname == NULL)
		out->fname = "gpu_kmeans";

	pg_gpu_resolve_sample(PG_GETARG_OID(A_RELATION),
						  PG_ARGISNULL(A_COLUMNS) ? NULL : PG_GETARG_ARRAYTYPE_P(A_COLUMNS),
						  PG_ARGISNULL(A_ID_COLUMN) ? NULL : PG_GETARG_TEXT_PP(A_ID_COLUMN),
						  out->keytype, want_ids, fs->metric == PGGPU_METRIC_COSINE, fs->sample, &out->src);
	pg_gpu_weight_arg(fcinfo, a_sample >= 0 ? A_WEIGHT_COLUMN(a_sample) : -1, fs->sample, &out->src);
	if (!PG_ARGISNULL(A_INIT_CENTROIDS))
	{
		int			rows;

		given = pg_gpu_matrix_arg(PG_GETARG_ARRAYTYPE_P(A_INIT_CENTROIDS), "init_centroids",
						   k, out->src.ncols, &rows);
		if (fs->p.n_init > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("n_init = %d needs seeded starts, not init_centroids", fs->p.n_init),
					 errhint("Leave n_init at 1 with init_centroids, or drop init_centroids to start from seeds.")));
		if (fs->p.algorithm == PGGPU_ALGORITHM_HIERARCHICAL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("algorithm 'hierarchical' does not start from init_centroids"),
					 errhint("It seeds each of its fits by init; drop init_centroids, or use algorithm => 'lloyd'.")));
		if (fs->metric == PGGPU_METRIC_COSINE)
			pg_gpu_no_zero_rows(given, k, out->src.ncols, "init_centroids");
		out->given = true;
	}

	if (out->want_model)
		pg_gpu_model_too_large(out->fname, k, out->src.ncols, fs->standard, true);
	start = GetCurrentTimestamp();
	pg_gpu_progress_begin(out->fname);
	skipped = want_ids ? "they come back with cluster NULL" : "they take no part in the fit";
	out->cluster = load_on_nodes(&out->src, fs->metric, want_labels, NULL, NULL, &out->rows, skipped,
								 fs->standard ? "scale => 'standard' is computed on the coordinator" :
								 fs->sample ? "sample => is drawn on the coordinator" : NULL);
	data = out->cluster ? NULL : fs->sample ?
		load_sample(&out->src, fs, &out->rows, skipped, k, &out->usable) :
		load(&out->src, fs, want_labels, &out->rows, skipped, k);
	if (!fs->sample)
		out->usable = out->rows.nvalid;
	out->read_ms = ms_since(start);
	out->push_ms = data ? pggpu_data_push_seconds(data->ds) * 1e3 : 0;
	if (out->rows.nvalid == 0)
		pg_gpu_no_usable_rows(&out->src, &out->rows);
	pg_gpu_check_k(k, &out->rows);
	standardize(data, fs, out);
	fit_data(data, fs, k, given, want_labels, out);
	notice_not_converged(out, fs);
	if (out->cluster)
		pg_gpu_cluster_close(out->cluster);
	else
		pg_gpu_data_close(data);
	pg_gpu_progress_end();
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
		v[0] = pg_gpu_keys_datum(o->rows.keys, o->rows.ids[r]);
		v[1] = Int32GetDatum(o->labels[r] + 1);
		if (o->distances)
			v[2] = Float8GetDatum(o->distances[r]);
	}
	else
	{
		v[0] = pg_gpu_keys_datum(o->rows.keys, o->rows.invalid_ids[r - o->rows.nvalid]);
		nulls[1] = nulls[2] = true;
	}
	return heap_form_tuple(fc->tuple_desc, v, nulls);
}

static Datum
member_srf(PG_FUNCTION_ARGS, Oid keytype, void (*run) (FunctionCallInfo, KmeansOut *))
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
		o->keytype = keytype;
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
	run_kmeans(fcinfo, true, A_KM_SAMPLE, o);
}

/* a fit on a sample: every row labelled by its centroids after it, as they come */
static void
label_all(KmeansOut *o, PgGpuLabelFn emit, void *arg)
{
	TimestampTz start = GetCurrentTimestamp();
	double		inertia;

	pg_gpu_progress_begin(o->fname);
	pg_gpu_label_rows(&o->src, o->fs.metric, o->mean, o->std, o->scaled, o->k, emit, arg, &inertia);
	pg_gpu_progress_end();
	elog(DEBUG1, "pg_gpu: %s: the %lld usable rows of \"%s\" labelled by the sample's centroids in %.1f ms (inertia %.17g)",
		 o->fname, (long long) o->usable, o->src.relname, ms_since(start), inertia);
}

/* (id, cluster) into gpu_kmeans's tuplestore */
static void
emit_tuple(void *arg, Datum key, int32 cluster, double distance)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		v[2] = {key, Int32GetDatum(cluster)};
	bool		nulls[2] = {false, cluster == 0};

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
}

static Datum
kmeans_call(FunctionCallInfo fcinfo, const Oid *keytypes)
{
	Oid			keytype = keytypes[0];

	/* on a sample: the rows go into a tuplestore as they are labelled (it spills to disk) */
	if (PG_NARGS() > A_KM_SAMPLE && !PG_ARGISNULL(A_KM_SAMPLE))
	{
		KmeansOut	o;

		InitMaterializedSRF(fcinfo, 0);
		memset(&o, 0, sizeof(o));
		o.keytype = keytype;
		run_kmeans(fcinfo, true, A_KM_SAMPLE, &o);
		label_all(&o, emit_tuple, fcinfo->resultinfo);
		return (Datum) 0;
	}
	return member_srf(fcinfo, keytype, run_kmeans_labels);
}

ENTRY_POINTS(gpu_kmeans, kmeans_call)

/* memberships => true: every row's id and cluster (0: NULL), in the order gpu_kmeans returns them */
typedef struct Members
{
	int64		n;
	int64		cap;
	PgGpuKeys	keys;
	int64	   *ids;			/* in keys */
	Datum	   *clusters;
	bool	   *nulls;
} Members;

static void
emit_member(void *arg, Datum key, int32 cluster, double distance)
{
	Members    *m = (Members *) arg;

	if (m->n == m->cap)
	{
		int64		most = (int64) (MaxAllocSize / sizeof(int64)) - 64;

		if (m->n >= most)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the rows are too many for the memberships arrays (at most %lld)",
							(long long) most),
					 errhint("Store the model (the model column) and assign by it: gpu_kmeans_apply(relation, model).")));
		m->cap = Min(Max(m->cap * 2, 1024), most);
		m->ids = m->ids ? repalloc_huge(m->ids, sizeof(int64) * m->cap) :
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * m->cap);
		m->clusters = m->clusters ? repalloc_huge(m->clusters, sizeof(Datum) * m->cap) :
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(Datum) * m->cap);
		m->nulls = m->nulls ? repalloc_huge(m->nulls, sizeof(bool) * m->cap) :
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(bool) * m->cap);
	}
	m->ids[m->n] = pg_gpu_keys_add(&m->keys, key);
	m->clusters[m->n] = Int32GetDatum(cluster);
	m->nulls[m->n++] = cluster == 0;
}

/* the memberships of o as two arrays: labelled after a fit on a sample, else the fit's */
static void
membership_arrays(KmeansOut *o, Datum *ids, Datum *clusters)
{
	Members		m = {0};
	int			dims[1];
	int			lbs[1] = {1};
	Datum	   *keys;

	pg_gpu_keys_init(&m.keys, o->src.keytype);
	if (o->fs.sample > 0)
		label_all(o, emit_member, &m);
	else
	{
		for (int64 r = 0; r < o->rows.nvalid; r++)
			emit_member(&m, pg_gpu_keys_datum(o->rows.keys, o->rows.ids[r]), o->labels[r] + 1, 0);
		for (int64 r = 0; r < o->rows.ninvalid; r++)
			emit_member(&m, pg_gpu_keys_datum(o->rows.keys, o->rows.invalid_ids[r]), 0, 0);
	}
	dims[0] = (int) m.n;
	/* (pointers into the store now that it has stopped growing) */
	keys = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(Datum) * Max(m.n, 1));
	for (int64 r = 0; r < m.n; r++)
		keys[r] = pg_gpu_keys_datum(&m.keys, m.ids[r]);
	*ids = PointerGetDatum(construct_md_array(keys, NULL, 1, dims, lbs, m.keys.type, m.keys.typlen,
											  m.keys.typbyval, m.keys.typalign));
	*clusters = PointerGetDatum(construct_md_array(m.clusters, m.nulls, 1, dims, lbs, INT4OID, 4, true,
												   TYPALIGN_INT));
}

static Datum
kmeans_fit_call(FunctionCallInfo fcinfo, const Oid *keytypes)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KmeansOut	o;
	Datum		v[9];
	bool		nulls[9] = {false, false, false, false, false, false, false, true, true};
	Datum	   *cd;
	Datum	   *sd;
	int			d;
	int			dims[2];
	int			lbs[2] = {1, 1};
	TimestampTz returning;
	bool		memberships = PG_NARGS() > A_MEMBERSHIPS && !PG_ARGISNULL(A_MEMBERSHIPS) &&
		PG_GETARG_BOOL(A_MEMBERSHIPS);

	InitMaterializedSRF(fcinfo, 0);
	memset(&o, 0, sizeof(o));
	o.fname = "gpu_kmeans_fit";
	o.keytype = keytypes[0];
	o.want_model = rsinfo->setDesc->natts > 6;
	run_kmeans(fcinfo, memberships, A_FIT_SAMPLE, &o);
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
	/* (an extension script before 1.4 declares six columns) */
	if (rsinfo->setDesc->natts > 6)
		v[6] = model_datum(&o, &o.fs, &nulls[6]);
	if (memberships)
		membership_arrays(&o, &v[7], &v[8]), nulls[7] = nulls[8] = false;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	log_stages(&o, ms_since(returning));
	return (Datum) 0;
}

ENTRY_POINTS(gpu_kmeans_fit, kmeans_fit_call)

/* an assignment's rows as they are labelled: ids (in o->labelled), labels and distances in o */
static void
emit_assigned(void *arg, Datum key, int32 cluster, double distance)
{
	KmeansOut  *o = (KmeansOut *) arg;
	PgGpuRows  *r = &o->rows;
	int64	   *n = cluster ? &r->nvalid : &r->ninvalid;
	int64	   *cap = cluster ? &o->cap_valid : &o->cap_invalid;

	if (*n == *cap)
	{
		*cap = Max(*cap * 2, 1024);
		pg_gpu_check_label_memory(&o->src, (double) (r->nvalid + r->ninvalid), "", " labelled so far");
		if (cluster)
		{
			r->ids = r->ids ? repalloc_huge(r->ids, sizeof(int64) * *cap) :
				MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * *cap);
			o->labels = o->labels ? repalloc_huge(o->labels, sizeof(int32) * *cap) :
				MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * *cap);
			o->distances = o->distances ? repalloc_huge(o->distances, sizeof(double) * *cap) :
				MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * *cap);
		}
		else
			r->invalid_ids = r->invalid_ids ? repalloc_huge(r->invalid_ids, sizeof(int64) * *cap) :
				MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * *cap);
	}
	if (cluster)
	{
		r->ids[*n] = pg_gpu_keys_add(&o->labelled, key);
		o->labels[*n] = cluster - 1;
		o->distances[*n] = distance;
	}
	else
		r->invalid_ids[*n] = pg_gpu_keys_add(&o->labelled, key);
	(*n)++;
}

/*
 * The assignment of o's resolved relation to o->k centroids (mean and std
 * given: the rows scaled by them first): ids, labels and distances into o,
 * the rows streamed a chunk at a time (pg_gpu_label_rows), or labelled on
 * a Citus cluster's nodes
 */
static void
assign_rows(KmeansOut *o, const char *fname, pggpu_metric metric, const double *mean,
			const double *std, const double *centroids)
{
	double		inertia;

	pg_gpu_progress_begin(fname);
	o->cluster = load_on_nodes(&o->src, metric, true, mean, std, &o->rows, "they come back with cluster NULL", NULL);
	if (o->cluster)
	{
		pg_gpu_cluster_labels(o->cluster, centroids, o->k, &o->rows, &o->labels, &o->distances);
		pg_gpu_cluster_close(o->cluster);
		pg_gpu_progress_end();
		return;
	}
	if (o->src.expected_rows > 0)
		pg_gpu_check_label_memory(&o->src, o->src.expected_rows, "About ", " by the table's statistics");
	memset(&o->rows, 0, sizeof(o->rows));
	pg_gpu_keys_init(&o->labelled, o->src.keytype);
	o->rows.keys = &o->labelled;
	pg_gpu_label_rows(&o->src, metric, mean, std, centroids, o->k, emit_assigned, o, &inertia);
	pg_gpu_notice_skipped(&o->src, &o->rows, "they come back with cluster NULL");
	pg_gpu_progress_end();
}

/* gpu_kmeans_assign(relation, centroids, columns, id_column, metric) */
static void
run_assign(FunctionCallInfo fcinfo, KmeansOut *o)
{
	double	   *centroids;
	pggpu_metric metric = pg_gpu_metric_arg(fcinfo, AA_METRIC, false);

	pg_gpu_require_arg(fcinfo, AA_RELATION, "relation");
	pg_gpu_require_arg(fcinfo, AA_CENTROIDS, "centroids");
	pg_gpu_resolve_sample(PG_GETARG_OID(AA_RELATION),
						  PG_ARGISNULL(AA_COLUMNS) ? NULL : PG_GETARG_ARRAYTYPE_P(AA_COLUMNS),
						  PG_ARGISNULL(AA_ID_COLUMN) ? NULL : PG_GETARG_TEXT_PP(AA_ID_COLUMN),
						  o->keytype, true, metric == PGGPU_METRIC_COSINE, -1, &o->src);
	centroids = pg_gpu_matrix_arg(PG_GETARG_ARRAYTYPE_P(AA_CENTROIDS), "centroids", -1, o->src.ncols, &o->k);
	if (o->k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("centroids must have at least one row")));
	if (metric == PGGPU_METRIC_COSINE)
		pg_gpu_no_zero_rows(centroids, o->k, o->src.ncols, "centroids");
	assign_rows(o, "gpu_kmeans_assign", metric, NULL, NULL, centroids);
}

static Datum
kmeans_assign_call(FunctionCallInfo fcinfo, const Oid *keytypes)
{
	return member_srf(fcinfo, keytypes[0], run_assign);
}

ENTRY_POINTS(gpu_kmeans_assign, kmeans_assign_call)

/*
 * gpu_kmeans_apply(relation, model, id_column): gpu_kmeans_assign by the
 * model's columns, metric and scaling.  (Not an overload of
 * gpu_kmeans_assign: a literal '{{...}}' of centroids would then match both.)
 */
static void
run_assign_model(FunctionCallInfo fcinfo, KmeansOut *o)
{
	PgGpuModel *m;

	pg_gpu_require_arg(fcinfo, AM_RELATION, "relation");
	pg_gpu_require_arg(fcinfo, AM_MODEL, "model");
	m = pg_gpu_model_from_jsonb(PG_GETARG_JSONB_P(AM_MODEL));
	pg_gpu_model_source(m, PG_GETARG_OID(AM_RELATION),
						PG_ARGISNULL(AM_ID_COLUMN) ? NULL : PG_GETARG_TEXT_PP(AM_ID_COLUMN), o->keytype, &o->src);
	o->k = m->k;
	assign_rows(o, "gpu_kmeans_apply", m->metric, m->standard ? m->mean : NULL, m->std, m->scaled);
}

static Datum
kmeans_apply_call(FunctionCallInfo fcinfo, const Oid *keytypes)
{
	return member_srf(fcinfo, keytypes[0], run_assign_model);
}

ENTRY_POINTS(gpu_kmeans_apply, kmeans_apply_call)

/*
 * gpu_kmeans_choose_k(relation, ks, columns, max_iter, tol, init, seed,
 * metric, n_init, scale, sample_size): the relation read once, a fit for
 * each k, each with its inertia, the mean silhouette of about sample_size
 * rows drawn by the seed, and its model
 */
Datum
gpu_kmeans_choose_k(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KmeansOut	o;
	FitSettings *fs = &o.fs;
	PgGpuData  *data;
	pggpu_error err = {0};
	int		   *ks;
	int			nks;
	int			max_k = 0;
	int			sample_size;
	int64	   *rows;
	double	   *X;
	int32	   *lab;
	int			m = 0;

	InitMaterializedSRF(fcinfo, 0);
	memset(&o, 0, sizeof(o));
	pg_gpu_require_arg(fcinfo, AK_RELATION, "relation");
	pg_gpu_require_arg(fcinfo, AK_KS, "ks");
	pg_gpu_require_arg(fcinfo, AK_SAMPLE_SIZE, "sample_size");
	pg_gpu_parse_settings(fcinfo, AK_MAX_ITER, AK_TOL, AK_INIT, AK_SEED, AK_METRIC, AK_N_INIT, AK_SCALE, fs);
	fs->sample = pg_gpu_sample_arg(fcinfo, AK_SAMPLE);
	o.fname = "gpu_kmeans_choose_k";
	{
		ArrayType  *a = PG_GETARG_ARRAYTYPE_P(AK_KS);
		Datum	   *e;
		bool	   *nulls;

		if (ARR_NDIM(a) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("ks must be a one-dimensional array of integers")));
		deconstruct_array(a, INT4OID, 4, true, TYPALIGN_INT, &e, &nulls, &nks);
		if (nks < 1 || nks > MAX_KS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ks must hold 1 to %d values of k, not %d", MAX_KS, nks),
					 errhint("For example ks => ARRAY[2, 3, 4, 5, 6, 8, 10], or array(SELECT generate_series(2, 12)).")));
		ks = palloc(sizeof(int) * nks);
		for (int i = 0; i < nks; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("ks must not contain NULL")));
			ks[i] = DatumGetInt32(e[i]);
			pg_gpu_check_k(ks[i], NULL);
		}
	}
	sample_size = PG_GETARG_INT32(AK_SAMPLE_SIZE);
	if (sample_size < 2 || sample_size > MAX_SAMPLE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sample_size must be between 2 and %d, not %d", MAX_SAMPLE, sample_size),
				 errhint("The silhouette takes time in the square of the rows sampled.")));

	pg_gpu_resolve_sample(PG_GETARG_OID(AK_RELATION),
						  PG_ARGISNULL(AK_COLUMNS) ? NULL : PG_GETARG_ARRAYTYPE_P(AK_COLUMNS),
						  NULL, InvalidOid, false, fs->metric == PGGPU_METRIC_COSINE, fs->sample, &o.src);
	pg_gpu_weight_arg(fcinfo, AK_WEIGHT_COLUMN, fs->sample, &o.src);
	/* before the read and the fits */
	for (int i = 0; i < nks; i++)
	{
		pg_gpu_model_too_large(o.fname, ks[i], o.src.ncols, fs->standard, true);
		max_k = Max(max_k, ks[i]);
	}
	pg_gpu_check_sample(fs->sample, max_k);
	pg_gpu_progress_begin(o.fname);
	if (fs->sample > 0)
		data = load_sample(&o.src, fs, &o.rows, "they take no part in the fits", max_k, &o.usable);
	else
		data = load(&o.src, fs, false, &o.rows, "they take no part in the fits", max_k);
	if (fs->sample == 0)
		o.usable = o.rows.nvalid;
	if (o.rows.nvalid == 0)
		pg_gpu_no_usable_rows(&o.src, &o.rows);
	for (int i = 0; i < nks; i++)
		pg_gpu_check_k(ks[i], &o.rows);
	standardize(data, fs, &o);

	/* the sample: each row with probability sample_size / n, by the seed */
	rows = palloc(sizeof(int64) * Min(o.rows.nvalid, (int64) 2 * sample_size));
	for (int64 i = 0; i < o.rows.nvalid && m < 2 * sample_size; i++)
		if (o.rows.nvalid <= sample_size ||
			pggpu_sampled(fs->p.seed, i, (double) sample_size / o.rows.nvalid))
			rows[m++] = i;
	X = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * m * o.src.ncols);
	lab = palloc(sizeof(int32) * Max(m, 1));

	for (int i = 0; i < nks; i++)
	{
		Datum		v[7];
		bool		nulls[7] = {false};
		double		sil;

		fit_data(data, fs, ks[i], NULL, true, &o);
		notice_not_converged(&o, fs);
		/* the sample's rows as compared, after the fit (get_rows uses the k-means state) */
		pg_gpu_data_get_rows(data, rows, m, X);
		for (int r = 0; r < m; r++)
			lab[r] = o.labels[rows[r]];
		pg_gpu_progress(true, "k = %d, silhouette of %d rows", ks[i], m);
		if (pggpu_silhouette(data->ds, X, lab, m, ks[i], &sil, &err) != PGGPU_OK)
			pg_gpu_raise(&err);
		v[0] = Int32GetDatum(ks[i]);
		v[1] = Float8GetDatum(o.inertia);
		v[2] = Float8GetDatum(sil);
		nulls[2] = isnan(sil);
		v[3] = Int32GetDatum(o.iterations);
		v[4] = BoolGetDatum(o.converged);
		v[5] = Int32GetDatum(m);
		v[6] = model_datum(&o, fs, &nulls[6]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		pfree(o.labels);
	}
	pg_gpu_data_close(data);
	pg_gpu_progress_end();
	return (Datum) 0;
}
