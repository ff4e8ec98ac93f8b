/*
 * citus_node.c - a Citus node's share of a distributed k-means or gpu_matmul.
 * For k-means, the functions the coordinator (citus_kmeans.c) calls over
 * libpq, on one connection, in one transaction (BEGIN ... COMMIT), in this
 * order:
 *
 *   pg_gpu_node_kmeans_load(shards, columns, ...)   read this node's shards
 *   pg_gpu_node_kmeans_sample(seed, rate)           rows for the seeding (by content)
 *   pg_gpu_node_kmeans_step(centroids, begin)       sums and counts, per iteration
 *   pg_gpu_node_kmeans_farthest(m)                  rows for emptied clusters, when any
 *   pg_gpu_node_kmeans_labels(centroids)            every row's cluster
 *   pg_gpu_node_kmeans_close()
 *
 * (The C symbols keep their first names, gpu_kmeans_node_*: the upgrade
 * scripts of 1.5 and 1.6 name them.)
 *
 * The rows stay in this backend (on its GPU, or in its memory) from load to
 * close, in a memory context under TopTransactionContext: one set a
 * backend, a new load replaces it, and the transaction's end (commit or
 * abort) frees it, its GPU memory (the data set's callback) and its pinned
 * buffers; a reset callback clears the pointer to it.  So nothing loaded
 * survives the transaction (nor DISCARD ALL, SET ROLE or SET SESSION
 * AUTHORIZATION in another one), and every function refuses rows that
 * another user id loaded (42501): GetUserId() at load and at use.  The
 * coordinator also closes its connections after every call of its own.
 *
 * PUBLIC may not execute these functions (a Citus deployment grants EXECUTE
 * to the roles that run distributed fits, on every node).  Every argument is
 * checked: they are SQL functions like any other.
 *
 * The shards are read as the connected user (the coordinator's calling
 * user), with the privileges and row security that apply to that user here.
 *
 * Centroids, sums and sample rows travel as bytea of big-endian doubles (the
 * wire form of float8, pg_gpu_doubles_to_wire): a float8[] of 100 x 768
 * costs milliseconds to send and receive element by element, more than the
 * GPU's iteration over 10^6 rows.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "pg_gpu.h"

PG_FUNCTION_INFO_V1(gpu_kmeans_node_load);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_sample);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_step);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_farthest);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_labels);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_close);
PG_FUNCTION_INFO_V1(gpu_matmul_node_load);
PG_FUNCTION_INFO_V1(gpu_matmul_node_product);

/* rows in one row of pg_gpu_node_kmeans_labels' result */
#define LABELS_CHUNK (1 << 20)

/* the most values a row (as pg_gpu reads any table) */
#define NODE_MAX_DIMS MaxHeapAttributeNumber

#define KMEANS_HINT "pg_gpu_node_kmeans_* are called by a distributed k-means on the Citus coordinator, in one transaction, starting with pg_gpu_node_kmeans_load."
#define MATMUL_HINT "pg_gpu_node_matmul_* are called by gpu_matmul on the Citus coordinator, in one transaction, starting with pg_gpu_node_matmul_load."

typedef struct NodeSet
{
	MemoryContext cxt;
	MemoryContextCallback cb;	/* clears node_set when cxt goes */
	Oid			owner;			/* the user id that loaded it */
	PgGpuData  *data;
	PgGpuRows	rows;			/* ids (when loaded with an id column), counts */
	int			d;
	int			k;				/* of the last step, 0: none yet */
	int			e;				/* the scale of the last step: rows held at 2^e */
	bool		with_ids;		/* loaded with an id column */
	bool		weighted;		/* loaded with the rows' weights (a column, or the points' M) */
} NodeSet;

static NodeSet *node_set = NULL;

static void
set_gone(void *arg)
{
	if (node_set == (NodeSet *) arg)
		node_set = NULL;
}

static void
close_set(void)
{
	NodeSet    *s = node_set;

	node_set = NULL;
	if (s)
		MemoryContextDelete(s->cxt);	/* its data set's callback frees the device's memory */
}

/* a context for loaded rows: under TopTransactionContext, gone at the transaction's end */
#define node_context(name) AllocSetContextCreate(TopTransactionContext, name, ALLOCSET_DEFAULT_SIZES)

/* loaded rows by another user id than the current one are refused */
static void
check_owner(Oid owner, const char *hint)
{
	if (owner != GetUserId())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the loaded rows belong to another role"),
				 errdetail("Rows loaded by a role are used only by that role."),
				 errhint("%s", hint)));
}

