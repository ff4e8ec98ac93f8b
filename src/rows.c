/*
 * rows.c - converting tuples into parts: the rows of k-means (numeric
 * columns) and of gpu_matmul's dense matrix tables, the same code for reading
 * through SPI (read.c), by the leader and by parallel workers (scan.c);
 * and a spec's columns: their privilege check, their places in a leaf.
 */
#include "postgres.h"

#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "access/sysattr.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pg_gpu.h"

int64
pg_gpu_slot_int(TupleTableSlot *slot, int att, Oid type)
{
	Datum		d = slot->tts_values[att];

	return type == INT2OID ? DatumGetInt16(d) : type == INT4OID ? DatumGetInt32(d) : DatumGetInt64(d);
}

/*
 * The process's buffer of pending rows (PgGpuPart.pend), of at least bytes:
 * one part at a time is filled, and its pending rows are flushed before
 * another begins (a part's buffer may be shared memory, where writing a row
 * a value a column costs a page-table walk each).  It lives as long as the
 * transaction: its rows are no later statement's.
 */
static char *pend_buf;
static Size pend_size;

static void
pending_rows_gone(void *arg)
{
	pend_buf = NULL;
	pend_size = 0;
}

static char *
pending_rows(Size bytes)
{
	if (bytes > pend_size)
	{
		if (pend_buf)
			pfree(pend_buf);
		else
		{
			MemoryContextCallback *cb = MemoryContextAlloc(TopTransactionContext, sizeof(*cb));

			cb->func = pending_rows_gone;
			cb->arg = NULL;
			MemoryContextRegisterResetCallback(TopTransactionContext, cb);
		}
		pend_buf = MemoryContextAllocHuge(TopTransactionContext, bytes);
		pend_size = bytes;
	}
	return pend_buf;
}

/*
 * The room a part keeps for its ids' bytes (keylen != 0): a row's estimate
 * (a fixed length, or 40 bytes of a varlena: a uuid as text), and an
 * eighth of the part at least, so that a long key fits however long the
 * rows (a btree's keys are at most about 2.7 kB)
 */
#define KEY_GUESS(keylen) ((keylen) > 0 ? MAXALIGN(keylen) : 40)

/*
 * The rows of len values a part of bytes holds (the values, then the ids
 * 8-byte aligned, then the weights of a weighted read (wb: 8 bytes a row),
 * then the ids' bytes; an odd count of floats rounds up),
 * and whether it keeps pending rows (below)
 */
static int64
part_cap(Size bytes, int64 len, Size vb, Size kb, bool rowwise, Size wb, bool *pends)
{
	int64		cap = bytes / (vb * len + sizeof(int64) + wb + kb);

	if (kb > 0)
		cap = Min(cap, (bytes - bytes / 8) / (vb * len + sizeof(int64) + wb));
	while (cap > 0 && TYPEALIGN(sizeof(int64), vb * len * cap) + (sizeof(int64) + wb) * cap > bytes)
		cap--;
	/*
	 * Long rows in a part of many, by columns: pending rows where they are
	 * a vector's, and columns of whole cache lines (flushed whole: 32
	 * halves are one)
	 */
	*pends = !rowwise && len >= 8 && cap >= 4 * PG_GPU_PART_PEND;
	if (*pends)
		cap &= ~(int64) 31;
	return cap;
}

int64
pg_gpu_part_rows(Size bytes, int64 len, pggpu_dtype dtype, int16 keylen, bool rowwise, bool weighted)
{
	bool		pends;

	return part_cap(bytes, Max(len, 1), pggpu_dtype_bytes(dtype), keylen != 0 ? KEY_GUESS(keylen) : 0, rowwise,
					weighted ? sizeof(double) : 0, &pends);
}

