/*
 * predict.c - gpu_kmeans_predict: the cluster of one row under a model, on
 * the CPU in the backend, its models parsed once (a query's and a backend
 * cache's); the models themselves are model.c's.
 */
#include "postgres.h"

#include <math.h>

#include "common/shortest_dec.h"
#include "lib/stringinfo.h"
#include "access/detoast.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "funcapi.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/fmgrprotos.h"

#include "pg_gpu.h"

/*
 * gpu_kmeans_predict's models, parsed once.  Parsing a model (every double a
 * numeric turned back into a float8) takes milliseconds for a large one,
 * and so does detoasting it (fetching and decompressing its chunks): per
 * row, that was 3 ms for 5000 rows of a 0.9 MB model (15.9 s), 19 ms a row
 * in a trigger.  So a model is recognised without detoasting it:
 *
 * - within a query (fn_extra), a model stored out of line is known by its
 *   toast pointer: the toast relation, the value's OID, its raw and stored
 *   sizes.  Safe there: a toast value is removed (and its OID free again)
 *   only by a vacuum after the row holding it is deleted, and no vacuum
 *   removes a row the query's snapshot still sees; the pointer came from
 *   such a row, so while the query runs no other value can have its OID.
 *   A model held inline (small, or a constant, or computed) is compared by
 *   its bytes as they come, compressed or not (no decompression).
 * - across queries and statements (a trigger gets a fresh fn_extra each
 *   statement), a small backend cache of the last MODEL_CACHE_SIZE models
 *   (and MODEL_CACHE_BYTES of memory: a larger model is parsed once a query),
 *   keyed by their raw bytes as stored (compressed, not decompressed: a
 *   toast fetch without pglz/lz4 and without parsing), compared whole
 *   (length, a hash, then memcmp).  Not by the toast pointer: there the
 *   snapshot argument does not hold (the row may be deleted and vacuumed
 *   between two statements, and after an OID wraparound a new model in the
 *   same toast table may get the same value OID, and even the same sizes),
 *   and a wrong model would give wrong clusters silently.
 *
 * An entry is reference-counted: the backend cache holds one reference,
 * each query using it another, dropped when the query's fn_mcxt goes (a
 * reset callback, which runs on errors too), so evicting an entry a running
 * query uses frees nothing under it.
 */
#define MODEL_CACHE_SIZE 8
/* and at most this many bytes (raw and parsed): larger ones only for a query */
#define MODEL_CACHE_BYTES ((Size) 128 * 1024 * 1024)

typedef struct ParsedModel
{
	MemoryContext cxt;			/* holds all of it */
	int			refs;
	uint64		used;			/* the backend cache's clock, for LRU */
	char	   *raw;			/* the model's bytes as stored (maybe compressed) */
	Size		rawlen;
	uint32		hash;
	Size		bytes;			/* its memory */
	PgGpuModel *m;				/* cosine: centroids normalised, as applied */
	double		c_lo,			/* the centroids' non-zero magnitudes */
				c_hi;
} ParsedModel;

static ParsedModel *model_cache[MODEL_CACHE_SIZE];
static uint64 model_clock;

static void
model_unref(ParsedModel *pm)
{
	if (--pm->refs == 0)
		MemoryContextDelete(pm->cxt);
}

/* what gpu_kmeans_predict keeps across the rows of a query (fn_extra) */
typedef struct PredictCache
{
	MemoryContext cxt;			/* what follows; reset when the model changes */
	ParsedModel *pm;			/* referenced (see predict_release) */
	bool		ondisk;			/* the model was a toast pointer: */
	varatt_external ptr;		/* ... this one */
	char	   *raw;			/* else its bytes as they came */
	Size		rawlen;
	PgGpuModel *m;				/* pm->m */
	double	   *x;
	/* the centroids at scale 2^sc_e */
	int			sc_e;
	double	   *sc;
	/* a row argument: its type, and the model's columns in it */
	Oid			rowtype;
	int32		rowtypmod;
	int		   *atts;
	Oid		   *types;
	PgGpuVecKind colkind;		/* of a vector model's column */
	MemoryContextCallback release;
} PredictCache;

/* fn_mcxt going (the query's end, or an error): the model's reference goes */
static void
predict_release(void *arg)
{
	PredictCache *pc = arg;

	if (pc->pm)
		model_unref(pc->pm);
	pc->pm = NULL;
}