static NodeSet *
loaded_set(void)
{
	if (node_set == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no rows are loaded in this transaction"),
				 errhint(KMEANS_HINT)));
	check_owner(node_set->owner, KMEANS_HINT);
	return node_set;
}

static TupleDesc result_desc(FunctionCallInfo fcinfo);

static void
require_arg(FunctionCallInfo fcinfo, int n, const char *name, const char *hint)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name),
				 errhint("%s", hint)));
}

/* a regclass[] argument: one dimension (or empty), no NULLs */
static void
shards_arg(ArrayType *shards, Datum **oids, int *n, const char *hint)
{
	if (ARR_NDIM(shards) > 1 || ARR_HASNULL(shards) || ARR_ELEMTYPE(shards) != REGCLASSOID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shards must be a one-dimensional array of relations without NULLs"),
				 errhint("%s", hint)));
	deconstruct_array(shards, REGCLASSOID, 4, true, TYPALIGN_INT, oids, NULL, n);
}

/* a float8 array of n values (one dimension), finite (positive: positive too), as doubles */
static double *
float8_values(ArrayType *a, int64 n, const char *name, bool positive)
{
	double	   *v;

	if (ARR_ELEMTYPE(a) != FLOAT8OID || ARR_HASNULL(a) || ARR_NDIM(a) > 1 ||
		ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be %lld float8 values without NULLs", name, (long long) n),
				 errhint("Pass one value a column, as many as dims.")));
	v = (double *) ARR_DATA_PTR(a);
	for (int64 i = 0; i < n; i++)
		if (!isfinite(v[i]) || (positive && !(v[i] > 0)))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must contain only finite%s values", name, positive ? " positive" : ""),
					 errdetail("Value %lld is %g.", (long long) i + 1, v[i]),
					 errhint("%s", positive ? "A column's standard deviation scales it: it must be above 0." :
							 "A column's mean shifts it: it must be a number.")));
	return v;
}

void
pg_gpu_doubles_to_wire(const double *v, int64 n, char *out)
{
	for (int64 i = 0; i < n; i++)
	{
		uint64		u;

		memcpy(&u, &v[i], 8);
		u = pg_hton64(u);
		memcpy(out + 8 * i, &u, 8);
	}
}

void
pg_gpu_doubles_from_wire(const char *in, int64 n, double *v)
{
	for (int64 i = 0; i < n; i++)
	{
		uint64		u;

		memcpy(&u, in + 8 * i, 8);
		u = pg_ntoh64(u);
		memcpy(&v[i], &u, 8);
	}
}

/* n doubles as a bytea (a varlena: under 1 GB) */
static bytea *
doubles_bytea(const double *v, int64 n, const char *what)
{
	bytea	   *b;

	if ((double) n * 8 > (double) (MaxAllocSize - VARHDRSZ))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s of %lld doubles is over 1 GB", what, (long long) n),
				 errhint("Use fewer rows or columns.")));
	b = (bytea *) palloc(VARHDRSZ + 8 * n);
	SET_VARSIZE(b, VARHDRSZ + 8 * n);
	pg_gpu_doubles_to_wire(v, n, VARDATA(b));
	return b;
}

/* k x d centroids from their wire form (finite); k into *k */
static double *
wire_centroids(bytea *b, int d, int *k)
{
	Size		len = VARSIZE_ANY_EXHDR(b);
	int64		n = len / 8;
	double	   *C;

	if (len % 8 != 0 || n < d || n % d != 0 || n / d > INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("centroids must be k rows of %d doubles, not %zu bytes", d, len),
				 errhint("Pass k x %d big-endian doubles (8 bytes each), k at least 1.", d)));
	*k = (int) (n / d);
	C = palloc(sizeof(double) * n);
	pg_gpu_doubles_from_wire(VARDATA_ANY(b), n, C);
	for (int64 i = 0; i < n; i++)
		if (!isfinite(C[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("centroids must contain only finite values"),
					 errhint("Pass k x %d big-endian doubles, each a number.", d)));
	return C;
}

/*
 * pg_gpu_node_kmeans_load(shards regclass[], columns text[], id_column text,
 * metric text, dims int, mean float8[], std float8[], weight_column text,
 * m_weights boolean)
 * RETURNS (rows bigint, invalid bigint, device text)
 *
 * Reads the shards (in the order given) into one set, rows scaled to unit
 * length for metric cosine, then (x - mean) / std when mean is given.
 * id_column: kept for pg_gpu_node_kmeans_labels.  dims: what the coordinator
 * resolved; a shard that differs is an error.  The rows weigh weight_column
 * (NULL: none), or with m_weights their points' M.  Not STRICT: id_column,
 * mean, std and weight_column may be NULL (mean and std together), nothing
 * else.
 */
