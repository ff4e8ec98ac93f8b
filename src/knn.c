/*
 * knn.c - gpu_knn(queries, base, k, ...): for every usable row of queries,
 * its k nearest usable rows of base, exactly, ties to the lower base id.
 *
 * The queries are read whole (as doubles, row-major: the compute layer
 * holds them on each device); the base streams past a tile of rows at a
 * time, never held: the read's parts copied by columns straight into a
 * compute layer's tile buffer (floats where the rows are), each row ranked
 * by its id, the k nearest of the tile for every query (pggpu_knn_start:
 * exact, the same on the CPU and the GPU, ties by rank) merged into each
 * query's k so far by (distance, id) when it finishes.  The tiles go round the GPUs of
 * pg_gpu.gpus, a tile in flight on each while the next fills, each with
 * the k-th distance so far of every query (rows beyond it cannot enter).
 * The results go into a tuplestore.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
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

/* the queries as the read hands them over: row-major doubles and their ids */
typedef struct RowBuf
{
	const PgGpuSource *src;
	int			d;
	double	   *x;
	int64	   *ids;			/* in keys */
	PgGpuKeys	keys;
	double		row_bytes;		/* what a row held costs */
	int64		n;
	int64		cap;
	int64		skipped;		/* unusable rows */
} RowBuf;

/*
 * The base's tile being filled: its rows by columns in the next device's
 * buffer (tile_rows apart), their ids in the order they came
 */
typedef struct Tile
{
	bool		filling;		/* begun on the next device (pggpu_knn_fill): false until its first row */
	bool		f32;			/* the base's rows are floats (vector, real[]: their own precision) */
	int64		n;
	int64	   *ids;			/* in keys (tile_rows) */
	PgGpuKeys	keys;
	int64		skipped;		/* unusable rows */
} Tile;

/* a tile in flight on a device: its ids (in keys) by rank, the place of each row's id in id order */
typedef struct Flight
{
	int64	   *ids;			/* (tile_rows) */
	int64		n;
	PgGpuKeys	keys;
} Flight;

typedef struct KnnState
{
	pggpu_knn  *kn[PGGPU_MAX_THREADS];	/* a device each (the CPU: one) */
	Flight		flight[PGGPU_MAX_THREADS];
	int			nkn;
	int			next;			/* the device the next tile goes to */
	MemoryContextCallback cb;
	int			k;
	pggpu_metric metric;
	int64		nq;
	const PgGpuSource *bsrc;
	int			d;
	Tile		tile;
	int64		tile_rows;
	int32	   *rank;			/* a tile's (tile_rows) */
	int64	   *tidx;			/* a tile's nearest (nq x k), by rank */
	double	   *tdist;
	double	   *bound;			/* every query's k-th distance so far (nq; inf: fewer than k) */
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
	/*
	 * where the leader's time went (DEBUG2): putting rows into the tiles,
	 * ordering tiles by id, waiting for devices, merging
	 */
	instr_time	putting;
	instr_time	ordering;
	instr_time	comparing;
	instr_time	merging;
} KnnState;

static void
knn_gone(void *arg)
{
	KnnState   *st = (KnnState *) arg;

	for (int i = 0; i < st->nkn; i++)
	{
		pggpu_knn_close(st->kn[i]);
		st->kn[i] = NULL;
	}
}