/* the parsed model of raw bytes `raw` (stored form), from the backend cache or parsed */
static ParsedModel *
model_lookup(struct varlena *stored, Datum value)
{
	Size		len = VARSIZE_ANY(stored);
	uint32		h = DatumGetUInt32(hash_any((const unsigned char *) stored, (int) Min(len, (Size) INT_MAX)));
	int			victim = 0;
	ParsedModel *pm;
	MemoryContext cxt,
				old;
	Jsonb	   *jb;

	for (int i = 0; i < MODEL_CACHE_SIZE; i++)
	{
		pm = model_cache[i];
		if (pm && pm->rawlen == len && pm->hash == h && memcmp(pm->raw, stored, len) == 0)
		{
			pm->used = ++model_clock;
			pm->refs++;
			return pm;
		}
		if (pm == NULL || (model_cache[victim] && pm->used < model_cache[victim]->used))
			victim = i;
	}

	/*
	 * Parse it in a context under CurrentMemoryContext, so that an error
	 * (not a model) frees it; moved under TopMemoryContext once it parsed.
	 */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_kmeans_predict model", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	pm = palloc0(sizeof(ParsedModel));
	pm->cxt = cxt;
	jb = DatumGetJsonbP(value);
	pm->m = pg_gpu_model_from_jsonb(jb);
	if (pm->m->metric == PGGPU_METRIC_COSINE)
	{
		/* as the assignment pass normalises them */
		double	   *c = palloc(sizeof(double) * pm->m->k * pm->m->d);

		memcpy(c, pm->m->scaled, sizeof(double) * pm->m->k * pm->m->d);
		pggpu_unit_rows(c, pm->m->k, pm->m->d);
		pm->m->scaled = c;
	}
	pm->c_lo = INFINITY;
	pm->c_hi = 0;
	pggpu_magnitudes(pm->m->scaled, (int64) pm->m->k * pm->m->d, &pm->c_lo, &pm->c_hi);
	pm->raw = palloc(len);
	memcpy(pm->raw, stored, len);
	pm->rawlen = len;
	pm->hash = h;
	if ((Pointer) jb != DatumGetPointer(value))
		pfree(jb);				/* the detoasted copy: not kept */
	MemoryContextSwitchTo(old);
	MemoryContextSetParent(cxt, TopMemoryContext);
	pm->refs = 1;				/* the caller's */
	pm->bytes = MemoryContextMemAllocated(cxt, true);
	if (pm->bytes > MODEL_CACHE_BYTES)
		return pm;				/* too large to keep beyond the query */
	if (model_cache[victim])
		model_unref(model_cache[victim]);
	model_cache[victim] = pm;
	pm->refs++;					/* the backend cache's */
	pm->used = ++model_clock;
	/* within MODEL_CACHE_BYTES: the least recently used others go */
	for (;;)
	{
		Size		total = 0;
		int			lru = -1;

		for (int i = 0; i < MODEL_CACHE_SIZE; i++)
			if (model_cache[i])
			{
				total += model_cache[i]->bytes;
				if (model_cache[i] != pm && (lru < 0 || model_cache[i]->used < model_cache[lru]->used))
					lru = i;
			}
		if (total <= MODEL_CACHE_BYTES || lru < 0)
			break;
		model_unref(model_cache[lru]);
		model_cache[lru] = NULL;
	}
	return pm;
}

static PredictCache *
predict_cache(FunctionCallInfo fcinfo)
{
	PredictCache *pc = fcinfo->flinfo->fn_extra;
	Datum		value = PG_GETARG_DATUM(0);
	struct varlena *given = (struct varlena *) DatumGetPointer(value);
	struct varlena *stored;
	bool		ondisk = VARATT_IS_EXTERNAL_ONDISK(given);
	varatt_external ptr;
	ParsedModel *pm;
	MemoryContext old;

	if (ondisk)
		VARATT_EXTERNAL_GET_POINTER(ptr, given);
	if (pc && pc->pm)
	{
		/* the same toast value (see above), or the same bytes */
		if (ondisk ? pc->ondisk && pc->ptr.va_valueid == ptr.va_valueid &&
			pc->ptr.va_toastrelid == ptr.va_toastrelid && pc->ptr.va_rawsize == ptr.va_rawsize &&
			pc->ptr.va_extinfo == ptr.va_extinfo :
			!pc->ondisk && !VARATT_IS_EXTERNAL(given) && pc->rawlen == VARSIZE_ANY(given) &&
			memcmp(pc->raw, given, pc->rawlen) == 0)
			return pc;
	}
	if (pc == NULL)
	{
		pc = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(PredictCache));
		pc->cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "gpu_kmeans_predict",
										ALLOCSET_SMALL_SIZES);
		pc->release.func = predict_release;
		pc->release.arg = pc;
		MemoryContextRegisterResetCallback(fcinfo->flinfo->fn_mcxt, &pc->release);
		fcinfo->flinfo->fn_extra = pc;
	}
	/* another model (a join of models and rows): the last one's goes */
	predict_release(pc);
	MemoryContextReset(pc->cxt);
	memset((char *) pc + offsetof(PredictCache, ondisk), 0,
		   offsetof(PredictCache, release) - offsetof(PredictCache, ondisk));

	/* the bytes as stored: fetched from the toast table, not decompressed */
	stored = VARATT_IS_EXTERNAL(given) ? detoast_external_attr(given) : given;
	pm = model_lookup(stored, value);
	pc->pm = pm;
	pc->m = pm->m;
	old = MemoryContextSwitchTo(pc->cxt);
	pc->x = palloc(sizeof(double) * pm->m->d);
	pc->ondisk = ondisk;
	if (ondisk)
		pc->ptr = ptr;
	else
	{
		pc->rawlen = VARSIZE_ANY(stored);
		pc->raw = palloc(pc->rawlen);
		memcpy(pc->raw, stored, pc->rawlen);
	}
	MemoryContextSwitchTo(old);
	if (stored != given)
		pfree(stored);
	return pc;
}