Datum
gpu_kmeans_node_load(PG_FUNCTION_ARGS)
{
	ArrayType  *shards;
	ArrayType  *columns;
	text	   *id_column;
	text	   *weight_column;
	bool		m_weights;
	char	   *metric;
	bool		cosine;
	int			d;
	double	   *mean = NULL,
			   *std = NULL;
	Datum	   *oids;
	int			nshards;
	PgGpuSource *srcs;
	NodeSet    *s;
	MemoryContext old;
	TupleDesc	td;
	Datum		v[3];
	bool		nulls[3] = {false, false, false};
	pggpu_error err = {0};

	require_arg(fcinfo, 0, "shards", KMEANS_HINT);
	require_arg(fcinfo, 1, "columns", KMEANS_HINT);
	require_arg(fcinfo, 3, "metric", KMEANS_HINT);
	require_arg(fcinfo, 4, "dims", KMEANS_HINT);
	shards = PG_GETARG_ARRAYTYPE_P(0);
	columns = PG_GETARG_ARRAYTYPE_P(1);
	id_column = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	weight_column = PG_NARGS() > 7 && !PG_ARGISNULL(7) ? PG_GETARG_TEXT_PP(7) : NULL;
	m_weights = PG_NARGS() > 8 && !PG_ARGISNULL(8) && PG_GETARG_BOOL(8);
	if (weight_column && m_weights)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a load weighs its rows by weight_column or by the points' M, not both"),
				 errhint(KMEANS_HINT)));
	metric = text_to_cstring(PG_GETARG_TEXT_PP(3));
	d = PG_GETARG_INT32(4);
	if (strcmp(metric, "euclidean") != 0 && strcmp(metric, "cosine") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown metric \"%s\"", metric),
				 errhint("metric must be 'euclidean' or 'cosine'.")));
	cosine = strcmp(metric, "cosine") == 0;
	if (d < 1 || d > NODE_MAX_DIMS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dims must be between 1 and %d, not %d", NODE_MAX_DIMS, d),
				 errhint("dims is the number of values a row of the distributed table has.")));
	if (PG_ARGISNULL(5) != PG_ARGISNULL(6))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mean and std must be both NULL or both given"),
				 errhint("Pass both to scale the rows on load, or neither.")));
	if (!PG_ARGISNULL(5))
	{
		mean = float8_values(PG_GETARG_ARRAYTYPE_P(5), d, "mean", false);
		std = float8_values(PG_GETARG_ARRAYTYPE_P(6), d, "std", true);
	}
	shards_arg(shards, &oids, &nshards, KMEANS_HINT);

	close_set();
	{
		/* the set lives in its own context, freed with it or with the transaction */
		MemoryContext cxt = node_context("pg_gpu node set");

		s = MemoryContextAllocZero(cxt, sizeof(NodeSet));
		s->cxt = cxt;
		s->cb.func = set_gone;
		s->cb.arg = s;
		MemoryContextRegisterResetCallback(cxt, &s->cb);
	}
	s->owner = GetUserId();
	s->d = d;
	s->with_ids = id_column != NULL;
	s->weighted = weight_column != NULL || m_weights;
	node_set = s;
	old = MemoryContextSwitchTo(s->cxt);
	PG_TRY();
	{
		s->data = pg_gpu_data_open(pg_gpu_choose_backend(), d, 0, 0);
		pg_gpu_data_set_kmeans(s->data, cosine ? PGGPU_METRIC_COSINE : PGGPU_METRIC_EUCLIDEAN,
							   pg_gpu_kmeans_precision == PG_GPU_PRECISION_DOUBLE);
		srcs = palloc(sizeof(PgGpuSource) * Max(nshards, 1));
		for (int i = 0; i < nshards; i++)
		{
			/* (ids of the id column's type: the coordinator checked it) */
			pg_gpu_resolve_source(DatumGetObjectId(oids[i]), columns, id_column, ANYELEMENTOID,
								  id_column != NULL, cosine, &srcs[i]);
			if (srcs[i].ncols != d)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("shard \"%s\" has %d values a row, the distributed table %d",
								srcs[i].relname, srcs[i].ncols, d),
						 errhint("The shards of a distributed table have its columns: was it altered while the call ran?")));
			/* the rows' weights: the column's, or (as the coordinator found) the points' M */
			pg_gpu_resolve_weight(&srcs[i], weight_column);
			if (m_weights && srcs[i].veckind != PG_GPU_VEC_GEOMETRY)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("shard \"%s\" has no points to weigh by their M", srcs[i].relname),
						 errhint(KMEANS_HINT)));
			srcs[i].mweights = m_weights;
		}
		if (nshards > 0)
			pg_gpu_read_sources(srcs, nshards, s->data, id_column != NULL, &s->rows);
		if (mean)
		{
			for (int i = 0; i < s->data->nparts; i++)
				if (pggpu_data_shift_scale(s->data->parts[i], mean, std, &err) != PGGPU_OK)
					pg_gpu_raise(&err);
		}
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		close_set();
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);

	td = result_desc(fcinfo);
	v[0] = Int64GetDatum(s->rows.nvalid);
	v[1] = Int64GetDatum(s->rows.ninvalid);
	v[2] = CStringGetTextDatum(pg_gpu_data_device(s->data));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, v, nulls)));
}

