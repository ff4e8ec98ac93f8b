/*
 * vector.c - vector columns as k-means rows: a one-dimensional real[] or
 * double precision[] (any lower bound), or pgvector's vector or halfvec.
 *
 * pg_gpu does not link to pgvector: its types are found by name at call
 * time (a base type named vector or halfvec whose input function is
 * pgvector's) and read by their documented on-disk layout (pgvector's
 * src/vector.h and src/halfvec.h: a varlena header, int16 dim, int16
 * unused, then dim float4 or IEEE binary16 values).  Rows are converted
 * straight into a part's column-major layout, in the parallel workers as in
 * the leader, without a function call per element.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "pg_gpu.h"

/* pgvector's vector and halfvec (src/vector.h, src/halfvec.h) */
typedef struct PgvectorHeader
{
	int32		vl_len_;
	int16		dim;
	int16		unused;
} PgvectorHeader;

#define PGVECTOR_DATA(v) ((const char *) (v) + sizeof(PgvectorHeader))

/* a base type of name `name` whose input function is `input` (pgvector's) */
static bool
is_named_type(Oid type, const char *name, const char *input)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	bool		match = false;

	if (HeapTupleIsValid(tup))
	{
		Form_pg_type t = (Form_pg_type) GETSTRUCT(tup);

		if (t->typtype == TYPTYPE_BASE && t->typlen == -1 && strcmp(NameStr(t->typname), name) == 0)
		{
			char	   *fn = get_func_name(t->typinput);

			match = fn != NULL && strcmp(fn, input) == 0;
		}
		ReleaseSysCache(tup);
	}
	return match;
}

PgGpuVecKind
pg_gpu_vector_kind(Oid basetype)
{
	if (basetype == FLOAT4ARRAYOID)
		return PG_GPU_VEC_FLOAT4;
	if (basetype == FLOAT8ARRAYOID)
		return PG_GPU_VEC_FLOAT8;
	if (basetype < FirstNormalObjectId)
		return PG_GPU_VEC_NONE;
	if (is_named_type(basetype, "vector", "vector_in"))
		return PG_GPU_VEC_PGVECTOR;
	if (is_named_type(basetype, "halfvec", "halfvec_in"))
		return PG_GPU_VEC_HALFVEC;
	return PG_GPU_VEC_NONE;
}

/* IEEE binary16 to float (exact) */
static inline float
half_to_float(uint16 h)
{
	int			e = (h >> 10) & 0x1f;
	int			m = h & 0x3ff;
	float		v;

	if (e == 0)
		v = ldexpf((float) m, -24);	/* zero or subnormal */
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexpf((float) (m | 0x400), e - 25);
	return (h & 0x8000) ? -v : v;
}

/* a row's name in messages: its id, else its place in the table */
static char *
row_name(const PgGpuRowSpec *spec, TupleTableSlot *slot, int64 id)
{
	if (spec->idpos >= 0)
		return psprintf("row with %s = %lld", NameStr(spec->idname), (long long) id);
	if (ItemPointerIsValid(&slot->tts_tid))
		return psprintf("row at ctid (%u,%u)", ItemPointerGetBlockNumber(&slot->tts_tid),
						ItemPointerGetOffsetNumber(&slot->tts_tid));
	return pstrdup("row");
}

/*
 * The vector's length, and its values (as stored: float4, float8 or
 * binary16) in *data; *has_nulls for arrays with NULL elements.  v is
 * detoasted already.  An array of more than one dimension is an ERROR
 * (2202E); an empty one has length 0.
 */
static int64
vector_parts(PgGpuVecKind kind, struct varlena *v, const char **data, bool *has_nulls,
			 const PgGpuRowSpec *spec, TupleTableSlot *slot, int64 id)
{
	*has_nulls = false;
	if (kind == PG_GPU_VEC_PGVECTOR || kind == PG_GPU_VEC_HALFVEC)
	{
		*data = PGVECTOR_DATA(v);
		return ((const PgvectorHeader *) v)->dim;
	}
	else
	{
		ArrayType  *a = (ArrayType *) v;

		if (ARR_NDIM(a) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("the %s of \"%s\" has a %d-dimensional array in column \"%s\"",
							slot ? row_name(spec, slot, id) : "first non-NULL row",
							NameStr(spec->relname), ARR_NDIM(a), NameStr(spec->colname)),
					 errhint("A vector column holds one-dimensional arrays.")));
		*has_nulls = ARR_HASNULL(a) && array_contains_nulls(a);
		*data = ARR_DATA_PTR(a);
		return ARR_NDIM(a) == 0 ? 0 : ARR_DIMS(a)[0];
	}
}