/* the row's columns the model needs, into pc->x; false: one is NULL */
static bool
row_values(PredictCache *pc, HeapTupleHeader th, MemoryContext mcxt)
{
	PgGpuModel *m = pc->m;
	Oid			type = HeapTupleHeaderGetTypeId(th);
	int32		typmod = HeapTupleHeaderGetTypMod(th);
	if (pc->atts == NULL || pc->rowtype != type || pc->rowtypmod != typmod)
	{
		TupleDesc	td = lookup_rowtype_tupdesc(type, typmod);
		int		   *atts = MemoryContextAlloc(mcxt, sizeof(int) * m->ncols);
		Oid		   *types = MemoryContextAlloc(mcxt, sizeof(Oid) * m->ncols);

		for (int i = 0; i < m->ncols; i++)
		{
			int			a = pg_gpu_find_column(td, m->columns[i]);
			Oid			t;
			PgGpuVecKind kind;

			if (a < 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("the row has no column \"%s\", which the model needs", m->columns[i]),
						 errhint("Pass a row with the model's columns (model->'columns'), or an array of their values in that order.")));
			t = getBaseType(TupleDescAttr(td, a)->atttypid);
			kind = pg_gpu_vector_kind(t);
			if (m->veckind == PG_GPU_VEC_NONE ? !pg_gpu_is_numeric_type(t) :
				(kind == PG_GPU_VEC_NONE || (kind == PG_GPU_VEC_GEOMETRY) != (m->veckind == PG_GPU_VEC_GEOMETRY)))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of the row is of type %s, but the model was fit on %s",
								m->columns[i], format_type_be(TupleDescAttr(td, a)->atttypid), pg_gpu_model_fit_on(m))));
			atts[i] = a + 1;
			types[i] = t;
			pc->colkind = kind;
		}
		ReleaseTupleDesc(td);
		pc->atts = atts;
		pc->types = types;
		pc->rowtype = type;
		pc->rowtypmod = typmod;
	}
	for (int i = 0; i < m->ncols; i++)
	{
		bool		isnull;
		Datum		v = GetAttributeByNum(th, pc->atts[i], &isnull);

		if (isnull)
			return false;
		if (m->veckind == PG_GPU_VEC_NONE)
			pc->x[i] = pg_gpu_datum_to_double(v, pc->types[i]);
		else if (pg_gpu_vector_values(pc->colkind, v, m->d, pc->x,
									  psprintf("column \"%s\" of the row", m->columns[i])) < 0)
			return false;
	}
	return true;
}