/* the row type of a function with OUT arguments */
static TupleDesc
result_desc(FunctionCallInfo fcinfo)
{
	TupleDesc	td;

	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("function returning record called in context that cannot accept type record"),
				 errhint("Call it in FROM.")));
	return BlessTupleDesc(td);
}

/*
 * pg_gpu_node_kmeans_sample(seed bigint, rate float8) RETURNS bytea: the
 * rows whose content key pggpu_sampled picks (pggpu_parts_sample), m x d
 * doubles (weighted rows: m x (d + 1), each row's weight after it)
 */
Datum
gpu_kmeans_node_sample(PG_FUNCTION_ARGS)
{
	NodeSet    *s = loaded_set();
	double		rate = PG_GETARG_FLOAT8(1);
	PgGpuData  *data = s->data;
	pggpu_error err = {0};
	int64		m = 0;
	double	   *X = NULL,
			   *W = NULL;
	bytea	   *out;
	int			width = s->d + (s->weighted ? 1 : 0);

	if (!(rate > 0 && rate <= 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rate must be above 0 and at most 1, not %g", rate),
				 errhint("rate is the probability that a row is in the sample.")));
	/* (the rows in the first part's scratch memory: freed with it after an error) */
	if (pggpu_parts_sample(data->parts, data->nparts, (uint64) PG_GETARG_INT64(0), rate, &X, NULL,
						   s->weighted ? &W : NULL, &m, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	if ((double) m * width * 8 > (double) (MaxAllocSize - VARHDRSZ))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the seeding sample of %lld rows is over 1 GB", (long long) m),
				 errhint("Pass a lower rate.")));
	if (s->weighted)
	{
		/* each row's weight after its values (1 where the node's weights are all 1: none came) */
		double	   *R = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * Max(m, 1) * width);

		for (int64 r = 0; r < m; r++)
		{
			memcpy(R + r * width, X + r * s->d, sizeof(double) * s->d);
			R[r * width + s->d] = W ? W[r] : 1.0;
		}
		out = doubles_bytea(R, m * width, "the seeding sample");
		pfree(R);
	}
	else
		out = doubles_bytea(X, m * s->d, "the seeding sample");
	pggpu_scratch_free(data->parts[0], X);
	pggpu_scratch_free(data->parts[0], W);
	PG_RETURN_BYTEA_P(out);
}

/*
 * The scale a step computes at: the node's rows' and the centroids' (the
 * coordinator's is another, and the same arithmetic: powers of two)
 */
