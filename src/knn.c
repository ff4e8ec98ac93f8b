/*
 * knn.c - gpu_knn(queries, base, k, ...): for every usable row of queries,
 * its k nearest usable rows of base, exactly, ties to the lower base id.
 *
 * The queries are read whole (as doubles, row-major: the compute layer
 * holds them on the device); the base streams past a tile of rows at a
 * time, never held: each tile's rows sorted by id, the compute layer's k
 * nearest of the tile for every query (pggpu_knn_tile: the plain loop, the
 * same arithmetic on the CPU and the GPU) merged into each query's k so
 * far by (distance, id).  The results go into a tuplestore.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "catalog/pg_collation.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "pg_gpu.h"

PG_FUNCTION_INFO_V1(gpu_knn);
PG_FUNCTION_INFO_V1(gpu_knn_keyed);

/* the keyed overload's query_id_type and base_id_type (keys.c), after k */
#define AN_ID_TYPES 3

enum
{
	AN_QUERIES, AN_BASE, AN_K, AN_COLUMNS, AN_BASE_COLUMNS, AN_METRIC, AN_QUERY_ID_COLUMN,
	AN_BASE_ID_COLUMN
};

/* the most k, and a tile's bytes of rows */
#define KNN_MAX_K 100000
#define TILE_BYTES ((int64) 64 << 20)
/*
 * values beyond this magnitude: a squared distance or product could
 * overflow a double (d x (2 x 2^500)^2 < 2^1016 for d < 2^14)
 */
#define KNN_MAX_ABS 0x1p500

/* rows as the read hands them over: row-major doubles and their ids */
typedef struct RowBuf
{
	const PgGpuSource *src;
	int			d;
	double	   *x;
	int64	   *ids;			/* in keys */
	PgGpuKeys	keys;
	double		row_bytes;		/* what a row held costs (0: none is held: a tile) */
	int64		n;
	int64		cap;
	int64		skipped;		/* unusable rows */
} RowBuf;

typedef struct KnnState
{
	pggpu_knn  *kn;
	MemoryContextCallback cb;
	int			k;
	pggpu_metric metric;
	int64		nq;
	RowBuf		tile;			/* the base's rows of the tile being filled */
	int64		tile_rows;
	double	   *sorted;			/* the tile's rows in id order */
	int64	   *sorted_ids;
	int64		sorted_cap;
	int64	   *tidx;			/* a tile's nearest (nq x k), rows of the sorted tile */
	double	   *tdist;
	double	   *best;			/* every query's k so far (nq x k), by (distance, id) */
	int64	   *best_ids;		/* in bkeys */
	int		   *best_n;			/* how many each has so far */
	PgGpuKeys	bkeys;			/* the base ids that entered a query's k */
	Size		bkeys_live;		/* its bytes live at its last compaction (compact_ids) */
	bool		int_ids;		/* the base ids are integers: compared as int64 */
	FmgrInfo   *cmp;			/* else by their type's btree comparison */
	Oid			coll;
	double	   *mdist;			/* a merge's scratch (k) */
	int64	   *mids;
	int64		base_rows;		/* base rows compared so far */
	/* where the time went (DEBUG2): ordering tiles by id, comparing, merging */
	instr_time	ordering;
	instr_time	comparing;
	instr_time	merging;
} KnnState;

static void
knn_gone(void *arg)
{
	KnnState   *st = (KnnState *) arg;

	pggpu_knn_close(st->kn);
	st->kn = NULL;
}

/* ERROR: a value too large for the plain loop's squares (22003) */
static void
check_magnitude(const RowBuf *rb, const double *row)
{
	for (int j = 0; j < rb->d; j++)
		if (fabs(row[j]) > KNN_MAX_ABS)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("a value of \"%s\" is too large for gpu_knn: %g", rb->src->relname, row[j]),
					 errhint("Values up to about 1e150 in magnitude are compared exactly; scale the rows down.")));
}