bool
pg_gpu_unit_row(double *x, int64 stride, int64 d)
{
	/* |x| = m sqrt(sum (x_j / m)^2): no square overflows or underflows to 0 */
	double		m = 0,
				ss = 0,
				f;

	for (int64 j = 0; j < d; j++)
		m = fmax(m, fabs(x[j * stride]));
	if (m == 0)
		return false;
	for (int64 j = 0; j < d; j++)
	{
		double		q = x[j * stride] / m;

		ss += q * q;
	}
	f = 1.0 / (m * sqrt(ss));
	for (int64 j = 0; j < d; j++)
		x[j * stride] *= f;
	return true;
}

int
pg_gpu_vector_dims(const PgGpuSource *src)
{
	char	   *sql = psprintf("SELECT %s FROM %s WHERE %s IS NOT NULL LIMIT 1",
							   quote_identifier(src->colnames[0]), src->qualname,
							   quote_identifier(src->colnames[0]));
	int64		len = -1;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed: %s", sql);
	if (SPI_processed > 0)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		const char *data;
		bool		nulls;
		PgGpuRowSpec *spec = palloc0(sizeof(PgGpuRowSpec));	/* for its messages */

		namestrcpy(&spec->relname, src->relname);
		namestrcpy(&spec->colname, src->colnames[0]);
		if (!isnull)
			len = vector_parts(src->veckind, PG_DETOAST_DATUM(d), &data, &nulls, spec, NULL, 0);
	}
	SPI_finish();
	if (len < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" has no usable rows", src->relname),
				 errdetail("Column \"%s\" is NULL in every row, or the relation has no rows.",
						   src->colnames[0])));
	if (len == 0 || len > PG_GPU_MAX_VECTOR_DIMS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("vectors of column \"%s\" have %lld elements; k-means takes 1 to %d",
						src->colnames[0], (long long) len, PG_GPU_MAX_VECTOR_DIMS)));
	return (int) len;
}

/*
 * VECTOR: the row's vector as values j * cap + i of the part, or the row
 * skipped (NULL vector, NULL element, NaN or an infinity; with normalize, a
 * zero vector); another length than the first row's is an ERROR (22000).
 */
void
pg_gpu_vector_row(const PgGpuRowSpec *spec, TupleTableSlot *slot, PgGpuPart *part)
{
	int			a = spec->pos[0];
	int64		i = part->nrows;
	int64		id = 0;
	int64		d = spec->veclen;
	int64		cap = part->cap;
	double	   *dst = part->values + i;
	struct varlena *raw,
			   *v;
	const char *data;
	bool		nulls;
	int64		len;

	if (spec->idpos >= 0)
		id = pg_gpu_slot_id(spec, slot);
	if (slot->tts_isnull[a])
		goto skip;
	raw = (struct varlena *) DatumGetPointer(slot->tts_values[a]);
	v = PG_DETOAST_DATUM(slot->tts_values[a]);
	len = vector_parts(spec->veckind, v, &data, &nulls, spec, slot, id);
	if (len != d)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("vectors of column \"%s\" of \"%s\" differ in length",
						NameStr(spec->colname), NameStr(spec->relname)),
				 errdetail("The %s has %lld elements; the first row read has %lld.",
						   row_name(spec, slot, id), (long long) len, (long long) d),
				 errhint("Every vector of one k-means call has the same length.")));
	if (nulls)
		goto skip_free;
	switch (spec->veckind)
	{
		case PG_GPU_VEC_FLOAT8:
			for (int64 j = 0; j < d; j++)
				dst[j * cap] = ((const float8 *) data)[j];
			break;
		case PG_GPU_VEC_HALFVEC:
			for (int64 j = 0; j < d; j++)
				dst[j * cap] = half_to_float(((const uint16 *) data)[j]);
			break;
		default:
			for (int64 j = 0; j < d; j++)
				dst[j * cap] = ((const float4 *) data)[j];
			break;
	}
	for (int64 j = 0; j < d; j++)
		if (!isfinite(dst[j * cap]))
			goto skip_free;
	if (spec->normalize && !pg_gpu_unit_row(dst, cap, d))
		goto skip_free;
	if (v != raw)
		pfree(v);
	part->ids[i] = id;
	part->nrows++;
	return;
skip_free:
	if (v != raw)
		pfree(v);
skip:
	part->ids[part->cap - 1 - part->nbad++] = id;
}