void
pg_gpu_part_init(PgGpuPart *part, char *buf, Size bytes, int64 len, bool growable, pggpu_dtype dtype,
				 int16 keylen, bool rowwise, bool weighted)
{
	Size		vb = pggpu_dtype_bytes(dtype);
	Size		kb = keylen != 0 ? KEY_GUESS(keylen) : 0;
	Size		wb = weighted ? sizeof(double) : 0;

	part->buf = buf;
	part->bytes = bytes;
	part->growable = growable;
	part->nrows = part->nbad = 0;
	part->len = len;
	part->cap = 0;
	part->values = NULL;
	part->values32 = NULL;
	part->values16 = NULL;
	part->dtype = dtype;
	part->ids = NULL;
	part->weights = NULL;
	part->keylen = keylen;
	part->keys = NULL;
	part->keybytes = part->keyused = 0;
	part->prio = NULL;
	part->rowwise = rowwise;
	part->pinned = false;
	part->pends = false;
	part->pend = NULL;
	part->npend = 0;
	if (len < 0)
		return;
	if ((Size) len >= MaxAllocHugeSize / sizeof(double) - 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("rows of %lld values are too long to read", (long long) len)));
	if (bytes < vb * len + sizeof(int64) + wb + kb)
	{
		/* only a DENSE row this long; a slot is made large enough for it */
		if (!growable)
			elog(ERROR, "pg_gpu: a part of %zu bytes cannot hold a row of %lld values",
				 bytes, (long long) len);
		part->bytes = vb * len + sizeof(int64) + wb;
		part->buf = repalloc_huge(buf, part->bytes);
	}
	part->cap = part_cap(part->bytes, len, vb, kb, rowwise, wb, &part->pends);
	if (dtype == PGGPU_FLOAT16)
		part->values16 = (uint16 *) part->buf;
	else if (dtype == PGGPU_FLOAT32)
		part->values32 = (float *) part->buf;
	else
		part->values = (double *) part->buf;
	part->ids = (int64 *) (part->buf + TYPEALIGN(sizeof(int64), vb * len * part->cap));
	if (weighted)
		part->weights = (double *) (part->ids + part->cap);
	if (keylen != 0)
	{
		part->keys = (char *) (part->ids + part->cap) + wb * part->cap;
		part->keybytes = part->bytes - (part->keys - part->buf);
	}
}

char *
pg_gpu_part_pend(PgGpuPart *part)
{
	if (part->pends && part->pend == NULL)
		part->pend = pending_rows(pggpu_dtype_bytes(part->dtype) * part->len *
								  PG_GPU_PART_PEND);
	return part->pend;
}

/*
 * A column's pending values (whole cache lines) to dst: streamed past the
 * caches where the CPU can (the part is read by another process, and a store
 * that is not streamed first reads the line it overwrites)
 */
static inline void
put_lines(char *dst, const char *src, size_t bytes)
{
#ifdef __SSE2__
	if (((uintptr_t) dst & 15) == 0)
	{
		for (size_t k = 0; k < bytes; k += 16)
			_mm_stream_si128((__m128i *) (dst + k), _mm_loadu_si128((const __m128i *) (src + k)));
		return;
	}
#endif
	memcpy(dst, src, bytes);
}

/*
 * The pending rows to columns of cap values at vals[at..] (a whole block: 16
 * columns at a time turned in a tile, then a cache line a column)
 */
#define FLUSH(T, src, vals) \
	do { \
		int64		j0 = 0; \
		if (n == PG_GPU_PART_PEND) \
			for (; j0 + 16 <= len; j0 += 16) \
			{ \
				T			tile[16][PG_GPU_PART_PEND]; \
				for (int q = 0; q < PG_GPU_PART_PEND; q++) \
					for (int jj = 0; jj < 16; jj++) \
						tile[jj][q] = (src)[q * len + j0 + jj]; \
				for (int jj = 0; jj < 16; jj++) \
					put_lines((char *) ((vals) + (j0 + jj) * cap + at), (const char *) tile[jj], \
							  sizeof(T) * PG_GPU_PART_PEND); \
			} \
		for (int64 j = j0; j < len; j++) \
			for (int64 q = 0; q < n; q++) \
				(vals)[j * cap + at + q] = (src)[q * len + j]; \
	} while (0)

void
pg_gpu_part_flush(PgGpuPart *part)
{
	int64		n = part->npend;
	int64		at = part->nrows - n;
	int64		len = part->len;
	int64		cap = part->cap;

	if (n == 0)
		return;
	if (part->dtype == PGGPU_FLOAT16)
		FLUSH(uint16, (const uint16 *) part->pend, part->values16);
	else if (part->dtype == PGGPU_FLOAT32)
		FLUSH(float, (const float *) part->pend, part->values32);
	else
		FLUSH(double, (const double *) part->pend, part->values);
	part->npend = 0;
#ifdef __SSE2__
	_mm_sfence();				/* the streamed stores before the part is handed over */
#endif
}

double
pg_gpu_datum_to_double(Datum d, Oid type)
{
	switch (type)
	{
		case INT2OID:
			return (double) DatumGetInt16(d);
		case INT4OID:
			return (double) DatumGetInt32(d);
		case INT8OID:
			return (double) DatumGetInt64(d);
		case FLOAT4OID:
			return (double) DatumGetFloat4(d);
		case FLOAT8OID:
			return DatumGetFloat8(d);
		default:
			/* numeric: out-of-range values become +-Infinity, i.e. unusable */
			return DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, d));
	}
}

