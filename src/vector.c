/*
 * vector.c - vector columns as k-means rows: a one-dimensional real[] or
 * double precision[] (any lower bound), pgvector's vector or halfvec, or
 * PostGIS's geometry points (x, y, and z where they have it).
 *
 * pg_gpu does not link to pgvector: its types are found by name at call
 * time (a base type named vector or halfvec whose input function is
 * pgvector's) and read by their documented on-disk layout (pgvector's
 * src/vector.h and src/halfvec.h: a varlena header, int16 dim, int16
 * unused, then dim float4 or IEEE binary16 values).  PostGIS likewise: its
 * geometry type found by name and input function, its points read from the
 * documented GSERIALIZED layout (liblwgeom/gserialized.txt; see
 * geometry_point).  Rows are converted
 * straight into a part's column-major layout, in the parallel workers as in
 * the leader, without a function call per element.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
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

/*
 * PostGIS's GSERIALIZED, versions 1 (PostGIS 2) and 2 (PostGIS 3): a varlena
 * header, 3 bytes of SRID, a flags byte; in version 2 (flag VER_0) 8 bytes of
 * extended flags when flag EXTENDED; a float4 bounding box of 2 values a
 * dimension when flag BBOX (geodetic: 3 dimensions); then the geometry: uint32
 * type (1: point), uint32 number of points (0: empty), and the point's x, y,
 * then z (flag Z), then m (flag M), as float8.
 */
#define GSER_Z 0x01
#define GSER_M 0x02
#define GSER_BBOX 0x04
#define GSER_GEODETIC 0x08
#define GSER_EXTENDED 0x10		/* version 2 only (version 1: read-only) */
#define GSER_VER_0 0x40
#define GSER_POINT 1

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
	if (is_named_type(basetype, "geometry", "geometry_in"))
		return PG_GPU_VEC_GEOMETRY;
	return PG_GPU_VEC_NONE;
}