/* a part's usable rows into rb (the columns turned into rows) */
static void
rows_take(RowBuf *rb, const PgGpuPart *p)
{
	int			d = rb->d;

	if (rb->n + p->nrows > rb->cap)
	{
		int64		cap = Max(rb->cap * 2, rb->n + p->nrows);

		/* the queries, as they grow: pg_gpu.max_memory before the room is taken */
		if (rb->row_bytes > 0)
			pg_gpu_check_memory((double) cap * rb->row_bytes, rb->src->relname,
								"%lld queries read so far, %.0f bytes each.", (long long) rb->n,
								rb->row_bytes);
		rb->x = rb->x ? repalloc_huge(rb->x, sizeof(double) * cap * d) :
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * cap * d);
		rb->ids = rb->ids ? repalloc_huge(rb->ids, sizeof(int64) * cap) :
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * cap);
		rb->cap = cap;
	}
	for (int64 i = 0; i < p->nrows; i++)
	{
		double	   *row = rb->x + (rb->n + i) * d;

		for (int j = 0; j < d; j++)
			row[j] = p->rowwise ? p->values[i * d + j] : p->values[(int64) j * p->cap + i];
		check_magnitude(rb, row);
	}
	pg_gpu_keys_take(&rb->keys, p, p->ids, p->nrows, rb->ids + rb->n);
	rb->n += p->nrows;
	rb->skipped += p->nbad;
}

static void
queries_consume(void *arg, const PgGpuPart *p)
{
	CHECK_FOR_INTERRUPTS();
	rows_take((RowBuf *) arg, p);
}

/* base ids a and b (Datums of the result's type) compared */
static int
id_cmp(const KnnState *st, Datum a, Datum b)
{
	if (st->int_ids)
		return (int64) a < (int64) b ? -1 : (int64) a > (int64) b;
	return DatumGetInt32(FunctionCall2Coll(st->cmp, st->coll, a, b));
}

/* the tile's rows by id: ties in a tile go to the lower id, as across tiles */
static const KnnState *sort_state;

static int
by_id(const void *a, const void *b)
{
	const RowBuf *t = &sort_state->tile;
	int64		i = *(const int64 *) a,
				j = *(const int64 *) b;
	int			c = id_cmp(sort_state, pg_gpu_keys_datum(&t->keys, t->ids[i]),
						   pg_gpu_keys_datum(&t->keys, t->ids[j]));

	return c != 0 ? c : (i > j) - (i < j);
}

/*
 * The base ids kept (passed by reference) copied into a new store once the
 * store holds twice what was live at the last copy: ids pushed out of a
 * query's k leave their bytes behind, as many as the tiles bring (on a
 * base in an order that keeps bringing nearer rows, every tile)
 */
static void
compact_ids(KnnState *st)
{
	PgGpuKeys	fresh;

	if (st->bkeys.typbyval || st->bkeys.used <= 2 * st->bkeys_live)
		return;
	pg_gpu_keys_init(&fresh, st->bkeys.type);
	for (int64 q = 0; q < st->nq; q++)
		for (int r = 0; r < st->best_n[q]; r++)
		{
			int64	   *id = &st->best_ids[q * st->k + r];

			*id = pg_gpu_keys_add(&fresh, pg_gpu_keys_datum(&st->bkeys, *id));
		}
	elog(DEBUG2, "pg_gpu: gpu_knn's base ids compacted: %zu bytes of %zu live", fresh.used, st->bkeys.used);
	if (st->bkeys.bytes)
		pfree(st->bkeys.bytes);
	st->bkeys = fresh;
	st->bkeys_live = Max(fresh.used, (Size) 1 << 20);
}