bool
pg_gpu_slot_key(const PgGpuRowSpec *spec, TupleTableSlot *slot, PgGpuPart *part, int64 *id)
{
	Datum		key;
	Size		n,
				at;

	if (slot->tts_isnull[spec->idpos])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("id column \"%s\" of relation \"%s\" contains NULL",
						NameStr(spec->idname), NameStr(spec->relname)),
				 errhint("Pass an id_column without NULLs, or read from a view that filters them.")));
	key = slot->tts_values[spec->idpos];
	if (spec->keylen == 0)
	{
		/* (the integers' Datums are their values, sign-extended) */
		*id = (int64) key;
		return true;
	}
	/* by reference: the bytes, detoasted (a short header kept), into the part's key area */
	if (spec->keylen == -1)
		key = PointerGetDatum(PG_DETOAST_DATUM_PACKED(key));
	n = datumGetSize(key, false, spec->keylen);
	at = MAXALIGN(part->keyused);
	if (at + n > part->keybytes)
	{
		if (part->nrows + part->nbad > 0)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("an id of \"%s\" is too long: %zu bytes, at most %zu for rows of %lld values",
						NameStr(spec->relname), n, part->keybytes, (long long) part->len),
				 errhint("Identify the rows by a shorter column (id_column).")));
	}
	memcpy(part->keys + at, DatumGetPointer(key), n);
	part->keyused = at + n;
	*id = (int64) at;
	return true;
}

char *
pg_gpu_slot_key_text(const PgGpuRowSpec *spec, TupleTableSlot *slot)
{
	Oid			out;
	bool		varlena;

	if (slot->tts_isnull[spec->idpos])
		return pstrdup("NULL");
	getTypeOutputInfo(spec->idtype, &out, &varlena);
	return OidOutputFunctionCall(out, slot->tts_values[spec->idpos]);
}

/* NUMERIC: a row with NULL, NaN or an infinity in a used column (or its weight) is skipped */
static bool
numeric_row(const PgGpuRowSpec *spec, TupleTableSlot *slot, PgGpuPart *part)
{
	int64		i = part->nrows;
	int64		id = 0;
	double		w = 1;

	if (spec->idpos >= 0 && !pg_gpu_slot_key(spec, slot, part, &id))
		return false;
	if (part->rowwise)
		elog(ERROR, "pg_gpu: numeric rows read by rows");
	if (spec->weighted && !pg_gpu_slot_weight(spec, slot, NAN, &w))
		goto skip;
	for (int j = 0; j < spec->ncols; j++)
	{
		int			a = spec->pos[j];
		double		v;

		if (slot->tts_isnull[a])
			goto skip;
		v = pg_gpu_datum_to_double(slot->tts_values[a], spec->types[j]);
		if (!isfinite(v))
			goto skip;
		if (part->dtype == PGGPU_FLOAT16)
			elog(ERROR, "pg_gpu: numeric columns read as halves");
		if (part->dtype == PGGPU_FLOAT32)
			part->values32[j * part->cap + i] = (float) v;
		else
			part->values[j * part->cap + i] = v;
	}
	if (spec->normalize && !pggpu_unit_row(part->values + i, part->cap, spec->ncols))
		goto skip;				/* cosine: a zero row has no direction */
	part->ids[i] = id;
	if (part->weights)
		part->weights[i] = w;
	part->nrows++;
	return true;
skip:
	part->ids[part->cap - 1 - part->nbad++] = id;
	return true;
}

bool
pg_gpu_row_to_part(const PgGpuRowSpec *spec, TupleTableSlot *slot, PgGpuPart *part)
{
	int			natts = Max(spec->idpos, 0);

	for (int j = 0; j < spec->ncols; j++)
		natts = Max(natts, spec->pos[j]);
	if (spec->weighted && !spec->mweights)
		natts = Max(natts, spec->wpos);
	slot_getsomeattrs(slot, natts + 1);
	if (spec->kind == PG_GPU_ROWS_NUMERIC)
		return numeric_row(spec, slot, part);
	if (spec->kind == PG_GPU_ROWS_VECTOR)
		return pg_gpu_vector_row(spec, slot, part);
	pg_gpu_dense_row(spec, slot, part);
	return true;
}

/* the executor's privilege check of SELECT <the spec's columns> FROM rel */
void
pg_gpu_spec_check_select(Relation rel, const PgGpuRowSpec *spec)
{
	Bitmapset  *cols = NULL;

	if (spec->idpos >= 0)
		cols = bms_add_member(cols, spec->idpos + 1 - FirstLowInvalidHeapAttributeNumber);
	for (int j = 0; j < spec->ncols; j++)
		cols = bms_add_member(cols, spec->pos[j] + 1 - FirstLowInvalidHeapAttributeNumber);
	if (spec->weighted && !spec->mweights)
		cols = bms_add_member(cols, spec->wpos + 1 - FirstLowInvalidHeapAttributeNumber);
	pg_gpu_check_select_privileges(rel, cols);
}

