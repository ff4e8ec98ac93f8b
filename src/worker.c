/*
 * worker.c - a Citus node's share of a distributed k-means or gpu_matmul.
 * For k-means, the functions the coordinator (kmeans_nodes.c) calls over
 * libpq, on one connection, in this order:
 *
 *   gpu_kmeans_node_load(shards, columns, ...)   read this node's shards
 *   gpu_kmeans_node_sample(seed, first, rate)    rows for the seeding
 *   gpu_kmeans_node_step(centroids, begin)       sums and counts, per iteration
 *   gpu_kmeans_node_labels(centroids)            every row's cluster
 *   gpu_kmeans_node_close()
 *
 * The rows stay in this backend (on its GPU, or in its memory) from load to
 * close, in a memory context of the session: one set a session, a new load
 * replaces it.  The coordinator closes the connection after every call of
 * its own, on success, error or cancel, so nothing outlives it: the backend
 * exits, and with it the set, its GPU memory and its pinned buffers.
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

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "pg_gpu.h"

PG_FUNCTION_INFO_V1(gpu_kmeans_node_load);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_sample);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_step);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_labels);
PG_FUNCTION_INFO_V1(gpu_kmeans_node_close);
PG_FUNCTION_INFO_V1(gpu_matmul_node_load);
PG_FUNCTION_INFO_V1(gpu_matmul_node_product);

/* rows in one row of gpu_kmeans_node_labels' result */
#define LABELS_CHUNK (1 << 20)

typedef struct NodeSet
{
	MemoryContext cxt;
	PgGpuData  *data;
	PgGpuRows	rows;			/* ids (when loaded with an id column), counts */
	int			d;
	int			k;				/* of the last step, 0: none yet */
	bool		with_ids;		/* loaded with an id column */
} NodeSet;

static NodeSet *node_set = NULL;

static void
close_set(void)
{
	NodeSet    *s = node_set;

	node_set = NULL;
	if (s)
		MemoryContextDelete(s->cxt);	/* its data set's callback frees the device's memory */
}

static NodeSet *
loaded_set(void)
{
	if (node_set == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no rows are loaded in this session"),
				 errhint("gpu_kmeans_node_* are called by a distributed k-means on the Citus coordinator, starting with gpu_kmeans_node_load.")));
	return node_set;
}

/* a float8 array of n values (any shape), as doubles */
static double *
float8_values(ArrayType *a, int64 n, const char *name)
{
	if (ARR_ELEMTYPE(a) != FLOAT8OID || ARR_HASNULL(a) ||
		ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be %lld float8 values without NULLs", name, (long long) n)));
	return (double *) ARR_DATA_PTR(a);
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

static bytea *
doubles_bytea(const double *v, int64 n)
{
	bytea	   *b = (bytea *) MemoryContextAllocHuge(CurrentMemoryContext, VARHDRSZ + 8 * n);

	SET_VARSIZE(b, VARHDRSZ + 8 * n);
	pg_gpu_doubles_to_wire(v, n, VARDATA(b));
	return b;
}

/* k x d centroids from their wire form; k into *k */
static double *
wire_centroids(bytea *b, int d, int *k)
{
	int64		n = VARSIZE_ANY_EXHDR(b) / 8;
	double	   *C;

	if (VARSIZE_ANY_EXHDR(b) % 8 != 0 || n < d || n % d != 0 || n / d > INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("centroids must be k rows of %d doubles, not %zu bytes", d, VARSIZE_ANY_EXHDR(b))));
	*k = (int) (n / d);
	C = palloc(sizeof(double) * n);
	pg_gpu_doubles_from_wire(VARDATA_ANY(b), n, C);
	return C;
}

/*
 * gpu_kmeans_node_load(shards regclass[], columns text[], id_column text,
 * metric text, dims int, mean float8[], std float8[])
 * RETURNS (rows bigint, invalid bigint, device text)
 *
 * Reads the shards (in the order given) into one set, rows scaled to unit
 * length for metric cosine, then (x - mean) / std when mean is given.
 * id_column: kept for gpu_kmeans_node_labels.  dims: what the coordinator
 * resolved; a shard that differs is an error.
 */
Datum
gpu_kmeans_node_load(PG_FUNCTION_ARGS)
{
	ArrayType  *shards = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *columns = PG_GETARG_ARRAYTYPE_P(1);
	text	   *id_column = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	bool		cosine = strcmp(text_to_cstring(PG_GETARG_TEXT_PP(3)), "cosine") == 0;
	int			d = PG_GETARG_INT32(4);
	Datum	   *oids;
	int			nshards;
	PgGpuSource *srcs;
	NodeSet    *s;
	MemoryContext old;
	TupleDesc	td;
	Datum		v[3];
	bool		nulls[3] = {false, false, false};
	pggpu_error err = {0};

	close_set();
	deconstruct_array(shards, REGCLASSOID, 4, true, TYPALIGN_INT, &oids, NULL, &nshards);
	{
		/* the set lives in its own context, freed with it */
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "pg_gpu node set", ALLOCSET_DEFAULT_SIZES);

		s = MemoryContextAllocZero(cxt, sizeof(NodeSet));
		s->cxt = cxt;
	}
	s->d = d;
	s->with_ids = id_column != NULL;
	node_set = s;
	old = MemoryContextSwitchTo(s->cxt);
	PG_TRY();
	{
		s->data = pg_gpu_data_open(pg_gpu_choose_backend(), d, 0);
		pg_gpu_data_set_kmeans(s->data, cosine ? PGGPU_METRIC_COSINE : PGGPU_METRIC_EUCLIDEAN,
							   pg_gpu_kmeans_precision == PG_GPU_PRECISION_DOUBLE);
		srcs = palloc(sizeof(PgGpuSource) * Max(nshards, 1));
		for (int i = 0; i < nshards; i++)
		{
			pg_gpu_resolve_source(DatumGetObjectId(oids[i]), columns, id_column, id_column != NULL,
								  cosine, &srcs[i]);
			if (srcs[i].ncols != d)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("shard \"%s\" has %d values a row, the distributed table %d",
								srcs[i].relname, srcs[i].ncols, d)));
		}
		if (nshards > 0)
			pg_gpu_read_sources(srcs, nshards, s->data, id_column != NULL, &s->rows);
		if (!PG_ARGISNULL(5) && !PG_ARGISNULL(6))
		{
			double	   *mean = float8_values(PG_GETARG_ARRAYTYPE_P(5), d, "mean");
			double	   *std = float8_values(PG_GETARG_ARRAYTYPE_P(6), d, "std");

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

	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	v[0] = Int64GetDatum(s->rows.nvalid);
	v[1] = Int64GetDatum(s->rows.ninvalid);
	v[2] = CStringGetTextDatum(pg_gpu_data_device(s->data));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(td), v, nulls)));
}