/* the tile filled so far compared with every query and merged into best */
static void
tile_run(KnnState *st)
{
	RowBuf	   *t = &st->tile;
	int			d = t->d,
				k = st->k;
	int64	   *order;
	pggpu_error err = {0};
	instr_time	t0,
				t1,
				t2,
				t3;

	if (t->n == 0)
		return;
	INSTR_TIME_SET_CURRENT(t0);
	/* (a tile is its rows and the rest of the part that filled it) */
	if (t->n > st->sorted_cap)
	{
		if (st->sorted)
			pfree(st->sorted), pfree(st->sorted_ids);
		st->sorted_cap = t->cap;
		st->sorted = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * st->sorted_cap * d);
		st->sorted_ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * st->sorted_cap);
	}
	order = palloc(sizeof(int64) * t->n);
	for (int64 i = 0; i < t->n; i++)
		order[i] = i;
	sort_state = st;
	qsort(order, t->n, sizeof(int64), by_id);
	for (int64 i = 0; i < t->n; i++)
	{
		memcpy(st->sorted + i * d, t->x + order[i] * d, sizeof(double) * d);
		st->sorted_ids[i] = t->ids[order[i]];
	}
	pfree(order);
	INSTR_TIME_SET_CURRENT(t1);
	if (pggpu_knn_tile(st->kn, st->sorted, t->n, st->tidx, st->tdist, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	INSTR_TIME_SET_CURRENT(t2);
	for (int64 q = 0; q < st->nq; q++)
	{
		double	   *bd = st->best + q * k,
				   *td = st->tdist + q * k;
		int64	   *bi = st->best_ids + q * k,
				   *ti = st->tidx + q * k;
		int			a = 0,
					b = 0,
					r = 0;

		/* two lists by (distance, id) merged: the k least (a tile's ids kept in bkeys) */
		for (; r < k; r++)
		{
			bool		ha = a < st->best_n[q],
						hb = b < k && ti[b] >= 0;
			Datum		tkey = hb ? pg_gpu_keys_datum(&t->keys, st->sorted_ids[ti[b]]) : (Datum) 0;

			if (!ha && !hb)
				break;
			if (ha && (!hb || bd[a] < td[b] ||
					   (bd[a] == td[b] && id_cmp(st, pg_gpu_keys_datum(&st->bkeys, bi[a]), tkey) <= 0)))
			{
				st->mdist[r] = bd[a];
				st->mids[r] = bi[a++];
			}
			else
			{
				st->mdist[r] = td[b++];
				st->mids[r] = pg_gpu_keys_add(&st->bkeys, tkey);
			}
		}
		memcpy(bd, st->mdist, sizeof(double) * r);
		memcpy(bi, st->mids, sizeof(int64) * r);
		st->best_n[q] = r;
	}
	INSTR_TIME_SET_CURRENT(t3);
	INSTR_TIME_ACCUM_DIFF(st->ordering, t1, t0);
	INSTR_TIME_ACCUM_DIFF(st->comparing, t2, t1);
	INSTR_TIME_ACCUM_DIFF(st->merging, t3, t2);
	st->base_rows += t->n;
	t->n = 0;
	t->keys.used = 0;			/* (a tile's ids: those kept are in bkeys) */
	compact_ids(st);
	pg_gpu_progress(false, "%lld rows of the base compared with %lld queries", (long long) st->base_rows,
					(long long) st->nq);
}

static void
base_consume(void *arg, const PgGpuPart *p)
{
	KnnState   *st = (KnnState *) arg;

	CHECK_FOR_INTERRUPTS();
	rows_take(&st->tile, p);
	if (st->tile.n >= st->tile_rows)
		tile_run(st);
}

static Datum
knn_call(FunctionCallInfo fcinfo, const Oid *keytypes)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PgGpuSource qsrc,
				bsrc;
	RowBuf		qrows = {0};
	KnnState   *st = palloc0(sizeof(KnnState));
	pggpu_metric metric;
	ArrayType  *columns,
			   *base_columns;
	int			k,
				d;
	int			gpus[PGGPU_MAX_THREADS];
	pggpu_backend backend;
	pggpu_error err = {0};
	instr_time	start,
				read_q,
				read_b,
				done;

	pg_gpu_require_arg(fcinfo, AN_QUERIES, "queries");
	pg_gpu_require_arg(fcinfo, AN_BASE, "base");
	pg_gpu_require_arg(fcinfo, AN_K, "k");
	k = PG_GETARG_INT32(AN_K);
	if (k < 1 || k > KNN_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d, not %d", KNN_MAX_K, k)));
	metric = pg_gpu_metric_arg(fcinfo, AN_METRIC, true);
	columns = PG_ARGISNULL(AN_COLUMNS) ? NULL : PG_GETARG_ARRAYTYPE_P(AN_COLUMNS);
	base_columns = PG_ARGISNULL(AN_BASE_COLUMNS) ? columns : PG_GETARG_ARRAYTYPE_P(AN_BASE_COLUMNS);
	InitMaterializedSRF(fcinfo, 0);
	pg_gpu_progress_begin("gpu_knn");

	pg_gpu_resolve_source(PG_GETARG_OID(AN_QUERIES), columns,
						  PG_ARGISNULL(AN_QUERY_ID_COLUMN) ? NULL : PG_GETARG_TEXT_PP(AN_QUERY_ID_COLUMN),
						  keytypes[0], true, metric == PGGPU_METRIC_COSINE, &qsrc);
	pg_gpu_resolve_source(PG_GETARG_OID(AN_BASE), base_columns,
						  PG_ARGISNULL(AN_BASE_ID_COLUMN) ? NULL : PG_GETARG_TEXT_PP(AN_BASE_ID_COLUMN),
						  keytypes[1], true, metric == PGGPU_METRIC_COSINE, &bsrc);
	/* ties go to the lower base id: integers compared as such, else by the type's ordering */
	st->int_ids = pg_gpu_is_integer_type(bsrc.keytype);
	if (!st->int_ids)
	{
		TypeCacheEntry *tc = lookup_type_cache(bsrc.keytype, TYPECACHE_CMP_PROC_FINFO);

		if (!OidIsValid(tc->cmp_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("base ids of type %s cannot be ordered", format_type_be(bsrc.keytype)),
					 errhint("Ties go to the lower base_id: identify the base's rows by a column whose type has a btree ordering.")));
		st->cmp = &tc->cmp_proc_finfo;
		st->coll = OidIsValid(bsrc.idcoll) ? bsrc.idcoll : DEFAULT_COLLATION_OID;
	}
	d = qsrc.ncols;
	if (bsrc.ncols != d)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("the queries have %d values a row, the base %d", d, bsrc.ncols),
				 errhint("Compare rows of one length: columns => (and base_columns =>) name as many on each side.")));

	/* the queries, whole */
	pg_gpu_progress(true, "reading the queries");
	qrows.src = &qsrc;
	qrows.d = d;
	qrows.row_bytes = 8.0 * d + pg_gpu_key_bytes(&qsrc) + 16.0 * k;
	pg_gpu_keys_init(&qrows.keys, qsrc.keytype);
	INSTR_TIME_SET_CURRENT(start);
	pg_gpu_read_parts(&qsrc, true, NULL, PGGPU_FLOAT64, queries_consume, &qrows);
	INSTR_TIME_SET_CURRENT(read_q);
	if (qrows.skipped > 0)
		ereport(NOTICE,
				(errmsg("%lld of %lld rows of \"%s\" have NULL, NaN or infinite values%s; they have no neighbours",
						(long long) qrows.skipped, (long long) (qrows.skipped + qrows.n), qsrc.relname,
						metric == PGGPU_METRIC_COSINE ? ", or are zero" : "")));
	st->k = k;
	st->metric = metric;
	st->nq = qrows.n;
	if (st->nq == 0)
	{
		pg_gpu_progress_end();
		return (Datum) 0;
	}
	st->tile_rows = Max(1024, Min(65536, TILE_BYTES / ((int64) 8 * d)));
	/* queries, two tiles of rows, a tile's nearest and every query's k so far */
	pg_gpu_check_memory((double) st->nq * d * 8 + 2.0 * st->tile_rows * (d * 8 + 8) + 32.0 * st->nq * k,
						qsrc.relname, "%lld queries of %d values, %d nearest each, and tiles of %lld rows of the base.",
						(long long) st->nq, d, k, (long long) st->tile_rows);
	backend = pg_gpu_choose_backend();
	pg_gpu_shares(backend, gpus);
	if (pggpu_knn_open(&st->kn, backend, backend == PGGPU_BACKEND_GPU ? gpus[0] : -1, d, metric, qrows.x,
					   st->nq, k, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	st->cb.func = knn_gone;
	st->cb.arg = st;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &st->cb);
	pggpu_knn_set_interrupts(st->kn, pg_gpu_check_interrupts, NULL);
	st->tile.src = &bsrc;
	st->tile.d = d;
	pg_gpu_keys_init(&st->tile.keys, bsrc.keytype);
	pg_gpu_keys_init(&st->bkeys, bsrc.keytype);
	st->bkeys_live = (Size) 1 << 20;
	st->tidx = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * st->nq * k);
	st->tdist = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * st->nq * k);
	st->best = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * st->nq * k);
	st->best_ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * st->nq * k);
	st->mdist = palloc(sizeof(double) * k);
	st->mids = palloc(sizeof(int64) * k);
	st->best_n = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int) * st->nq);
	memset(st->best_n, 0, sizeof(int) * st->nq);

	/* the base, a tile at a time (the tile's room grows to a tile and a part) */
	pg_gpu_progress(true, "comparing the base with %lld queries on %s", (long long) st->nq,
					pggpu_knn_device_name(st->kn));
	INSTR_TIME_SET_CURRENT(read_b);
	pg_gpu_read_parts(&bsrc, true, NULL, PGGPU_FLOAT64, base_consume, st);
	tile_run(st);
	INSTR_TIME_SET_CURRENT(done);
	INSTR_TIME_SUBTRACT(done, read_b);
	INSTR_TIME_SUBTRACT(read_q, start);
	elog(DEBUG2, "pg_gpu: gpu_knn of %lld queries against %lld rows on %s (ms): the queries read %.1f, the base "
		 "read and compared %.1f, of which ordering its tiles by id %.1f, comparing %.1f, merging %.1f",
		 (long long) st->nq, (long long) st->base_rows, pggpu_knn_device_name(st->kn),
		 INSTR_TIME_GET_MILLISEC(read_q), INSTR_TIME_GET_MILLISEC(done), INSTR_TIME_GET_MILLISEC(st->ordering),
		 INSTR_TIME_GET_MILLISEC(st->comparing), INSTR_TIME_GET_MILLISEC(st->merging));
	if (st->tile.skipped > 0)
		ereport(NOTICE,
				(errmsg("%lld of %lld rows of \"%s\" have NULL, NaN or infinite values%s; they are no one's neighbours",
						(long long) st->tile.skipped, (long long) (st->tile.skipped + st->base_rows),
						bsrc.relname, metric == PGGPU_METRIC_COSINE ? ", or are zero" : "")));

	/* the results, query by query in read order, nearest first */
	for (int64 q = 0; q < st->nq; q++)
	{
		if ((q & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		for (int r = 0; r < st->best_n[q]; r++)
		{
			double		s = st->best[q * k + r];
			Datum		v[4];
			bool		nulls[4] = {false, false, false, false};

			v[0] = pg_gpu_keys_datum(&qrows.keys, qrows.ids[q]);
			v[1] = Int32GetDatum(r + 1);
			v[2] = pg_gpu_keys_datum(&st->bkeys, st->best_ids[q * k + r]);
			/* Euclidean: the distance; cosine: 1 - cos = |x - y|^2 / 2 on unit rows; inner: -x.y */
			v[3] = Float8GetDatum(metric == PGGPU_METRIC_EUCLIDEAN ? sqrt(s) :
								  metric == PGGPU_METRIC_COSINE ? s / 2 : s);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		}
	}
	pggpu_knn_close(st->kn);
	st->kn = NULL;
	pg_gpu_progress_end();
	return (Datum) 0;
}

Datum
gpu_knn(PG_FUNCTION_ARGS)
{
	static const Oid none[2];

	return knn_call(fcinfo, none);
}

Datum
gpu_knn_keyed(PG_FUNCTION_ARGS)
{
	return pg_gpu_call_keyed(fcinfo, AN_ID_TYPES, 2, knn_call);
}