/* spec with its positions moved from parent's attributes to child's, by name */
PgGpuRowSpec *
pg_gpu_leaf_spec(Relation parent, Relation child, const PgGpuRowSpec *spec)
{
	PgGpuRowSpec *ls = palloc(sizeof(PgGpuRowSpec));
	TupleDesc	ptd = RelationGetDescr(parent);
	TupleDesc	ctd = RelationGetDescr(child);

	memcpy(ls, spec, sizeof(PgGpuRowSpec));
	if (spec->idpos >= 0)
		ls->idpos = pg_gpu_find_column(ctd, NameStr(TupleDescAttr(ptd, spec->idpos)->attname));
	for (int j = 0; j < spec->ncols; j++)
		ls->pos[j] = pg_gpu_find_column(ctd, NameStr(TupleDescAttr(ptd, spec->pos[j])->attname));
	/* (the weight column too: a leaf's columns may lie in another order) */
	if (spec->weighted && !spec->mweights)
		ls->wpos = pg_gpu_find_column(ctd, NameStr(TupleDescAttr(ptd, spec->wpos)->attname));
	return ls;
}

/* ---- gpu_matmul's dense rows: (row id, float8[] or real[]) ---- */

static int64
dense_id(const PgGpuRowSpec *spec, TupleTableSlot *slot)
{
	if (slot->tts_isnull[spec->idpos])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("column \"%s\" of \"%s\" contains NULL",
						NameStr(spec->idname), NameStr(spec->relname)),
				 errhint("Every row of a matrix table needs its row id, 1 to the number of rows.")));
	return pg_gpu_slot_int(slot, spec->idpos, spec->idtype);
}

void
pg_gpu_differ_in_length(const PgGpuRowSpec *spec, int64 id, int64 len, int64 first_id, int64 first_len)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("rows of \"%s\" differ in length", NameStr(spec->relname)),
			 errdetail("Row %lld has %lld elements, row %lld has %lld.", (long long) id,
					   (long long) len, (long long) first_id, (long long) first_len)));
}

/* the row's array, checked: present, one-dimensional, without NULLs */
static ArrayType *
dense_array(const PgGpuRowSpec *spec, TupleTableSlot *slot, int64 id)
{
	int			a = spec->pos[0];
	ArrayType  *arr;

	if (slot->tts_isnull[a])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("row %lld of \"%s\" is NULL", (long long) id, NameStr(spec->relname))));
	arr = DatumGetArrayTypeP(slot->tts_values[a]);
	if (ARR_NDIM(arr) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 ARR_NDIM(arr) == 0
				 ? errmsg("row %lld of \"%s\" is an empty array", (long long) id, NameStr(spec->relname))
				 : errmsg("row %lld of \"%s\" is a %d-dimensional array, not a one-dimensional one",
						  (long long) id, NameStr(spec->relname), ARR_NDIM(arr))));
	if (array_contains_nulls(arr))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("row %lld of \"%s\" contains NULL elements", (long long) id, NameStr(spec->relname)),
				 errhint("Replace them, for example with 0 or 'NaN'.")));
	return arr;
}

int64
pg_gpu_dense_row_len(const PgGpuRowSpec *spec, TupleTableSlot *slot, int64 *id)
{
	Datum		d;
	ArrayType  *arr;

	slot_getsomeattrs(slot, Max(spec->idpos, spec->pos[0]) + 1);
	if (slot->tts_isnull[spec->idpos] || slot->tts_isnull[spec->pos[0]])
		return -1;
	*id = pg_gpu_slot_int(slot, spec->idpos, spec->idtype);
	d = slot->tts_values[spec->pos[0]];
	arr = DatumGetArrayTypeP(d);
	return ARR_NDIM(arr) == 1 ? ARR_DIMS(arr)[0] : -1;
}

void
pg_gpu_dense_row(const PgGpuRowSpec *spec, TupleTableSlot *slot, PgGpuPart *part)
{
	int64		id = dense_id(spec, slot);
	ArrayType  *arr = dense_array(spec, slot, id);
	int64		len = ARR_DIMS(arr)[0];
	double	   *dst;

	if (spec->first_len >= 0 && len != spec->first_len)
		pg_gpu_differ_in_length(spec, id, len, spec->first_id, spec->first_len);
	if (part->nrows == 0 && part->len != len)
		pg_gpu_part_init(part, part->buf, part->bytes, len, part->growable, PGGPU_FLOAT64, 0, false, false);
	else if (len != part->len)
		pg_gpu_differ_in_length(spec, id, len, part->ids[0], part->len);
	dst = part->values + part->nrows * len;
	if (spec->types[0] == FLOAT8OID)
		memcpy(dst, ARR_DATA_PTR(arr), len * sizeof(double));
	else
	{
		const float4 *src = (const float4 *) ARR_DATA_PTR(arr);

		for (int64 j = 0; j < len; j++)
			dst[j] = src[j];
	}
	part->ids[part->nrows++] = id;
}