/* IEEE binary16 to float (exact) */
static inline float
half_to_float(uint16 h)
{
	uint32		sign = (uint32) (h & 0x8000) << 16;
	uint32		e = (h >> 10) & 0x1f;
	uint32		m = h & 0x3ff;
	uint32		bits;
	float		f;

	if (e == 0)
	{
		f = (float) m * 0x1p-24f;	/* zero or subnormal: exact */
		memcpy(&bits, &f, sizeof(bits));
		bits |= sign;
	}
	else if (e == 31)
		bits = sign | 0x7f800000 | (m << 13);	/* infinity, or NaN (m != 0) */
	else
		bits = sign | ((e + 112) << 23) | (m << 13);	/* exponent bias 15 -> 127 */
	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* a row's name in messages: its id, else its place in the table */
static char *
row_name(const PgGpuRowSpec *spec, TupleTableSlot *slot)
{
	if (spec->idpos >= 0)
		return psprintf("row with %s = %s", NameStr(spec->idname), pg_gpu_slot_key_text(spec, slot));
	if (ItemPointerIsValid(&slot->tts_tid))
		return psprintf("row at ctid (%u,%u)", ItemPointerGetBlockNumber(&slot->tts_tid),
						ItemPointerGetOffsetNumber(&slot->tts_tid));
	return pstrdup("row");
}

/*
 * What a message about a vector names: the value (`what`, gpu_kmeans_predict's
 * argument or a column of its row), else the row of the relation (slot), or
 * its first non-NULL row (slot NULL: finding the length)
 */
static char *
value_name(const PgGpuRowSpec *spec, TupleTableSlot *slot, const char *what)
{
	if (what)
		return pstrdup(what);
	return psprintf("the %s of \"%s\"", slot ? row_name(spec, slot) : "first non-NULL row",
					NameStr(spec->relname));
}

/* " in column ..." after value_name, where it names a relation's row */
static char *
in_column(const PgGpuRowSpec *spec, const char *what)
{
	return what ? "" : psprintf(" in column \"%s\"", NameStr(spec->colname));
}

/*
 * A geometry's coordinates: 2 (x, y) or 3 (x, y, z; an m is left out), at
 * *data as float8, and its m in *m (may be NULL; NaN where it has none);
 * 0 for an empty point.  Anything but a point is an ERROR (22023) naming
 * the row (or `what`, see value_name).
 */
static int64
geometry_point(struct varlena *v, const char **data, double *m, const PgGpuRowSpec *spec,
			   TupleTableSlot *slot, const char *what)
{
	const uint8 *p = (const uint8 *) VARDATA(v);
	const uint8 *end = (const uint8 *) v + VARSIZE(v);
	uint8		flags = p[3];
	int			dims = 2 + ((flags & GSER_Z) != 0) + ((flags & GSER_M) != 0);
	uint32		type,
				npoints;

	p += 4;
	if ((flags & GSER_VER_0) && (flags & GSER_EXTENDED))
		p += 8;
	if (flags & GSER_BBOX)
		p += 2 * sizeof(float4) * ((flags & GSER_GEODETIC) ? 3 : dims);
	if (p + 8 > end)
		elog(ERROR, "pg_gpu: a geometry value of \"%s\" is shorter than its header says",
			 NameStr(spec->relname));
	memcpy(&type, p, 4);
	memcpy(&npoints, p + 4, 4);
	if (type != GSER_POINT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 what ? errmsg("%s is a geometry that is not a point", what) :
				 errmsg("%s has a geometry%s that is not a point",
						value_name(spec, slot, what), in_column(spec, what)),
				 what ? errhint("A model of points applies to points: pass ST_Centroid or ST_PointOnSurface of the shape.") :
				 errhint("k-means clusters points: pass a view with ST_Centroid(%s), or ST_PointOnSurface.",
						 NameStr(spec->colname))));
	if (m)
		*m = NAN;
	if (npoints == 0)
		return 0;
	if (p + 8 + dims * sizeof(float8) > end)
		elog(ERROR, "pg_gpu: a point of \"%s\" is shorter than its header says",
			 NameStr(spec->relname));
	*data = (const char *) p + 8;
	if (m && (flags & GSER_M))
		memcpy(m, p + 8 + (dims - 1) * sizeof(float8), sizeof(float8));
	return 2 + ((flags & GSER_Z) != 0);
}

/*
 * The vector's length, and its values (as stored: float4, float8 or
 * binary16) in *data; *has_nulls for arrays with NULL elements.  v is
 * detoasted already.  An array of more than one dimension is an ERROR
 * (2202E); an empty one has length 0, as has an empty point.
 */
static int64
vector_parts(PgGpuVecKind kind, struct varlena *v, const char **data, bool *has_nulls, double *m,
			 const PgGpuRowSpec *spec, TupleTableSlot *slot, const char *what)
{
	*has_nulls = false;
	if (m)
		*m = NAN;
	if (kind == PG_GPU_VEC_GEOMETRY)
		return geometry_point(v, data, m, spec, slot, what);
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
					 what ? errmsg("%s is a %d-dimensional array", what, ARR_NDIM(a)) :
					 errmsg("%s has a %d-dimensional array%s",
							value_name(spec, slot, what), ARR_NDIM(a), in_column(spec, what)),
					 what ? errhint("A row's values are a one-dimensional array.") :
					 errhint("A vector column holds one-dimensional arrays.")));
		*has_nulls = ARR_HASNULL(a) && array_contains_nulls(a);
		*data = ARR_DATA_PTR(a);
		return ARR_NDIM(a) == 0 ? 0 : ARR_DIMS(a)[0];
	}
}

/*
 * the length of the first usable vector of src's column (-1: none; 0: an
 * empty array), and (geometry) the M of its point into *m (NaN: none)
 */