static int
step_exponent(NodeSet *s, const double *C, int k)
{
	double		lo,
				hi;
	int			e;
	pggpu_error err = {0};

	if (pggpu_parts_range(s->data->parts, s->data->nparts, &lo, &hi, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	pggpu_magnitudes(C, (int64) k * s->d, &lo, &hi);
	if (pggpu_scale_exponent(lo, hi, &e, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	return e;
}

/*
 * pg_gpu_node_kmeans_step(centroids bytea, begin boolean) RETURNS (sums
 * bytea, counts bigint[], inertia float8, changed bigint, mass bytea): this
 * node's share of an iteration (pggpu_parts_step over its parts); mass,
 * weighted rows' only: the clusters' weights (k doubles)
 */
Datum
gpu_kmeans_node_step(PG_FUNCTION_ARGS)
{
	NodeSet    *s = loaded_set();
	bool		begin = PG_GETARG_BOOL(1);
	int			k;
	double	   *C = wire_centroids(PG_GETARG_BYTEA_PP(0), s->d, &k);
	double	   *sums;
	double	   *mass = NULL;
	int64	   *counts;
	Datum	   *cv;
	double		inertia;
	int64		changed;
	pggpu_error err = {0};
	TupleDesc	td;
	Datum		v[5];
	bool		nulls[5] = {false, false, false, false, true};

	if (!begin && k != s->k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a step of %d clusters after steps of %d", k, s->k),
				 errhint("The first step of a fit (or of a new k) passes begin => true.")));
	td = result_desc(fcinfo);
	sums = palloc(sizeof(double) * k * s->d);
	counts = palloc(sizeof(int64) * k);
	if (s->weighted)
		mass = palloc(sizeof(double) * k);
	cv = palloc(sizeof(Datum) * k);
	/* (the next step with begin false needs this one to have completed) */
	s->k = 0;
	s->e = step_exponent(s, C, k);
	for (int64 i = 0; i < (int64) k * s->d; i++)
		C[i] = ldexp(C[i], s->e);
	if (pggpu_parts_step(s->data->parts, s->data->nparts, C, k, s->e, begin, sums, counts, mass, &inertia,
						 &changed, NULL, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	s->k = k;
	for (int64 i = 0; i < (int64) k * s->d; i++)
		sums[i] = ldexp(sums[i], -s->e);
	inertia = ldexp(inertia, -2 * s->e);
	for (int c = 0; c < k; c++)
		cv[c] = Int64GetDatum(counts[c]);
	v[0] = PointerGetDatum(doubles_bytea(sums, (int64) k * s->d, "the sums"));
	v[1] = PointerGetDatum(construct_array(cv, k, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	v[2] = Float8GetDatum(inertia);
	v[3] = Int64GetDatum(changed);
	if (mass)
	{
		v[4] = PointerGetDatum(doubles_bytea(mass, k, "the clusters' weights"));
		nulls[4] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, v, nulls)));
}

/*
 * pg_gpu_node_kmeans_farthest(m integer) RETURNS (rows bytea, distances
 * float8[], keys bigint[]): the m rows farthest from their centroids in the
 * last step (pggpu_parts_farthest; an emptied cluster takes one), best
 * first, in the caller's units
 */
Datum
gpu_kmeans_node_farthest(PG_FUNCTION_ARGS)
{
	NodeSet    *s = loaded_set();
	int			m = PG_GETARG_INT32(0);
	double	   *rows,
			   *d2;
	uint64	   *keys;
	Datum	   *dv,
			   *kv;
	int			got;
	pggpu_error err = {0};
	TupleDesc	td;
	Datum		v[3];
	bool		nulls[3] = {false, false, false};

	if (s->k == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no k-means step has been made on the loaded rows"),
				 errhint("The farthest rows are those of the last pg_gpu_node_kmeans_step.")));
	if (m < 1 || m > s->k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("m must be in 1..%d (the clusters of the last step), not %d", s->k, m),
				 errhint("m is the number of emptied clusters.")));
	td = result_desc(fcinfo);
	rows = palloc(sizeof(double) * m * s->d);
	d2 = palloc(sizeof(double) * m);
	keys = palloc(sizeof(uint64) * m);
	if (pggpu_parts_farthest(s->data->parts, s->data->nparts, m, rows, d2, keys, &got, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	dv = palloc(sizeof(Datum) * Max(got, 1));
	kv = palloc(sizeof(Datum) * Max(got, 1));
	for (int i = 0; i < got; i++)
	{
		dv[i] = Float8GetDatum(ldexp(d2[i], -2 * s->e));
		kv[i] = Int64GetDatum((int64) keys[i]);
	}
	for (int64 i = 0; i < (int64) got * s->d; i++)
		rows[i] = ldexp(rows[i], -s->e);
	v[0] = PointerGetDatum(doubles_bytea(rows, (int64) got * s->d, "the farthest rows"));
	v[1] = PointerGetDatum(construct_array(dv, got, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	v[2] = PointerGetDatum(construct_array(kv, got, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, v, nulls)));
}

/*
 * pg_gpu_node_kmeans_labels(centroids bytea) RETURNS SETOF (ids bigint[],
 * clusters integer[], distances float8[], keys text[]): every row's nearest
 * centroid (1-based) and distance, up to LABELS_CHUNK rows a result row;
 * then the unusable rows' ids with NULL clusters and distances.  The ids
 * of a type passed by value are their Datums in ids; the others, as text
 * in keys (ids NULL), which the coordinator reads back with the type's
 * input function.
 */
Datum
gpu_kmeans_node_labels(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NodeSet    *s = loaded_set();
	int			k;
	double	   *C;
	int64		n = s->rows.nvalid,
				all = n + s->rows.ninvalid,
				off = 0;
	int32	   *labels;
	double	   *dist;
	pggpu_error err = {0};
	bool		as_text;
	FmgrInfo	out;
	MemoryContext chunk;

	if (!s->with_ids)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the rows were loaded without an id column"),
				 errhint("Load them with an id_column to label them.")));
	C = wire_centroids(PG_GETARG_BYTEA_PP(0), s->d, &k);
	as_text = !s->rows.keys->typbyval;
	if (as_text)
	{
		Oid			fn;
		bool		varlena;

		getTypeOutputInfo(s->rows.keys->type, &fn, &varlena);
		fmgr_info(fn, &out);
	}
	labels = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * Max(n, 1));
	dist = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * Max(n, 1));
	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < s->data->nparts; i++)
	{
		pggpu_data *ds = s->data->parts[i];
		bool		parked = i < s->data->nparts - 1;

		if (pggpu_assign(ds, C, k, labels + off, dist + off, &err) != PGGPU_OK ||
			(parked && pggpu_data_park(ds, &err) != PGGPU_OK))
			pg_gpu_raise(&err);
		off += pggpu_data_rows(ds);
	}
	/* a chunk's arrays (and ids as text) in a context of their own, freed after it */
	chunk = AllocSetContextCreate(CurrentMemoryContext, "pg_gpu node labels", ALLOCSET_DEFAULT_SIZES);
	for (int64 r0 = 0; r0 < all; r0 += LABELS_CHUNK)
	{
		MemoryContext old = MemoryContextSwitchTo(chunk);
		int			m = (int) Min(all - r0, LABELS_CHUNK);
		Datum	   *iv = palloc(sizeof(Datum) * m);
		Datum	   *cv = palloc(sizeof(Datum) * m);
		Datum	   *dv = palloc(sizeof(Datum) * m);
		bool	   *cn = palloc(sizeof(bool) * m);
		Datum		v[4];
		bool		nulls[4] = {as_text, false, false, !as_text};
		int			dims[1] = {m};
		int			lbs[1] = {1};

		for (int i = 0; i < m; i++)
		{
			int64		r = r0 + i;
			int64		id;

			cn[i] = r >= n;
			id = cn[i] ? s->rows.invalid_ids[r - n] : s->rows.ids[r];
			iv[i] = as_text ? CStringGetTextDatum(OutputFunctionCall(&out, pg_gpu_keys_datum(s->rows.keys, id))) :
				Int64GetDatum(id);
			cv[i] = Int32GetDatum(cn[i] ? 0 : labels[r] + 1);
			dv[i] = Float8GetDatum(cn[i] ? 0 : dist[r]);
		}
		if (as_text)
			v[3] = PointerGetDatum(construct_array(iv, m, TEXTOID, -1, false, TYPALIGN_INT));
		else
			v[0] = PointerGetDatum(construct_array(iv, m, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		v[1] = PointerGetDatum(construct_md_array(cv, cn, 1, dims, lbs, INT4OID, 4, true, TYPALIGN_INT));
		v[2] = PointerGetDatum(construct_md_array(dv, cn, 1, dims, lbs, FLOAT8OID, 8, FLOAT8PASSBYVAL,
												  TYPALIGN_DOUBLE));
		MemoryContextSwitchTo(old);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		MemoryContextReset(chunk);
	}
	MemoryContextDelete(chunk);
	return (Datum) 0;
}

/* pg_gpu_node_kmeans_close(): the set freed (its GPU memory too); nothing loaded: nothing to do */
Datum
gpu_kmeans_node_close(PG_FUNCTION_ARGS)
{
	if (node_set != NULL)
		check_owner(node_set->owner, KMEANS_HINT);
	close_set();
	PG_RETURN_VOID();
}

/* ---- a distributed gpu_matmul: this node's rows of a ------------------------ */

/*
 * The coordinator (citus_matmul.c) calls, on one connection, in one
 * transaction:
 *
 *   pg_gpu_node_matmul_load(shards, columns)   read this node's rows of a
 *   pg_gpu_node_matmul_product(b, k, n)        their rows of a b, with their ids
 *
 * The rows stay in this backend's workspace (pinned host memory, on a GPU)
 * between the two, in a memory context under TopTransactionContext: freed
 * by the product's first call (which computes the whole product into memory
 * of its own, and its own copy of the ids), by a new load, or by the
 * transaction's end.
 */
typedef struct NodeMatrix
{
	MemoryContext cxt;
	MemoryContextCallback cb;	/* clears node_matrix when cxt goes */
	Oid			owner;			/* the user id that loaded it */
	PgGpuMatmul *w;
	PgGpuDenseRows rows;
} NodeMatrix;

static NodeMatrix *node_matrix = NULL;

static void
matrix_gone(void *arg)
{
	if (node_matrix == (NodeMatrix *) arg)
		node_matrix = NULL;
}

static void
close_matrix(void)
{
	NodeMatrix *s = node_matrix;

	node_matrix = NULL;
	if (s)
		MemoryContextDelete(s->cxt);	/* the workspace's callback frees its device */
}

/*
 * pg_gpu_node_matmul_load(shards regclass[], columns text[]) RETURNS (rows
 * bigint, first_id bigint, min_id bigint, max_id bigint, len integer, device
 * text): reads the dense rows of the shards (their (id, vector) columns) in
 * the order given; first_id, min_id, max_id and len are NULL without rows
 */
Datum
gpu_matmul_node_load(PG_FUNCTION_ARGS)
{
	ArrayType  *shards = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *columns = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *oids;
	int			nshards;
	NodeMatrix *s;
	MemoryContext old;
	TupleDesc	td = result_desc(fcinfo);
	Datum		v[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	int64		lo = PG_INT64_MAX,
				hi = PG_INT64_MIN;

	shards_arg(shards, &oids, &nshards, MATMUL_HINT);
	if (ARR_NDIM(columns) != 1 || ArrayGetNItems(ARR_NDIM(columns), ARR_DIMS(columns)) != 2 ||
		ARR_HASNULL(columns))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("columns must name the row id and row vector columns of a dense matrix table"),
				 errhint("Pass ARRAY['row_id', 'row_vec'] (the names of those two columns).")));
	close_matrix();
	{
		MemoryContext cxt = node_context("pg_gpu node matrix");

		s = MemoryContextAllocZero(cxt, sizeof(NodeMatrix));
		s->cxt = cxt;
		s->cb.func = matrix_gone;
		s->cb.arg = s;
		MemoryContextRegisterResetCallback(cxt, &s->cb);
	}
	s->owner = GetUserId();
	node_matrix = s;
	old = MemoryContextSwitchTo(s->cxt);
	PG_TRY();
	{
		s->w = pg_gpu_matmul_open(pg_gpu_choose_backend(), s->cxt);
		pg_gpu_mat_rows_init(&s->rows, s->w, PGGPU_MM_A, 0);
		for (int i = 0; i < nshards; i++)
		{
			PgGpuMatTable t;

			pg_gpu_mat_resolve(DatumGetObjectId(oids[i]), columns, "columns", &t);
			if (t.sparse)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("columns must name the row id and row vector columns of a dense matrix table"),
						 errhint("Pass ARRAY['row_id', 'row_vec'] (the names of those two columns).")));
			s->rows.expected_rows = t.expected_rows;
			pg_gpu_mat_rows_read(&s->rows, &t);
		}
		if (s->rows.rows > 0)
			pg_gpu_matmul_count(s->w, PGGPU_MM_A, (Size) s->rows.rows * s->rows.len * sizeof(double));
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		close_matrix();
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);

	for (int64 r = 0; r < s->rows.rows; r++)
	{
		lo = Min(lo, s->rows.ids[r]);
		hi = Max(hi, s->rows.ids[r]);
	}
	v[0] = Int64GetDatum(s->rows.rows);
	v[1] = Int64GetDatum(s->rows.first_id);
	v[2] = Int64GetDatum(lo);
	v[3] = Int64GetDatum(hi);
	v[4] = Int32GetDatum((int32) s->rows.len);
	v[5] = CStringGetTextDatum(pggpu_matmul_device_name(s->w->all[0]));
	nulls[1] = nulls[2] = nulls[3] = nulls[4] = s->rows.rows == 0;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, v, nulls)));
}