/*
 * gpu_kmeans_node_sample(seed bigint, first bigint, rate float8) RETURNS
 * bytea: the rows pggpu_sampled picks (by their index in the cluster's
 * union, this node's first row being "first"), m x d doubles
 */
Datum
gpu_kmeans_node_sample(PG_FUNCTION_ARGS)
{
	NodeSet    *s = loaded_set();
	PgGpuData  *data = s->data;
	PgGpuData  *into = pg_gpu_data_open(PGGPU_BACKEND_CPU, s->d, 0);
	pggpu_error err = {0};
	int64		m;
	int64	   *idx;
	double	   *X;

	if (pggpu_parts_sample(data->parts, data->nparts, PG_GETARG_INT64(1), (uint64) PG_GETARG_INT64(0),
						   PG_GETARG_FLOAT8(2), into->ds, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	m = pggpu_data_rows(into->ds);
	if ((double) m * s->d * 8 > MaxAllocHugeSize / 2 || m > INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the seeding sample of %lld rows is too large", (long long) m)));
	idx = palloc(sizeof(int64) * Max(m, 1));
	X = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * Max(m, 1) * s->d);
	for (int64 i = 0; i < m; i++)
		idx[i] = i;
	if (m > 0 && pggpu_data_get_rows(into->ds, idx, (int) m, X, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	pg_gpu_data_close(into);
	PG_RETURN_BYTEA_P(doubles_bytea(X, m * s->d));
}

/*
 * gpu_kmeans_node_step(centroids bytea, begin boolean) RETURNS (sums
 * bytea, counts bigint[], inertia float8, changed bigint): this node's
 * share of an iteration (pggpu_parts_step over its parts)
 */
Datum
gpu_kmeans_node_step(PG_FUNCTION_ARGS)
{
	NodeSet    *s = loaded_set();
	bool		begin = PG_GETARG_BOOL(1);
	int			k;
	double	   *C = wire_centroids(PG_GETARG_BYTEA_PP(0), s->d, &k);
	double	   *sums = palloc(sizeof(double) * k * s->d);
	int64	   *counts = palloc(sizeof(int64) * k);
	Datum	   *cv = palloc(sizeof(Datum) * k);
	double		inertia;
	int64		changed;
	pggpu_error err = {0};
	TupleDesc	td;
	Datum		v[4];
	bool		nulls[4] = {false, false, false, false};

	if (!begin && k != s->k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a step of %d clusters after steps of %d", k, s->k)));
	if (pggpu_parts_step(s->data->parts, s->data->nparts, C, k, begin, sums, counts, &inertia,
						 &changed, NULL, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	s->k = k;
	for (int c = 0; c < k; c++)
		cv[c] = Int64GetDatum(counts[c]);
	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	v[0] = PointerGetDatum(doubles_bytea(sums, (int64) k * s->d));
	v[1] = PointerGetDatum(construct_array(cv, k, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	v[2] = Float8GetDatum(inertia);
	v[3] = Int64GetDatum(changed);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(td), v, nulls)));
}

/*
 * gpu_kmeans_node_labels(centroids bytea) RETURNS SETOF (ids bigint[],
 * clusters integer[], distances float8[]): every row's nearest centroid
 * (1-based) and distance, up to LABELS_CHUNK rows a result row; then the
 * unusable rows' ids with NULL clusters and distances
 */
Datum
gpu_kmeans_node_labels(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NodeSet    *s = loaded_set();
	int			k;
	double	   *C = wire_centroids(PG_GETARG_BYTEA_PP(0), s->d, &k);
	int64		n = s->rows.nvalid,
				all = n + s->rows.ninvalid,
				off = 0;
	int32	   *labels = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * Max(n, 1));
	double	   *dist = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * Max(n, 1));
	pggpu_error err = {0};

	if (!s->with_ids)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the rows were loaded without an id column")));
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
	for (int64 r0 = 0; r0 < all; r0 += LABELS_CHUNK)
	{
		int			m = (int) Min(all - r0, LABELS_CHUNK);
		Datum	   *iv = palloc(sizeof(Datum) * m);
		Datum	   *cv = palloc(sizeof(Datum) * m);
		Datum	   *dv = palloc(sizeof(Datum) * m);
		bool	   *cn = palloc(sizeof(bool) * m);
		Datum		v[3];
		bool		nulls[3] = {false, false, false};
		int			dims[1] = {m};
		int			lbs[1] = {1};

		for (int i = 0; i < m; i++)
		{
			int64		r = r0 + i;

			cn[i] = r >= n;
			iv[i] = Int64GetDatum(cn[i] ? s->rows.invalid_ids[r - n] : s->rows.ids[r]);
			cv[i] = Int32GetDatum(cn[i] ? 0 : labels[r] + 1);
			dv[i] = Float8GetDatum(cn[i] ? 0 : dist[r]);
		}
		v[0] = PointerGetDatum(construct_array(iv, m, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		v[1] = PointerGetDatum(construct_md_array(cv, cn, 1, dims, lbs, INT4OID, 4, true, TYPALIGN_INT));
		v[2] = PointerGetDatum(construct_md_array(dv, cn, 1, dims, lbs, FLOAT8OID, 8, FLOAT8PASSBYVAL,
												  TYPALIGN_DOUBLE));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		pfree(iv), pfree(cv), pfree(dv), pfree(cn);
	}
	return (Datum) 0;
}

/* gpu_kmeans_node_close(): the set freed (its GPU memory too) */
Datum
gpu_kmeans_node_close(PG_FUNCTION_ARGS)
{
	close_set();
	PG_RETURN_VOID();
}

/* ---- a distributed gpu_matmul: this node's rows of a ------------------------ */

/*
 * The coordinator (matmul_nodes.c) calls, on one connection:
 *
 *   gpu_matmul_node_load(shards, columns)   read this node's rows of a
 *   gpu_matmul_node_product(b, k, n)        their rows of a b, with their ids
 *
 * The rows stay in this backend's workspace (pinned host memory, on a GPU)
 * between the two, in a memory context of the session: freed by the
 * product, by a new load, or by the backend's exit when the coordinator
 * closes the connection.
 */
typedef struct NodeMatrix
{
	MemoryContext cxt;
	PgGpuMatmul *w;
	PgGpuDenseRows rows;
} NodeMatrix;

static NodeMatrix *node_matrix = NULL;

static void
close_matrix(void)
{
	NodeMatrix *s = node_matrix;

	node_matrix = NULL;
	if (s)
		MemoryContextDelete(s->cxt);	/* the workspace's callback frees its device */
}

/*
 * gpu_matmul_node_load(shards regclass[], columns text[]) RETURNS (rows
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
	TupleDesc	td;
	Datum		v[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	int64		lo = PG_INT64_MAX,
				hi = PG_INT64_MIN;

	close_matrix();
	deconstruct_array(shards, REGCLASSOID, 4, true, TYPALIGN_INT, &oids, NULL, &nshards);
	{
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "pg_gpu node matrix", ALLOCSET_DEFAULT_SIZES);

		s = MemoryContextAllocZero(cxt, sizeof(NodeMatrix));
		s->cxt = cxt;
	}
	node_matrix = s;
	old = MemoryContextSwitchTo(s->cxt);
	PG_TRY();
	{
		s->w = pg_gpu_matmul_open(pg_gpu_choose_backend(), s->cxt);
		pg_gpu_mat_rows_init(&s->rows, s->w, PGGPU_MM_A, 0);
		for (int i = 0; i < nshards; i++)
		{
			PgGpuMatTable t;

			pg_gpu_mat_resolve(DatumGetObjectId(oids[i]), columns, "a", &t);
			if (t.sparse)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("columns must name the row id and row vector columns of a dense matrix table")));
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
	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	v[0] = Int64GetDatum(s->rows.rows);
	v[1] = Int64GetDatum(s->rows.first_id);
	v[2] = Int64GetDatum(lo);
	v[3] = Int64GetDatum(hi);
	v[4] = Int32GetDatum((int32) s->rows.len);
	v[5] = CStringGetTextDatum(pggpu_matmul_device_name(s->w->all[0]));
	nulls[1] = nulls[2] = nulls[3] = nulls[4] = s->rows.rows == 0;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(td), v, nulls)));
}

/*
 * gpu_matmul_node_product(b bytea, k integer, n integer) RETURNS SETOF bytea:
 * the loaded rows of a times b (k x n doubles, row-major, in wire form), in
 * pieces of at most PRODUCT_CHUNK values (4 MB): each its rows' ids
 * (big-endian bigints) then their rows (n doubles each, wire form).  Value
 * per call, called in a SELECT list, so each piece is sent as it is made
 * (a FROM item would gather them all in a tuplestore first).  After the
 * last, the loaded rows are freed.
 */
#define PRODUCT_CHUNK (1 << 19)

typedef struct ProductState
{
	double	   *C;				/* rows x n */
	int64		n;
	int64		next;			/* the first row of the next piece */
} ProductState;

Datum
gpu_matmul_node_product(PG_FUNCTION_ARGS)
{
	FuncCallContext *fc;
	ProductState *ps;
	NodeMatrix *s = node_matrix;

	if (SRF_IS_FIRSTCALL())
	{
		bytea	   *b = PG_GETARG_BYTEA_PP(0);
		int64		k = PG_GETARG_INT32(1),
					n = PG_GETARG_INT32(2),
					m;
		double	   *B;

		fc = SRF_FIRSTCALL_INIT();
		if (s == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no matrix rows are loaded in this session"),
					 errhint("gpu_matmul_node_* are called by gpu_matmul on the Citus coordinator, starting with gpu_matmul_node_load.")));
		m = s->rows.rows;
		if (k < 1 || n < 1 || (m > 0 && k != s->rows.len) || VARSIZE_ANY_EXHDR(b) != 8 * k * n)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("b must be %lld x n doubles (8 bytes each), not %zu bytes for %lld x %lld",
							(long long) s->rows.len, (size_t) VARSIZE_ANY_EXHDR(b), (long long) k, (long long) n)));
		ps = MemoryContextAllocZero(fc->multi_call_memory_ctx, sizeof(ProductState));
		ps->n = n;
		if (m > 0)
		{
			B = pg_gpu_matmul_buffer(s->w, PGGPU_MM_B, (Size) k * n * sizeof(double), 0);
			pg_gpu_doubles_from_wire(VARDATA_ANY(b), k * n, B);
			ps->C = pg_gpu_matmul_buffer(s->w, PGGPU_MM_C, (Size) m * n * sizeof(double), 0);
			pg_gpu_matmul_run(s->w, PGGPU_FLOAT64, m, n, k, s->rows.data, B, ps->C);
		}
		fc->user_fctx = ps;
	}
	fc = SRF_PERCALL_SETUP();
	ps = (ProductState *) fc->user_fctx;
	if (s != NULL && ps->next < s->rows.rows)
	{
		int64		rows = Min(s->rows.rows - ps->next, Max(1, PRODUCT_CHUNK / ps->n));
		Size		bytes = 8 * (Size) rows * (ps->n + 1);
		bytea	   *piece = palloc(VARHDRSZ + bytes);
		char	   *out = VARDATA(piece);

		SET_VARSIZE(piece, VARHDRSZ + bytes);
		for (int64 i = 0; i < rows; i++)
		{
			uint64		id = pg_hton64((uint64) s->rows.ids[ps->next + i]);

			memcpy(out + 8 * i, &id, 8);
		}
		pg_gpu_doubles_to_wire(ps->C + ps->next * ps->n, rows * ps->n, out + 8 * rows);
		ps->next += rows;
		SRF_RETURN_NEXT(fc, PointerGetDatum(piece));
	}
	close_matrix();
	SRF_RETURN_DONE(fc);
}