static int64
first_vector_len(const PgGpuSource *src, const char *limit, double *m)
{
	/* the first non-NULL row (geometry: the first point that is not empty) */
	char	   *sql = psprintf("SELECT %s FROM %s WHERE %s IS NOT NULL%s",
							   quote_identifier(src->colnames[0]), src->qualname,
							   quote_identifier(src->colnames[0]), limit);
	int64		len = -1;
	PgGpuRowSpec *spec = palloc0(sizeof(PgGpuRowSpec));	/* for its messages */
	Portal		portal;

	namestrcpy(&spec->relname, src->relname);
	namestrcpy(&spec->colname, src->colnames[0]);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	portal = SPI_cursor_open_with_args(NULL, sql, 0, NULL, NULL, NULL, true, 0);
	while (len <= 0)
	{
		SPI_cursor_fetch(portal, true, len < 0 ? 1 : 100);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed && len <= 0; r++)
		{
			bool		isnull;
			Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);
			const char *data;
			bool		nulls;

			if (!isnull)
				len = vector_parts(src->veckind, PG_DETOAST_DATUM(d), &data, &nulls, m, spec, NULL, NULL);
			if (len == 0 && src->veckind != PG_GPU_VEC_GEOMETRY)
				break;
		}
		SPI_freetuptable(SPI_tuptable);
		if (len == 0 && src->veckind != PG_GPU_VEC_GEOMETRY)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	SPI_finish();
	return len == 0 && src->veckind == PG_GPU_VEC_GEOMETRY ? -1 : len;
}

int
pg_gpu_vector_dims(const PgGpuSource *src, bool *has_m)
{
	int64		len = -1;
	double		m = NAN;

	/*
	 * A Citus table: Citus gathers a cursor's whole result before its first
	 * row, so its first rows are asked for first (the rest only when every
	 * one of them is an empty point)
	 */
	if (pg_gpu_citus_method(src->relid) != 0)
		len = first_vector_len(src, " LIMIT 1000", &m);
	if (len < 0)
		len = first_vector_len(src, "", &m);
	*has_m = !isnan(m);
	if (len < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" has no usable rows", src->relname),
				 errdetail(src->veckind == PG_GPU_VEC_GEOMETRY ?
						   "Column \"%s\" is NULL or an empty point in every row, or the relation has no rows." :
						   "Column \"%s\" is NULL in every row, or the relation has no rows.",
						   src->colnames[0])));
	if (len == 0 || len > PG_GPU_MAX_VECTOR_DIMS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("vectors of column \"%s\" have %lld elements; k-means takes 1 to %d",
						src->colnames[0], (long long) len, PG_GPU_MAX_VECTOR_DIMS)));
	return (int) len;
}

/*
 * A vector's d values as floats at dst[j * stride] (float4's: halfvec's
 * go to halves, put_halves); false when one is NaN or infinite.  The test
 * is on the values' exponent bits, all ones only there: the least of their
 * complements is 0 then, and the loop has no branch.
 */
static bool
put_floats(PgGpuVecKind kind, const char *data, int64 d, float *dst, int64 stride)
{
	if (kind == PG_GPU_VEC_FLOAT4 || kind == PG_GPU_VEC_PGVECTOR)
	{
		uint32		least = 0x7f800000;

		for (int64 j = 0; j < d; j++)
		{
			uint32		bits;

			memcpy(&bits, data + sizeof(float) * j, sizeof(bits));
			least = Min(least, ~bits & 0x7f800000);
			memcpy(&dst[j * stride], &bits, sizeof(bits));
		}
		return least != 0;
	}
	elog(ERROR, "pg_gpu: vectors of kind %d read as float32", (int) kind);
	return false;
}

/*
 * A halfvec's d halves as they are stored (binary16 bits) at dst[j *
 * stride], for a FLOAT16 data set; false when one is NaN or infinite (as
 * put_floats)
 */
static bool
put_halves(const char *data, int64 d, uint16 *dst, int64 stride)
{
	const uint16 *h = (const uint16 *) data;
	uint16		least = 0x7c00;

	for (int64 j = 0; j < d; j++)
		least = Min(least, ~h[j] & 0x7c00);
	if (stride == 1)
		memcpy(dst, h, sizeof(uint16) * d);
	else
		for (int64 j = 0; j < d; j++)
			dst[j * stride] = h[j];
	return least != 0;
}