/* a bare value: an array or a vector of the model's dimensions, or one number */
static bool
bare_values(PredictCache *pc, Datum v, Oid argtype)
{
	PgGpuModel *m = pc->m;
	Oid			base = getBaseType(argtype);
	PgGpuVecKind kind = pg_gpu_vector_kind(base);
	Oid			elem = get_element_type(base);

	if (kind != PG_GPU_VEC_NONE)
	{
		if ((kind == PG_GPU_VEC_GEOMETRY) != (m->veckind == PG_GPU_VEC_GEOMETRY))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("a value of type %s cannot be assigned to a model fit on %s",
							format_type_be(argtype), pg_gpu_model_fit_on(m))));
		return pg_gpu_vector_values(kind, v, m->d, pc->x, "the vector") >= 0;
	}
	if (OidIsValid(elem) && pg_gpu_is_numeric_type(getBaseType(elem)))
	{
		ArrayType  *a = DatumGetArrayTypeP(v);
		int16		len;
		bool		byval;
		char		align;
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		if (ARR_NDIM(a) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("the array has %d dimensions; a row's values are one", ARR_NDIM(a))));
		get_typlenbyvalalign(elem, &len, &byval, &align);
		deconstruct_array(a, elem, len, byval, align, &elems, &nulls, &n);
		if (n != m->d)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("the array has %d values; the model has %d dimensions", n, m->d),
					 errhint("Pass the values in the order of model->'columns'.")));
		for (int j = 0; j < n; j++)
		{
			if (nulls[j])
				return false;
			pc->x[j] = pg_gpu_datum_to_double(elems[j], getBaseType(elem));
		}
		return true;
	}
	if (pg_gpu_is_numeric_type(base) && m->d == 1 && m->veckind == PG_GPU_VEC_NONE)
	{
		pc->x[0] = pg_gpu_datum_to_double(v, base);
		return true;
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("gpu_kmeans_predict takes a row, an array of numbers, a vector or a point, not %s",
					format_type_be(argtype)),
			 errhint("Pass the table's row (gpu_kmeans_predict(model, t) FROM t), or ARRAY[...] of the values in the order of model->'columns'.")));
}

/*
 * The centroids to compare pc->x with, pc->x scaled with them: as every fit
 * and assignment does (pggpu_prepare_scale), the row and the centroids are
 * multiplied by the power of two that keeps their squares and sums normal
 * doubles (values near 1e154 and up overflow when squared, near 1e-162 and
 * down underflow to 0, and every row would go to cluster 1).  Exact, so the
 * nearest centroid is the one gpu_kmeans_apply finds; e = 0 (no copy) where
 * the values are in range.  The scaled centroids are kept for the next row
 * of the same scale.  Magnitudes too far apart for any scale: 22003, as
 * gpu_kmeans_apply.
 */
static const double *
scaled_centroids(PredictCache *pc)
{
	PgGpuModel *m = pc->m;
	double		lo = pc->pm->c_lo,
				hi = pc->pm->c_hi;
	int			e;
	pggpu_error err = {0};

	pggpu_magnitudes(pc->x, m->d, &lo, &hi);
	if (pggpu_scale_exponent(lo, hi, &e, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	if (e == 0)
		return m->scaled;
	for (int j = 0; j < m->d; j++)
		pc->x[j] = ldexp(pc->x[j], e);
	if (pc->sc == NULL || pc->sc_e != e)
	{
		if (pc->sc == NULL)
			pc->sc = MemoryContextAllocHuge(pc->cxt, sizeof(double) * m->k * m->d);
		for (int64 i = 0; i < (int64) m->k * m->d; i++)
			pc->sc[i] = ldexp(m->scaled[i], e);
		pc->sc_e = e;
	}
	return pc->sc;
}

PG_FUNCTION_INFO_V1(gpu_kmeans_predict);

/*
 * gpu_kmeans_predict(model jsonb, x anyelement) -> integer: the cluster
 * (1..k) of one row under a model, on the CPU; NULL where the row has a
 * NULL, NaN or infinite value (or is zero, for cosine), as gpu_kmeans_assign
 * leaves it out.
 */
Datum
gpu_kmeans_predict(PG_FUNCTION_ARGS)
{
	PredictCache *pc = predict_cache(fcinfo);
	PgGpuModel *m = pc->m;
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	bool		ok;

	if (!OidIsValid(argtype))
		elog(ERROR, "gpu_kmeans_predict: the argument's type is not known");
	if (type_is_rowtype(argtype))
		ok = row_values(pc, PG_GETARG_HEAPTUPLEHEADER(1), pc->cxt);
	else
		ok = bare_values(pc, PG_GETARG_DATUM(1), argtype);
	for (int j = 0; ok && j < m->d; j++)
		ok = isfinite(pc->x[j]);
	if (ok && m->metric == PGGPU_METRIC_COSINE)
		ok = pggpu_unit_row(pc->x, 1, m->d);
	if (!ok)
		PG_RETURN_NULL();
	if (m->standard)
		for (int j = 0; j < m->d; j++)
			pc->x[j] = (pc->x[j] - m->mean[j]) / m->std[j];
	PG_RETURN_INT32(pggpu_nearest(pc->x, scaled_centroids(pc), m->k, m->d, NULL) + 1);
}