/* ERROR: a value too large for the plain loop's squares (22003) */
static void
check_magnitude(const PgGpuSource *src, int64 n, const double *v)
{
	for (int64 j = 0; j < n; j++)
		if (fabs(v[j]) > KNN_MAX_ABS)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("a value of \"%s\" is too large for gpu_knn: %g", src->relname, v[j]),
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
	/* (by blocks of rows: a column's run of them, then the next column's) */
	for (int64 i0 = 0; i0 < p->nrows; i0 += 32)
	{
		int64		in = Min(32, p->nrows - i0);

		for (int j = 0; j < d; j++)
			for (int64 i = i0; i < i0 + in; i++)
				rb->x[(rb->n + i) * d + j] = p->rowwise ? p->values[i * d + j] : p->values[(int64) j * p->cap + i];
		for (int64 i = i0; i < i0 + in; i++)
			check_magnitude(rb->src, d, rb->x + (rb->n + i) * d);
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

/* integer ids and their rows, sorted by both (sort_template: the comparison inlined) */
typedef struct IdAt
{
	int64		id;
	int64		at;
} IdAt;

#define ST_SORT sort_id_at
#define ST_ELEMENT_TYPE IdAt
#define ST_COMPARE(a, b) ((a)->id != (b)->id ? ((a)->id > (b)->id) - ((a)->id < (b)->id) : \
						  ((a)->at > (b)->at) - ((a)->at < (b)->at))
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/* the tile's rows by id: ties in a tile go to the lower id, as across tiles */
static const KnnState *sort_state;

static int
by_id(const void *a, const void *b)
{
	const Tile *t = &sort_state->tile;
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

/* the tile in flight on device i: finished, merged into best */
static void
tile_collect(KnnState *st, int i)
{
	Flight	   *f = &st->flight[i];
	int			k = st->k;
	pggpu_error err = {0};
	instr_time	t0,
				t1,
				t2;

	INSTR_TIME_SET_CURRENT(t0);
	if (pggpu_knn_finish(st->kn[i], st->tidx, st->tdist, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	INSTR_TIME_SET_CURRENT(t1);
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
			Datum		tkey = hb ? pg_gpu_keys_datum(&f->keys, f->ids[ti[b]]) : (Datum) 0;

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
		st->bound[q] = r == k ? bd[k - 1] : INFINITY;
	}
	INSTR_TIME_SET_CURRENT(t2);
	INSTR_TIME_ACCUM_DIFF(st->comparing, t1, t0);
	INSTR_TIME_ACCUM_DIFF(st->merging, t2, t1);
	f->keys.used = 0;			/* (a tile's ids: those kept are in bkeys) */
	compact_ids(st);
}

/*
 * The tile filled so far started on the next device (that device's tile
 * before it collected first), each row ranked by its id: ties go to the
 * lower id within a tile, as across tiles in the merge
 */
static void
tile_run(KnnState *st)
{
	Tile	   *t = &st->tile;
	int			i = st->next;
	Flight	   *f = &st->flight[i];
	int64	   *order;
	PgGpuKeys	keys;
	pggpu_error err = {0};
	instr_time	t0,
				t1;

	if (t->n == 0)
		return;
	if (pggpu_knn_busy(st->kn[i]))
		tile_collect(st, i);
	INSTR_TIME_SET_CURRENT(t0);
	order = palloc(sizeof(int64) * t->n);
	if (st->int_ids)
	{
		IdAt	   *p = palloc(sizeof(IdAt) * t->n);

		for (int64 r = 0; r < t->n; r++)
		{
			p[r].id = (int64) pg_gpu_keys_datum(&t->keys, t->ids[r]);
			p[r].at = r;
		}
		sort_id_at(p, t->n);
		for (int64 r = 0; r < t->n; r++)
			order[r] = p[r].at;
		pfree(p);
	}
	else
	{
		for (int64 r = 0; r < t->n; r++)
			order[r] = r;
		sort_state = st;
		qsort(order, t->n, sizeof(int64), by_id);
	}
	for (int64 r = 0; r < t->n; r++)
	{
		st->rank[order[r]] = (int32) r;
		f->ids[r] = t->ids[order[r]];
	}
	pfree(order);
	f->n = t->n;
	/* the tile's ids go with it; the tile takes the flight's emptied store */
	keys = f->keys;
	f->keys = t->keys;
	t->keys = keys;
	t->keys.used = 0;
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_ACCUM_DIFF(st->ordering, t1, t0);
	if (pggpu_knn_start(st->kn[i], t->n, st->rank, st->bound, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	st->next = (i + 1) % st->nkn;
	st->base_rows += t->n;
	t->n = 0;
	t->filling = false;
	pg_gpu_progress(false, "%lld rows of the base compared with %lld queries", (long long) st->base_rows,
					(long long) st->nq);
}

/* the largest magnitude of n values (four lanes: no branch a value) */
static double
max_abs(const double *v, int64 n)
{
	double		m[4] = {0, 0, 0, 0};
	int64		i = 0;

	for (; i + 4 <= n; i += 4)
		for (int l = 0; l < 4; l++)
		{
			double		a = fabs(v[i + l]);

			m[l] = a > m[l] ? a : m[l];
		}
	for (; i < n; i++)
		m[0] = fabs(v[i]) > m[0] ? fabs(v[i]) : m[0];
	return Max(Max(m[0], m[1]), Max(m[2], m[3]));
}

/*
 * Rows off.. of a part (take of them) into the tile (pggpu_knn_put: on the
 * GPU, copied by the device out of the read's pinned slot): floats by rows
 * where the GPU turns them (bsrc.rowwise), else by columns; doubles checked
 * for size first (floats cannot be too large)
 */
static void
rows_put(KnnState *st, const PgGpuPart *p, int64 off, int64 take)
{
	Tile	   *t = &st->tile;
	int			d = st->d;
	pggpu_error err = {0};
	pggpu_status ps;
	instr_time	t0,
				t1;

	INSTR_TIME_SET_CURRENT(t0);
	if (t->f32)
		ps = p->rowwise ?
			pggpu_knn_put(st->kn[st->next], t->n, p->values32 + off * d, d, take, true, p->pinned, &err) :
			pggpu_knn_put(st->kn[st->next], t->n, p->values32 + off, p->cap, take, false, p->pinned, &err);
	else
	{
		if (p->rowwise)
			elog(ERROR, "pg_gpu: gpu_knn was given doubles by rows");
		for (int j = 0; j < d; j++)
		{
			const double *col = p->values + (int64) j * p->cap + off;

			if (max_abs(col, take) > KNN_MAX_ABS)
				check_magnitude(st->bsrc, take, col);
		}
		ps = pggpu_knn_put(st->kn[st->next], t->n, p->values + off, p->cap, take, false, p->pinned, &err);
	}
	if (ps != PGGPU_OK)
		pg_gpu_raise(&err);
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_ACCUM_DIFF(st->putting, t1, t0);
	pg_gpu_keys_take(&t->keys, p, p->ids + off, take, t->ids + t->n);
	t->n += take;
}

static void
base_consume(void *arg, const PgGpuPart *p)
{
	KnnState   *st = (KnnState *) arg;
	Tile	   *t = &st->tile;
	pggpu_error err = {0};

	CHECK_FOR_INTERRUPTS();
	for (int64 off = 0; off < p->nrows;)
	{
		int64		take = Min(p->nrows - off, st->tile_rows - t->n);

		if (!t->filling)
		{
			if (pggpu_knn_fill(st->kn[st->next], st->tile_rows, t->f32, &err) != PGGPU_OK)
				pg_gpu_raise(&err);
			t->filling = true;
		}
		rows_put(st, p, off, take);
		off += take;
		if (t->n == st->tile_rows)
			tile_run(st);
	}
	t->skipped += p->nbad;
}

/* on_proc_exit: the GPUs' contexts still being made in their threads, waited for */
static void
knn_warmed(int code, Datum arg)
{
	pggpu_gpus_warmed();
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
	/* the GPUs' contexts made while the queries are read (a few hundred ms each, first in a session) */
	backend = pg_gpu_choose_backend();
	st->nkn = backend == PGGPU_BACKEND_GPU ? pg_gpu_shares(backend, gpus) : 1;
	if (backend == PGGPU_BACKEND_GPU)
	{
		static bool wait_at_exit = false;

		/* (a backend that leaves while they run waits for them first: knn_warmed) */
		if (!wait_at_exit)
			on_proc_exit(knn_warmed, 0);
		wait_at_exit = true;
		pggpu_gpus_warm(gpus, st->nkn);
	}
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
	/*
	 * the queries (and the compute layer's copies: doubles, centred floats),
	 * two tiles of rows a device and the one filling, a tile's nearest and
	 * every query's k so far
	 */
	pg_gpu_check_memory((double) st->nq * d * 20 + 2.0 * st->nkn * st->tile_rows * (d * 8 + 8) +
						40.0 * st->nq * k, qsrc.relname,
						"%lld queries of %d values, %d nearest each, and tiles of %lld rows of the base.",
						(long long) st->nq, d, k, (long long) st->tile_rows);
	st->cb.func = knn_gone;
	st->cb.arg = st;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &st->cb);
	for (int i = 0; i < st->nkn; i++)
	{
		if (pggpu_knn_open(&st->kn[i], backend, backend == PGGPU_BACKEND_GPU ? gpus[i] : -1, d, metric, qrows.x,
						   st->nq, k, &err) != PGGPU_OK)
			pg_gpu_raise(&err);
		pggpu_knn_set_interrupts(st->kn[i], pg_gpu_check_interrupts, NULL);
		pggpu_knn_set_threads(st->kn[i], pg_gpu_threads());
		pg_gpu_keys_init(&st->flight[i].keys, bsrc.keytype);
		st->flight[i].ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * st->tile_rows);
	}
	st->bsrc = &bsrc;
	st->d = d;
	/* vector and real[] rows as floats; the others (halves too), and unit rows, as doubles */
	st->tile.f32 = pg_gpu_source_dtype(&bsrc, false) == PGGPU_FLOAT32;
	pg_gpu_keys_init(&st->tile.keys, bsrc.keytype);
	st->tile.ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * st->tile_rows);
	st->rank = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * st->tile_rows);
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
	st->bound = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * st->nq);
	for (int64 q = 0; q < st->nq; q++)
		st->bound[q] = INFINITY;

	/* the base, a tile at a time (the tile's room grows to a tile and a part) */
	pg_gpu_progress(true, "comparing the base with %lld queries on %s%s", (long long) st->nq,
					pggpu_knn_device_name(st->kn[0]), st->nkn > 1 ? " and more" : "");
	INSTR_TIME_SET_CURRENT(read_b);
	/* on a GPU: the read's slots pinned, floats by rows (the device copies and turns them) */
	bsrc.pinned = backend == PGGPU_BACKEND_GPU;
	bsrc.rowwise = backend == PGGPU_BACKEND_GPU && st->tile.f32;
	pg_gpu_read_parts(&bsrc, true, NULL, st->tile.f32 ? PGGPU_FLOAT32 : PGGPU_FLOAT64, base_consume, st);
	tile_run(st);
	for (int i = 0; i < st->nkn; i++)
		if (pggpu_knn_busy(st->kn[i]))
			tile_collect(st, i);
	INSTR_TIME_SET_CURRENT(done);
	INSTR_TIME_SUBTRACT(done, read_b);
	INSTR_TIME_SUBTRACT(read_b, read_q);
	INSTR_TIME_SUBTRACT(read_q, start);
	{
		int64		pairs = 0,
					measured = 0;

		for (int i = 0; i < st->nkn; i++)
		{
			int64_t		p,
						m;

			pggpu_knn_counts(st->kn[i], &p, &m);
			pairs += p;
			measured += m;
		}
		elog(DEBUG2, "pg_gpu: gpu_knn of %lld queries against %lld rows on %d %s (ms): the queries read %.1f, "
			 "given to the devices %.1f, the base read and compared %.1f, of which putting its rows into the tiles "
			 "%.1f, ordering its tiles by id %.1f, waiting for the "
			 "comparisons %.1f, merging %.1f; %s route, %lld of %lld pairs measured by the plain loop",
			 (long long) st->nq, (long long) st->base_rows, st->nkn, pggpu_knn_device_name(st->kn[0]),
			 INSTR_TIME_GET_MILLISEC(read_q), INSTR_TIME_GET_MILLISEC(read_b), INSTR_TIME_GET_MILLISEC(done),
			 INSTR_TIME_GET_MILLISEC(st->putting), INSTR_TIME_GET_MILLISEC(st->ordering),
			 INSTR_TIME_GET_MILLISEC(st->comparing), INSTR_TIME_GET_MILLISEC(st->merging),
			 pggpu_knn_route_taken(st->kn[0]) == PGGPU_KNN_PRODUCT ? "product" : "plain", (long long) measured,
			 (long long) pairs);
	}
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
	knn_gone(st);
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