/* the same as doubles (cosine's rows, float8[] and points); the kind decided outside the loop */
#define PUT_DOUBLES(value) \
	for (int64 j = 0; j < d; j++) \
	{ \
		double		v = (value); \
		uint64		bits; \
\
		memcpy(&bits, &v, sizeof(bits)); \
		least = Min(least, ~bits & UINT64CONST(0x7ff0000000000000)); \
		dst[j * stride] = v; \
	}

static bool
put_doubles(PgGpuVecKind kind, const char *data, int64 d, double *dst, int64 stride)
{
	uint64		least = UINT64CONST(0x7ff0000000000000);

	if (kind == PG_GPU_VEC_FLOAT8 || kind == PG_GPU_VEC_GEOMETRY)
		PUT_DOUBLES(((const float8 *) data)[j])
	else if (kind == PG_GPU_VEC_HALFVEC)
		PUT_DOUBLES(half_to_float(((const uint16 *) data)[j]))
	else
		PUT_DOUBLES(((const float4 *) data)[j])
	return least != 0;
}

/* the row just put (whichever of the three is not NULL) is zero: no direction */
static bool
zero_row(const double *dst, const float *dst32, const uint16 *dst16, int64 stride, int64 d)
{
	for (int64 j = 0; j < d; j++)
		if (dst16 ? (dst16[j * stride] & 0x7fff) != 0 : dst32 ? dst32[j * stride] != 0 : dst[j * stride] != 0)
			return false;
	return true;
}

/*
 * the process's time detoasting vectors in pg_gpu_vector_row: a parallel
 * worker's (from 0: a worker reads once) for its read's DEBUG2 line
 */
instr_time	pg_gpu_detoast_time;
bool		pg_gpu_detoast_timed;

/*
 * VECTOR: the row's vector as values j * cap + i of the part (i * d + j
 * where it is rowwise), or the row
 * skipped (NULL vector, NULL element, NaN or an infinity; with normalize, a
 * zero vector); another length than the first row's is an ERROR (22000).
 */