/*
 * pg_gpu_node_matmul_product(b bytea, k integer, n integer) RETURNS SETOF
 * bytea: the loaded rows of a times b (k x n doubles, row-major, in wire
 * form), in pieces of at most PRODUCT_CHUNK values (4 MB): each its rows'
 * ids (big-endian bigints) then their rows (n doubles each, wire form).
 * Value per call, called in a SELECT list, so each piece is sent as it is
 * made (a FROM item would gather them all in a tuplestore first).
 *
 * The first call computes the whole product into a buffer of its own, with
 * its own copy of the ids, both in the call's multi_call_memory_ctx, and
 * frees the loaded rows: the later calls read nothing of the session's, so
 * a new load, another product or the transaction's state cannot change
 * what they read.
 */
#define PRODUCT_CHUNK (1 << 19)

typedef struct ProductState
{
	double	   *C;				/* rows x n, this call's */
	int64	   *ids;			/* rows, this call's */
	int64		rows;
	int64		n;
	int64		next;			/* the first row of the next piece */
} ProductState;

Datum
gpu_matmul_node_product(PG_FUNCTION_ARGS)
{
	FuncCallContext *fc;
	ProductState *ps;

	if (SRF_IS_FIRSTCALL())
	{
		bytea	   *b = PG_GETARG_BYTEA_PP(0);
		int64		k = PG_GETARG_INT32(1),
					n = PG_GETARG_INT32(2),
					m;
		Size		blen = VARSIZE_ANY_EXHDR(b);
		NodeMatrix *s = node_matrix;
		MemoryContext old;
		double	   *B;

		fc = SRF_FIRSTCALL_INIT();
		if (s == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no matrix rows are loaded in this transaction"),
					 errhint(MATMUL_HINT)));
		check_owner(s->owner, MATMUL_HINT);
		m = s->rows.rows;
		if (k < 1 || n < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("k and n must be at least 1, not %lld and %lld", (long long) k, (long long) n),
					 errhint("b is k x n doubles, k the length of the loaded rows.")));
		if ((double) k * n * 8 != (double) blen)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("b must be %lld x %lld doubles (8 bytes each), not %zu bytes",
							(long long) k, (long long) n, blen),
					 errhint("b is k x n big-endian doubles, row-major.")));
		if (m > 0 && k != s->rows.len)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("b has %lld rows, the loaded rows %lld values", (long long) k, (long long) s->rows.len),
					 errhint("b's rows must be as many as the values of a row of a.")));
		if ((double) 8 * (n + 1) > (double) (MaxAllocSize - VARHDRSZ))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a row of the product, %lld doubles, is over 1 GB with its id", (long long) n),
					 errhint("Multiply by blocks of b's columns.")));
		old = MemoryContextSwitchTo(fc->multi_call_memory_ctx);
		ps = palloc0(sizeof(ProductState));
		ps->n = n;
		ps->rows = m;
		if (m > 0)
		{
			if ((double) m * n * 8 >= (double) MaxAllocHugeSize)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the product of %lld x %lld doubles is too large", (long long) m, (long long) n),
						 errhint("Multiply by blocks of b's columns.")));
			pg_gpu_check_memory((double) m * n * 8 + (double) m * s->rows.len * 8 + (double) blen,
								"gpu_matmul", "Its matrices A, B and C take rows x columns x 8 bytes each.");
			ps->C = MemoryContextAllocHuge(fc->multi_call_memory_ctx, (Size) m * n * sizeof(double));
			ps->ids = MemoryContextAllocHuge(fc->multi_call_memory_ctx, (Size) m * sizeof(int64));
			memcpy(ps->ids, s->rows.ids, (Size) m * sizeof(int64));
			B = pg_gpu_matmul_buffer(s->w, PGGPU_MM_B, (Size) blen, 0);
			pg_gpu_doubles_from_wire(VARDATA_ANY(b), k * n, B);
			pg_gpu_matmul_run(s->w, PGGPU_FLOAT64, m, n, k, s->rows.data, B, ps->C);
		}
		MemoryContextSwitchTo(old);
		fc->user_fctx = ps;
		/* the rows are no longer needed: their workspace (and device memory) goes now */
		close_matrix();
	}
	fc = SRF_PERCALL_SETUP();
	ps = (ProductState *) fc->user_fctx;
	if (ps->next < ps->rows)
	{
		int64		rows = Min(ps->rows - ps->next, Max(1, PRODUCT_CHUNK / ps->n));
		Size		bytes = 8 * (Size) rows * (ps->n + 1);
		bytea	   *piece = palloc(VARHDRSZ + bytes);
		char	   *out = VARDATA(piece);

		SET_VARSIZE(piece, VARHDRSZ + bytes);
		for (int64 i = 0; i < rows; i++)
		{
			uint64		id = pg_hton64((uint64) ps->ids[ps->next + i]);

			memcpy(out + 8 * i, &id, 8);
		}
		pg_gpu_doubles_to_wire(ps->C + ps->next * ps->n, rows * ps->n, out + 8 * rows);
		ps->next += rows;
		SRF_RETURN_NEXT(fc, PointerGetDatum(piece));
	}
	SRF_RETURN_DONE(fc);
}