bool
pg_gpu_vector_row(const PgGpuRowSpec *spec, TupleTableSlot *slot, PgGpuPart *part)
{
	int			a = spec->pos[0];
	int64		i = part->nrows;
	int64		id = 0;
	int64		d = spec->veclen;
	/*
	 * the row's values go to pend (row-major), else to the part's columns,
	 * or its rows (rowwise): at its value 0, stride apart
	 */
	char	   *pend = pg_gpu_part_pend(part);
	int64		stride = pend || part->rowwise ? 1 : part->cap;
	int64		at = pend ? part->npend * d : part->rowwise ? i * d : i;
	double	   *dst = part->dtype != PGGPU_FLOAT64 ? NULL : (pend ? (double *) pend : part->values) + at;
	float	   *dst32 = part->dtype != PGGPU_FLOAT32 ? NULL : (pend ? (float *) pend : part->values32) + at;
	uint16	   *dst16 = part->dtype != PGGPU_FLOAT16 ? NULL : (pend ? (uint16 *) pend : part->values16) + at;
	struct varlena *raw,
			   *v;
	const char *data;
	bool		nulls;
	int64		len;
	double		m,
				w = 1;

	if (spec->idpos >= 0 && !pg_gpu_slot_key(spec, slot, part, &id))
		return false;
	if (slot->tts_isnull[a])
		goto skip;
	/* (a weight column's NULL skips the row before its vector is read) */
	if (spec->weighted && !spec->mweights && !pg_gpu_slot_weight(spec, slot, NAN, &w))
		goto skip;
	raw = (struct varlena *) DatumGetPointer(slot->tts_values[a]);
	if (pg_gpu_detoast_timed && VARATT_IS_EXTENDED(raw))
	{
		instr_time	t0,
					t1;

		INSTR_TIME_SET_CURRENT(t0);
		v = PG_DETOAST_DATUM(slot->tts_values[a]);
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_ACCUM_DIFF(pg_gpu_detoast_time, t1, t0);
	}
	else
		v = PG_DETOAST_DATUM(slot->tts_values[a]);
	len = vector_parts(spec->veckind, v, &data, &nulls, &m, spec, slot, NULL);
	if (len == 0 && spec->veckind == PG_GPU_VEC_GEOMETRY)
		goto skip_free;			/* an empty point: unusable, as a NULL */
	if (len != d && spec->veckind == PG_GPU_VEC_GEOMETRY)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("points of column \"%s\" of \"%s\" mix 2-D and 3-D",
						NameStr(spec->colname), NameStr(spec->relname)),
				 errdetail("The %s has %lld coordinates; the first point read has %lld.",
						   row_name(spec, slot), (long long) len, (long long) d),
				 errhint("Cluster one kind: a view with ST_Force2D(%s), or ST_Force3D.",
						 NameStr(spec->colname))));
	if (len != d)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("vectors of column \"%s\" of \"%s\" differ in length",
						NameStr(spec->colname), NameStr(spec->relname)),
				 errdetail("The %s has %lld elements; the first row read has %lld.",
						   row_name(spec, slot), (long long) len, (long long) d),
				 errhint("Every vector of one k-means call has the same length.")));
	if (nulls)
		goto skip_free;
	if (spec->mweights && !pg_gpu_slot_weight(spec, slot, m, &w))
		goto skip_free;
	/* float32 values kept as floats, halves as halves (their own precision: a FLOAT32 or FLOAT16 set's) */
	if (dst16 && spec->veckind != PG_GPU_VEC_HALFVEC)
		elog(ERROR, "pg_gpu: vectors of kind %d read as halves", (int) spec->veckind);
	if (dst16 ? !put_halves(data, d, dst16, stride) :
		dst32 ? !put_floats(spec->veckind, data, d, dst32, stride) :
		!put_doubles(spec->veckind, data, d, dst, stride))
		goto skip_free;
	Assert(dst || !spec->normalize);	/* (a cosine read is of doubles) */
	if (spec->normalize && !pggpu_unit_row(dst, stride, (int) d))
		goto skip_free;
	if (spec->skip_zero && zero_row(dst, dst32, dst16, stride, d))
		goto skip_free;
	if (v != raw)
		pfree(v);
	part->ids[i] = id;
	if (part->weights)
		part->weights[i] = w;
	part->nrows++;
	if (pend && ++part->npend == PG_GPU_PART_PEND)
		pg_gpu_part_flush(part);
	return true;
skip_free:
	if (v != raw)
		pfree(v);
skip:
	part->ids[part->cap - 1 - part->nbad++] = id;
	return true;
}

/*
 * One value of a vector column (kind) as doubles (a scalar assignment): its
 * length, which must be d (else ERROR naming what), the values into out;
 * -1 when it has a NULL element (an empty point: no values).
 */
int64
pg_gpu_vector_values(PgGpuVecKind kind, Datum value, int64 d, double *out, const char *what)
{
	struct varlena *v = PG_DETOAST_DATUM(value);
	PgGpuRowSpec *spec = palloc0(sizeof(PgGpuRowSpec));
	const char *data;
	bool		nulls;
	int64		len;

	/* messages name the value (what), not a relation's row */
	len = vector_parts(kind, v, &data, &nulls, NULL, spec, NULL, what);
	if (nulls || (len == 0 && kind == PG_GPU_VEC_GEOMETRY))
		return -1;
	if (len != d)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s has %lld values; the model has %lld dimensions", what, (long long) len, (long long) d),
				 errhint("Apply a model to rows of the shape it was fit on.")));
	for (int64 j = 0; j < d; j++)
		out[j] = kind == PG_GPU_VEC_FLOAT8 || kind == PG_GPU_VEC_GEOMETRY ? ((const float8 *) data)[j] :
			kind == PG_GPU_VEC_HALFVEC ? half_to_float(((const uint16 *) data)[j]) :
			((const float4 *) data)[j];
	return len;
}
