/*
 * read.c - which columns of a relation to use, and reading its rows into a
 * compute data set.
 *
 * A table that a plain scan reads as a SELECT would is read by parallel
 * workers in block order (scan.c, with the executor's privilege check);
 * anything else (views, row-level security, foreign tables, tables of other
 * access methods or that Citus manages, ...) by running a generated SELECT
 * through SPI, so that everything a SELECT honours applies.  Either way the
 * tuples are not materialised: they are converted into parts (rows.c) that
 * go straight into the structure-of-arrays staging buffer of the data set,
 * which hands full batches to the device while the scan goes on.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/relation.h"
#include "access/tupdesc.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "optimizer/plancat.h"
#include "portability/instr_time.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "pg_gpu.h"


/* the single column of the primary key, or -1 */
static int
primary_key_column(Relation rel)
{
	Oid			pk = pg_gpu_primary_key_index(rel);
	Relation	idx;
	int			col = -1;

	if (!OidIsValid(pk))
		return -1;
	idx = index_open(pk, AccessShareLock);
	if (idx->rd_index->indnatts == 1 && idx->rd_index->indkey.values[0] > 0)
		col = idx->rd_index->indkey.values[0] - 1;
	index_close(idx, AccessShareLock);
	return col;
}


/*
 * pg_gpu.max_memory for rows of src held as dtype: 2, 4 or 8 bytes a value
 * (pggpu_dtype_held_bytes), 8 a weight where the rows weigh (the data
 * set's), 8 an id (and its bytes where passed by reference:
 * pg_gpu_key_bytes), 12 for the label and distance; the detail reads
 * "<pre><rows> rows<post>, ...".
 */
static void
check_rows_memory(const PgGpuSource *src, pggpu_dtype dtype, double rows, bool ids, const char *pre,
				  const char *post)
{
	int			vb = pggpu_dtype_held_bytes(dtype, src->ncols);
	int			wb = PG_GPU_WEIGHTED(src) ? (int) sizeof(double) : 0;
	double		kb = ids ? pg_gpu_key_bytes(src) : 0;
	double		rb = (double) vb * src->ncols + wb + kb + 12;

	pg_gpu_check_memory(rows * rb, src->relname,
						"%s%.0f rows%s, %.0f bytes each (%d per value, %s%s12 for the label and distance).",
						pre, rows, post, rb, vb, wb ? "8 for the weight, " : "",
						ids ? psprintf("%.0f for the id, ", kb) : "");
}

pggpu_dtype
pg_gpu_source_dtype(const PgGpuSource *src, bool standardized)
{
	if (src->normalize || standardized)
		return PGGPU_FLOAT64;
	switch (src->veckind)
	{
		case PG_GPU_VEC_FLOAT4:
		case PG_GPU_VEC_PGVECTOR:
			return PGGPU_FLOAT32;
		case PG_GPU_VEC_HALFVEC:
			return PGGPU_FLOAT16;
		case PG_GPU_VEC_NONE:
			for (int j = 0; j < src->natts; j++)
				if (src->coltypes[j] != FLOAT4OID && src->coltypes[j] != INT2OID)
					return PGGPU_FLOAT64;
			return PGGPU_FLOAT32;
		default:
			return PGGPU_FLOAT64;
	}
}

void
pg_gpu_check_sample_memory(const PgGpuSource *src, pggpu_dtype dtype, int64 rows)
{
	check_rows_memory(src, dtype, rows, false, "A sample of ", " so far");
}

void
pg_gpu_check_label_memory(const PgGpuSource *src, double rows, const char *pre, const char *post)
{
	double		rb = pg_gpu_key_bytes(src) + 12;

	pg_gpu_check_memory(rows * rb, src->relname,
						"%s%.0f rows%s, %.0f bytes each (an id, a label and a distance; the rows themselves pass a chunk at a time).",
						pre, rows, post, rb);
}

/*
 * "a, b": names quoted as identifiers, as in a query; literals: "'a', 'b'",
 * as in an ARRAY[...] of text
 */
char *
pg_gpu_column_list(char **names, int n, bool literals)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int j = 0; j < n; j++)
	{
		if (j > 0)
			appendStringInfoString(&s, ", ");
		appendStringInfoString(&s, literals ? quote_literal_cstr(names[j]) : quote_identifier(names[j]));
	}
	return s.data;
}

/*
 * ERROR (42702) where columns => NULL would take the numeric columns of a
 * relation that also has a vector column (an embedding beside a score or a
 * year: the vectors are usually what is meant); the message lists the
 * columns and the hint the columns => to pass for each choice
 */
static void
defaults_ambiguous(const PgGpuSource *src, TupleDesc td, int idcol)
{
	StringInfoData vecs,
				choices;
	int			nvec = 0;

	initStringInfo(&vecs);
	initStringInfo(&choices);
	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		if (att->attisdropped || a == idcol ||
			pg_gpu_vector_kind(getBaseType(att->atttypid)) == PG_GPU_VEC_NONE)
			continue;
		appendStringInfo(&vecs, "%s%s", nvec > 0 ? ", " : "", quote_identifier(NameStr(att->attname)));
		appendStringInfo(&choices, "columns => ARRAY[%s] for the vectors of %s, ",
						 quote_literal_cstr(NameStr(att->attname)), quote_identifier(NameStr(att->attname)));
		nvec++;
	}
	if (nvec == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_AMBIGUOUS_COLUMN),
			 errmsg("relation \"%s\" has both numeric and vector columns: pass columns => to say which to use",
					src->relname),
			 errdetail("Numeric: %s. Vector: %s.", pg_gpu_column_list(src->colnames, src->ncols, false), vecs.data),
			 errhint("Pass %sor columns => ARRAY[%s] for the numeric columns.", choices.data,
					 pg_gpu_column_list(src->colnames, src->ncols, true))));
}

/* ERROR: a vector column beside other columns (or a second one) */
static void
vector_alone(const PgGpuSource *src, const char *vecname)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("vector column \"%s\" cannot be combined with other columns", vecname),
			 errhint("Pass columns => ARRAY['%s'] alone, or scalar columns only.", vecname)));
}

void
pg_gpu_resolve_source(Oid relid, ArrayType *columns, text *id_column, Oid keytype,
					  bool id_required, bool normalize, PgGpuSource *src)
{
	pg_gpu_resolve_sample(relid, columns, id_column, keytype, id_required, normalize, 0, src);
}

void
pg_gpu_resolve_sample(Oid relid, ArrayType *columns, text *id_column, Oid keytype,
					  bool id_required, bool normalize, int64 sample, PgGpuSource *src)
{
	Relation	rel;
	TupleDesc	td;
	int			idcol = -1;
	int			maxcols;

	memset(src, 0, sizeof(*src));
	src->relid = relid;
	rel = pg_gpu_open_relation(relid, &src->relname, &src->qualname);
	td = RelationGetDescr(rel);
	maxcols = td->natts;

	/* the id column: named, else a single-column primary key */
	if (id_column != NULL)
	{
		char	   *name = text_to_cstring(id_column);

		idcol = pg_gpu_find_column(td, name);
		if (idcol < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist", name, src->relname),
					 errhint("id_column must name a column of the relation that identifies each row.")));
		if (!pg_gpu_key_fits(getBaseType(TupleDescAttr(td, idcol)->atttypid), keytype))
			pg_gpu_key_mismatch(src, td, idcol, keytype, true);
	}
	else
	{
		idcol = primary_key_column(rel);
		/*
		 * a key of another type: an error where ids are wanted (or their type
		 * was given), else no id (gpu_kmeans_fit's default columns as before
		 * keys of any type)
		 */
		if (idcol >= 0 && !pg_gpu_key_fits(getBaseType(TupleDescAttr(td, idcol)->atttypid), keytype))
		{
			if (id_required || OidIsValid(keytype))
				pg_gpu_key_mismatch(src, td, idcol, keytype, false);
			idcol = -1;
		}
		if (idcol < 0 && id_required)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("relation \"%s\" has no single-column primary key to identify rows",
							src->relname),
					 errhint("Pass id_column => 'name' naming a column that identifies each row (for a key "
							 "that is not an integer, id_type => NULL:: its type too).")));
	}
	src->idatt = idcol;
	src->keytype = !OidIsValid(keytype) ? INT8OID : keytype;
	if (idcol >= 0)
	{
		src->idname = pstrdup(NameStr(TupleDescAttr(td, idcol)->attname));
		src->idtype = getBaseType(TupleDescAttr(td, idcol)->atttypid);
		src->idcoll = TupleDescAttr(td, idcol)->attcollation;
		if (keytype == ANYELEMENTOID)
			src->keytype = src->idtype;
	}

	src->colnames = palloc(sizeof(char *) * Max(maxcols, 1));
	src->coltypes = palloc(sizeof(Oid) * Max(maxcols, 1));
	src->colatts = palloc(sizeof(int) * Max(maxcols, 1));
	if (columns != NULL)
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		if (ARR_NDIM(columns) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("columns must be a one-dimensional array of column names")));
		deconstruct_array(columns, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		if (n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("columns must not be empty"),
					 errhint("Name at least one numeric column, or pass NULL to use every numeric column.")));
		src->colnames = repalloc(src->colnames, sizeof(char *) * n);
		src->coltypes = repalloc(src->coltypes, sizeof(Oid) * n);
		src->colatts = repalloc(src->colatts, sizeof(int) * n);
		for (int i = 0; i < n; i++)
		{
			char	   *name;
			int			a;
			Oid			t;

			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("columns must not contain NULL")));
			name = TextDatumGetCString(elems[i]);
			a = pg_gpu_find_column(td, name);
			if (a < 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of relation \"%s\" does not exist", name, src->relname)));
			t = getBaseType(TupleDescAttr(td, a)->atttypid);
			if (pg_gpu_vector_kind(t) != PG_GPU_VEC_NONE)
			{
				if (n > 1)
					vector_alone(src, name);
				src->veckind = pg_gpu_vector_kind(t);
			}
			else if (!pg_gpu_is_numeric_type(t))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" is of type %s, not a numeric or vector type", name,
								format_type_be(TupleDescAttr(td, a)->atttypid)),
						 errhint("Use smallint, integer, bigint, real, double precision or numeric columns, or one real[], double precision[], vector, halfvec or PostGIS geometry (points) column, or cast in a view.")));
			for (int j = 0; j < src->ncols; j++)
				if (strcmp(src->colnames[j], name) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_DUPLICATE_COLUMN),
							 errmsg("column \"%s\" is named more than once in columns", name)));
			src->colnames[src->ncols] = name;
			src->colatts[src->ncols] = a;
			src->coltypes[src->ncols++] = t;
		}
	}
	else
	{
		for (int a = 0; a < td->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(td, a);
			Oid			t;

			/* a dropped column's type is gone (atttypid 0): test it first */
			if (att->attisdropped || a == idcol)
				continue;
			t = getBaseType(att->atttypid);
			if (!pg_gpu_is_numeric_type(t))
				continue;
			src->colnames[src->ncols] = pstrdup(NameStr(att->attname));
			src->colatts[src->ncols] = a;
			src->coltypes[src->ncols++] = t;
		}
		/* numeric columns beside a vector column: which is meant is not for us to guess */
		if (src->ncols > 0)
			defaults_ambiguous(src, td, idcol);
		/* no numeric column: the one vector column, if there is exactly one */
		for (int a = 0; a < td->natts && src->ncols == 0; a++)
		{
			Form_pg_attribute att = TupleDescAttr(td, a);
			PgGpuVecKind kind;

			if (att->attisdropped || (kind = pg_gpu_vector_kind(getBaseType(att->atttypid))) == PG_GPU_VEC_NONE)
				continue;
			for (int b = a + 1; b < td->natts; b++)
				if (!TupleDescAttr(td, b)->attisdropped &&
					pg_gpu_vector_kind(getBaseType(TupleDescAttr(td, b)->atttypid)) != PG_GPU_VEC_NONE)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("relation \"%s\" has several vector columns (\"%s\", \"%s\") and no numeric ones",
									src->relname, NameStr(att->attname),
									NameStr(TupleDescAttr(td, b)->attname)),
							 errhint("Pass columns => ARRAY['%s'] naming the one to use.", NameStr(att->attname))));
			src->veckind = kind;
			src->colnames[0] = pstrdup(NameStr(att->attname));
			src->colatts[0] = a;
			src->coltypes[src->ncols++] = getBaseType(att->atttypid);
		}
		if (src->ncols == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("relation \"%s\" has no numeric or vector columns to use", src->relname),
					 errhint("Add numeric columns, or pass columns => ARRAY['...'] naming them.")));
		src->defaulted = true;
		/* the choice is the table's, not the caller's: make it visible */
		ereport(NOTICE,
				(src->veckind != PG_GPU_VEC_NONE ?
				 errmsg("pg_gpu: using the vector column %s of \"%s\"",
						pg_gpu_column_list(src->colnames, 1, false), src->relname) :
				 errmsg_plural("pg_gpu: using the numeric column %s of \"%s\"",
							   "pg_gpu: using the numeric columns %s of \"%s\"", src->ncols,
							   pg_gpu_column_list(src->colnames, src->ncols, false), src->relname),
				 errhint("Pass columns => ARRAY[%s] to choose the columns yourself.",
						 pg_gpu_column_list(src->colnames, src->ncols, true))));
	}
	src->natts = src->ncols;
	src->normalize = normalize;
	/* a vector column: as many values a row as its first vector has */
	if (src->veckind != PG_GPU_VEC_NONE)
		src->ncols = pg_gpu_vector_dims(src, &src->first_m);

	src->expected_rows = pg_gpu_estimate_rows(rel);
	pg_gpu_check_source_memory(src, sample);
	relation_close(rel, NoLock);
}

/*
 * Before anything is allocated, what src's rows will take by the table's
 * statistics (sample: pg_gpu_resolve_sample's), within pg_gpu.max_memory;
 * the rows are counted again as they come.  Again once the rows' weights
 * are known (8 bytes a row more).
 */
void
pg_gpu_check_source_memory(const PgGpuSource *src, int64 sample)
{
	if (sample < 0)
		;						/* streamed: the caller checks what it keeps */
	else if (sample > 0)
	{
		/* (unknown: the sample is checked as it grows) */
		if (src->expected_rows > 0)
			check_rows_memory(src, pg_gpu_source_dtype(src, false), Min(src->expected_rows, sample), false,
							  "A sample of about ", "");
	}
	else if (src->expected_rows > 0)
		check_rows_memory(src, pg_gpu_source_dtype(src, false), src->expected_rows, src->idname != NULL,
						  "About ", " by the table's statistics");
}

/* ---- the receiver: rows of a SELECT into parts ------------------------------ */

/* the receiver's part handed over, a new one begun */
static void
receiver_next_part(PgGpuPartReceiver *r)
{
	pg_gpu_part_flush(&r->part);
	r->consume(r->arg, &r->part);
	MemoryContextReset(r->rowcxt);
	pg_gpu_part_init(&r->part, r->part.buf, r->part.bytes, r->part.len, true, r->spec->dtype,
					 r->spec->keylen, r->spec->rowwise, r->spec->weighted);
}

static bool
part_receive(TupleTableSlot *slot, DestReceiver *self)
{
	PgGpuPartReceiver *r = (PgGpuPartReceiver *) self;
	MemoryContext old;

	if (pg_gpu_part_full(&r->part))
		receiver_next_part(r);
	old = MemoryContextSwitchTo(r->rowcxt);
	if (!pg_gpu_row_to_part(r->spec, slot, &r->part))
	{
		/* its id's bytes did not fit: into the next part */
		MemoryContextSwitchTo(old);
		receiver_next_part(r);
		old = MemoryContextSwitchTo(r->rowcxt);
		if (!pg_gpu_row_to_part(r->spec, slot, &r->part))
			elog(ERROR, "pg_gpu: a row does not fit an empty part");
	}
	MemoryContextSwitchTo(old);
	return true;
}

void
pg_gpu_part_receiver_init(PgGpuPartReceiver *r, const PgGpuRowSpec *spec,
						  PgGpuPartConsumer consume, void *arg)
{
	memset(r, 0, sizeof(*r));
	pg_gpu_receiver_init(&r->pub, part_receive);
	r->spec = spec;
	r->consume = consume;
	r->arg = arg;
	r->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "pg_gpu rows",
									  ALLOCSET_DEFAULT_SIZES);
	pg_gpu_part_init(&r->part, palloc(PG_GPU_PART_BYTES), PG_GPU_PART_BYTES,
					 PG_GPU_SPEC_LEN(spec), true, spec->dtype, spec->keylen, spec->rowwise, spec->weighted);
}

void
pg_gpu_part_receiver_finish(PgGpuPartReceiver *r)
{
	pg_gpu_part_flush(&r->part);
	if (r->part.nrows + r->part.nbad > 0)
		r->consume(r->arg, &r->part);
	pfree(r->part.buf);
	MemoryContextDelete(r->rowcxt);
}


/* ---- k-means data: parts into the data set's staging buffers ---------------- */

/* a batch as pushed: the part it went to, and where in it */
typedef struct BatchAt
{
	int			part;
	int64		at;
	int64		rows;
} BatchAt;

typedef struct SoaSink
{
	const PgGpuSource *src;
	PgGpuData  *data;
	pggpu_data *ds;				/* the part being filled (the next share's) */
	bool		want_ids;
	double	   *batch;			/* the part's staging batch: doubles, */
	float	   *batch32;		/* or floats (a FLOAT32 set's), */
	uint16	   *batch16;		/* or halves (a FLOAT16 set's), the others NULL */
	int64		batch_rows;
	int64		fill;
	bool		by_rows;		/* the batches filled by rows, as the parts come (src->rowwise) */
	MemoryContext cxt;			/* where the id arrays live */
	PgGpuKeys  *keys;			/* and what they stand for */
	int64	   *ids;
	int64		nids,
				capids;
	int64	   *bad;
	int64		nbad,
				capbad;
	int64		ninvalid;
	/* with ids and several shares: each batch's place, in read order */
	BatchAt    *batches;
	int64		nbatches,
				capbatches;
	instr_time	flushing;		/* in flush_batch (DEBUG2) */
} SoaSink;

/* room for n more ids in *arr */
static void
reserve_ids(SoaSink *s, int64 **arr, int64 have, int64 *cap, int64 n)
{
	int64		ncap = *cap ? *cap : 1024;

	if (have + n <= *cap)
		return;
	while (ncap < have + n)
		ncap *= 2;
	*arr = *arr ? repalloc_huge(*arr, sizeof(int64) * ncap)
		: MemoryContextAllocHuge(s->cxt, sizeof(int64) * ncap);
	*cap = ncap;
}

/* the staging batch's values, of whichever type */
static inline char *
sink_values(SoaSink *s)
{
	return s->batch16 ? (char *) s->batch16 : s->batch32 ? (char *) s->batch32 : (char *) s->batch;
}

/* s->ds's staging batch's weights (a weighted read's) */
static double *
sink_weights(SoaSink *s)
{
	double	   *w = pggpu_data_batch_weights(s->ds);

	if (w == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory for the rows' weights")));
	return w;
}

/* s->ds's staging batch */
static void
sink_batch(SoaSink *s)
{
	s->batch = pggpu_data_batch(s->ds);
	s->batch32 = pggpu_data_batch_f32(s->ds);
	s->batch16 = pggpu_data_batch_f16(s->ds);
	s->batch_rows = pggpu_data_batch_rows(s->ds);
}

/*
 * n values into column j of the batch from its row at, as the batch holds
 * them (a FLOAT32 set's values are float32 values: exact)
 */
static inline void
sink_column(SoaSink *s, int j, int64 at, const double *x, int64 n)
{
	/* (halves come in parts of halves only: a FLOAT16 set is a halfvec column's) */
	if (s->batch16)
		elog(ERROR, "pg_gpu: doubles read into a float16 data set");
	if (s->batch32)
	{
		float	   *col = s->batch32 + j * s->batch_rows + at;

		for (int64 r = 0; r < n; r++)
			col[r] = (float) x[r];
	}
	else
		memcpy(s->batch + j * s->batch_rows + at, x, sizeof(double) * n);
}

/* the batch's rows to the data set, as they were filled */
static pggpu_status
push(SoaSink *s, pggpu_error *err)
{
	return s->by_rows ? pggpu_data_push_by_rows(s->ds, s->fill, err) : pggpu_data_push(s->ds, s->fill, err);
}

static void
flush_batch(SoaSink *s)
{
	pggpu_error err = {0};

	pggpu_status st;
	int64		have = pggpu_data_rows(s->ds);

	CHECK_FOR_INTERRUPTS();
	/* before the push allocates room for these rows */
	check_rows_memory(s->src, s->data->wide ? PGGPU_FLOAT64 : pggpu_data_dtype(s->ds),
					  (double) (pg_gpu_data_rows(s->data) + s->fill),
					  s->want_ids, "", " read so far");
	/*
	 * A full part (pg_gpu.kmeans_gpu_memory), or a GPU whose memory the part
	 * filled: the part parked, the batch into a new one of its share (the
	 * batches of every part but the last are whole, so a part never takes
	 * rows after a partial batch)
	 */
	st = s->data->part_rows > 0 && have > 0 && have + s->fill > s->data->part_rows ?
		PGGPU_ERR_GPU_MEMORY : push(s, &err);
	if (st == PGGPU_ERR_GPU_MEMORY && have > 0)
	{
		char	   *old = sink_values(s);
		int64		old_rows = s->batch_rows;
		size_t		size = pggpu_dtype_bytes(pggpu_data_dtype(s->ds));

		const double *old_w = s->src->wname || s->src->mweights ? pggpu_data_batch_weights(s->ds) : NULL;

		s->ds = pg_gpu_data_next_part(s->data);
		sink_batch(s);
		if (old_w)
			memcpy(sink_weights(s), old_w, sizeof(double) * s->fill);
		if (s->batch_rows != old_rows)
			elog(ERROR, "pg_gpu: a part of batches of %lld rows after one of %lld",
				 (long long) s->batch_rows, (long long) old_rows);
		if (s->by_rows)
			memcpy(sink_values(s), old, size * s->fill * s->src->ncols);
		else
			for (int j = 0; j < s->src->ncols; j++)
				memcpy(sink_values(s) + j * s->batch_rows * size, old + j * old_rows * size, size * s->fill);
		have = 0;
		st = push(s, &err);
	}
	if (st != PGGPU_OK)
		pg_gpu_raise(&err);
	if (s->want_ids && s->data->nshares > 1)
	{
		if (s->nbatches == s->capbatches)
		{
			s->capbatches = Max(s->capbatches * 2, 64);
			s->batches = s->batches ? repalloc_huge(s->batches, sizeof(BatchAt) * s->capbatches)
				: MemoryContextAllocHuge(s->cxt, sizeof(BatchAt) * s->capbatches);
		}
		s->batches[s->nbatches].part = s->data->share_part[s->data->next_share];
		s->batches[s->nbatches].rows = s->fill;
		s->batches[s->nbatches++].at = have;
	}
	pg_gpu_progress(false, "reading, %lld rows", (long long) pg_gpu_data_rows(s->data));
	s->fill = 0;
	/* the next batch to the next share */
	pg_gpu_data_next_share(s->data);
	s->ds = pg_gpu_data_filling(s->data);
	sink_batch(s);
}

/*
 * The ids (read order) put in the data's order, parts one after another:
 * a batch's rows where it went (with several shares they differ)
 */
/* flush_batch, its time counted (the DEBUG2 line of pg_gpu_sink_end) */
static void
timed_flush(SoaSink *s)
{
	instr_time	t0,
				t1;

	INSTR_TIME_SET_CURRENT(t0);
	flush_batch(s);
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_ACCUM_DIFF(s->flushing, t1, t0);
}

static void
ids_in_part_order(SoaSink *s)
{
	PgGpuData  *data = s->data;
	int64	   *base = palloc(sizeof(int64) * data->nparts);
	int64	   *out;
	int64		r = 0;

	for (int i = 0; i < data->nparts; i++)
		base[i] = i == 0 ? 0 : base[i - 1] + pggpu_data_rows(data->parts[i - 1]);
	out = MemoryContextAllocHuge(s->cxt, sizeof(int64) * Max(s->nids, 1));
	for (int64 b = 0; b < s->nbatches; b++)
	{
		const BatchAt *ba = &s->batches[b];

		memcpy(out + base[ba->part] + ba->at, s->ids + r, sizeof(int64) * ba->rows);
		r += ba->rows;
	}
	Assert(r == s->nids);
	if (s->ids)					/* NULL when no row was usable */
		pfree(s->ids);
	s->ids = out;
	pfree(base);
}

static void
soa_consume(void *arg, const PgGpuPart *p)
{
	SoaSink    *s = (SoaSink *) arg;
	int			d = s->src->ncols;
	size_t		size = pggpu_dtype_bytes(p->dtype);

	if (p->rowwise != s->by_rows || (s->by_rows && p->dtype != pggpu_data_dtype(s->ds)))
		elog(ERROR, "pg_gpu: a part by %s of type %d into batches by %s of type %d",
			 p->rowwise ? "rows" : "columns", (int) p->dtype, s->by_rows ? "rows" : "columns",
			 (int) pggpu_data_dtype(s->ds));
	for (int64 done = 0; done < p->nrows;)
	{
		int64		n = Min(p->nrows - done, s->batch_rows - s->fill);

		/* by rows: the part's rows as they are (the device turns them) */
		if (s->by_rows)
			memcpy(sink_values(s) + size * s->fill * d,
				   (const char *) pg_gpu_part_values(p) + size * done * d, size * n * d);
		/* (float and half parts go to a set of their type's batch: pg_gpu_read_sources) */
		for (int j = 0; j < d && !s->by_rows; j++)
			if (p->dtype == PGGPU_FLOAT16)
				memcpy(s->batch16 + j * s->batch_rows + s->fill, p->values16 + j * p->cap + done,
					   sizeof(uint16) * n);
			else if (p->dtype == PGGPU_FLOAT32)
				memcpy(s->batch32 + j * s->batch_rows + s->fill, p->values32 + j * p->cap + done,
					   sizeof(float) * n);
			else
				sink_column(s, j, s->fill, p->values + j * p->cap + done, n);
		if (p->weights)
			memcpy(sink_weights(s) + s->fill, p->weights + done, sizeof(double) * n);
		s->fill += n;
		done += n;
		if (s->fill == s->batch_rows)
			timed_flush(s);
	}
	if (s->want_ids)
	{
		MemoryContext old = MemoryContextSwitchTo(s->cxt);

		reserve_ids(s, &s->ids, s->nids, &s->capids, p->nrows);
		pg_gpu_keys_take(s->keys, p, p->ids, p->nrows, s->ids + s->nids);
		s->nids += p->nrows;
		reserve_ids(s, &s->bad, s->nbad, &s->capbad, p->nbad);
		for (int64 b = 0; b < p->nbad; b++)
			pg_gpu_keys_take(s->keys, p, &p->ids[p->cap - 1 - b], 1, &s->bad[s->nbad++]);
		MemoryContextSwitchTo(old);
	}
	s->ninvalid += p->nbad;
}


/* the row spec of src: positions in the relation (table) or in "SELECT [id,] cols" */
static void
source_spec(const PgGpuSource *src, bool want_ids, bool table, PgGpuRowSpec *spec)
{
	memset(spec, 0, offsetof(PgGpuRowSpec, pos));
	spec->kind = src->veckind != PG_GPU_VEC_NONE ? PG_GPU_ROWS_VECTOR : PG_GPU_ROWS_NUMERIC;
	spec->first_len = spec->first_id = -1;
	spec->ncols = src->natts;
	spec->veckind = src->veckind;
	spec->veclen = src->ncols;
	spec->normalize = src->normalize;
	spec->skip_zero = src->skip_zero;
	spec->pinned = src->pinned;
	spec->rowwise = src->rowwise && spec->kind == PG_GPU_ROWS_VECTOR;
	namestrcpy(&spec->colname, src->colnames[0]);
	spec->idpos = !want_ids ? -1 : table ? src->idatt : 0;
	spec->idtype = src->idtype;
	/* the weight: the column's (in a SELECT, after the vectors' columns), or the points' M */
	spec->weighted = src->wname != NULL || src->mweights;
	spec->mweights = src->mweights;
	spec->wpos = src->wname == NULL ? -1 : table ? src->watt : (want_ids ? 1 : 0) + src->natts;
	spec->wtype = src->wtype;
	if (src->wname)
		namestrcpy(&spec->wname, src->wname);
	if (want_ids)
	{
		bool		byval;

		get_typlenbyval(src->idtype, &spec->keylen, &byval);
		if (byval)
			spec->keylen = 0;
	}
	namestrcpy(&spec->relname, src->relname);
	if (src->idname)
		namestrcpy(&spec->idname, src->idname);
	for (int j = 0; j < src->natts; j++)
	{
		spec->pos[j] = table ? src->colatts[j] : j + (want_ids ? 1 : 0);
		spec->types[j] = src->coltypes[j];
	}
}

PgGpuSink *
pg_gpu_sink_begin(const PgGpuSource *src, PgGpuData *data, bool want_ids)
{
	SoaSink    *s = palloc0(sizeof(SoaSink));

	s->src = src;
	s->data = data;
	s->ds = pg_gpu_data_filling(data);
	s->want_ids = want_ids;
	s->by_rows = src->rowwise && src->veckind != PG_GPU_VEC_NONE;
	sink_batch(s);
	s->cxt = CurrentMemoryContext;
	if (want_ids)
	{
		s->keys = palloc(sizeof(PgGpuKeys));
		pg_gpu_keys_init(s->keys, src->keytype);
	}
	return (PgGpuSink *) s;
}

void
pg_gpu_sink_consume(void *arg, const PgGpuPart *p)
{
	soa_consume(arg, p);
}

int64
pg_gpu_sink_rows(const PgGpuSink *sink)
{
	const SoaSink *s = (const SoaSink *) sink;

	return pg_gpu_data_rows(s->data) + s->fill;
}

void
pg_gpu_sink_end(PgGpuSink *sink, PgGpuRows *rows)
{
	SoaSink    *s = (SoaSink *) sink;

	/* only the last batch of a sink may be partial */
	if (s->fill > 0)
		flush_batch(s);
	elog(DEBUG2, "pg_gpu: the read's batches of %lld rows: %.1f ms handing them to the backend",
		 (long long) s->batch_rows, INSTR_TIME_GET_MILLISEC(s->flushing));
	if (s->want_ids && s->data->nshares > 1)
		ids_in_part_order(s);
	rows->nvalid = pg_gpu_data_rows(s->data);
	rows->ninvalid = s->ninvalid;
	rows->ids = s->ids;
	rows->invalid_ids = s->bad;
	rows->keys = s->keys;
	if (s->batches)
		pfree(s->batches);
	pfree(s);
}

/*
 * src as a read into a data set on backend takes it: a GPU's by rows (its
 * workers write a vector's values as they are; the device turns them into
 * its columns), the CPU's by columns (the workers turn them, in parallel)
 */
PgGpuSource
pg_gpu_source_for(const PgGpuSource *src, pggpu_backend backend)
{
	PgGpuSource by = *src;

	by.rowwise = backend == PGGPU_BACKEND_GPU && src->veckind != PG_GPU_VEC_NONE;
	return by;
}

void
pg_gpu_read_parts(const PgGpuSource *src, bool want_ids, const uint64 *sample_seed,
				  pggpu_dtype dtype, PgGpuPartConsumer consume, void *arg)
{
	PgGpuRowSpec *spec = palloc(sizeof(PgGpuRowSpec));

	if (dtype != PGGPU_FLOAT64 && (sample_seed || pg_gpu_source_dtype(src, false) != dtype))
		elog(ERROR, "pg_gpu: \"%s\" read as float32 or float16", src->relname);
	source_spec(src, want_ids, true, spec);
	spec->dtype = dtype;
	if (sample_seed)
	{
		if (spec->rowwise)
			elog(ERROR, "pg_gpu: a sample read by rows");
		spec->sampled = true;
		spec->sample_seed = *sample_seed;
	}
	if (!pg_gpu_scan_table(src->relid, spec, false, consume, arg))
	{
		PgGpuPartReceiver r;

		char	   *sql = pg_gpu_source_select(src, want_ids);

		source_spec(src, want_ids, false, spec);
		spec->dtype = dtype;
		pg_gpu_part_receiver_init(&r, spec, consume, arg);
		pg_gpu_run_select(sql, &r.pub, false);
		pg_gpu_part_receiver_finish(&r);
		pfree(sql);
	}
	pfree(spec);
}

void
pg_gpu_read_sources(const PgGpuSource *srcs, int nsrcs, PgGpuData *data, bool want_ids,
					PgGpuRows *rows)
{
	PgGpuSource *by = palloc(sizeof(PgGpuSource) * nsrcs);
	SoaSink    *s;

	for (int i = 0; i < nsrcs; i++)
		by[i] = pg_gpu_source_for(&srcs[i], data->backend);
	s = (SoaSink *) pg_gpu_sink_begin(&by[0], data, want_ids);
	/* one sink for all: only the last batch of them all may be partial */
	for (int i = 0; i < nsrcs; i++)
	{
		s->src = &by[i];
		pg_gpu_read_parts(&by[i], want_ids, NULL, data->dtype, soa_consume, s);
	}
	pg_gpu_sink_end((PgGpuSink *) s, rows);
	pfree(by);
}

void
pg_gpu_push_rows(const PgGpuSource *src, PgGpuData *data, const void *x, pggpu_dtype dtype,
				 const int64 *order, int64 m, const double *w)
{
	SoaSink    *s = (SoaSink *) pg_gpu_sink_begin(src, data, false);
	PgGpuRows	rows;
	int			d = src->ncols;
	const float *x32 = dtype == PGGPU_FLOAT32 ? (const float *) x : NULL;

	s->by_rows = false;			/* (these rows are filled by columns below) */
	/* (floats go to a FLOAT32 set: they could not be widened back into a FLOAT64 one's place) */
	if (x32 && s->batch32 == NULL)
		elog(ERROR, "pg_gpu: float rows pushed into a float64 or float16 data set");
	/* straight into the staging batches, as soa_consume fills them */
	for (int64 at = 0; at < m;)
	{
		int64		n = Min(m - at, s->batch_rows - s->fill);

		/* 16 rows at a time: a value from each row, 16 in a column (two cache lines) */
		for (int64 r0 = 0; r0 < n; r0 += 16)
		{
			int64		r1 = Min(r0 + 16, n);
			int64		from[16];

			for (int64 r = r0; r < r1; r++)
				from[r - r0] = (order ? order[at + r] : at + r) * d;
			for (int j = 0; j < d; j++)
			{
				double		col[16];

				if (x32)
				{
					float	   *dst = s->batch32 + j * s->batch_rows + s->fill + r0;

					for (int64 r = r0; r < r1; r++)
						dst[r - r0] = x32[from[r - r0] + j];
					continue;
				}
				for (int64 r = r0; r < r1; r++)
					col[r - r0] = ((const double *) x)[from[r - r0] + j];
				sink_column(s, j, s->fill + r0, col, r1 - r0);
			}
			for (int64 r = r0; w && r < r1; r++)
				sink_weights(s)[s->fill + r] = w[order ? order[at + r] : at + r];
		}
		s->fill += n;
		at += n;
		if (s->fill == s->batch_rows)
			timed_flush(s);
	}
	pg_gpu_sink_end((PgGpuSink *) s, &rows);
}

void
pg_gpu_read_source(const PgGpuSource *src, PgGpuData *data, bool want_ids, PgGpuRows *rows)
{
	pg_gpu_read_sources(src, 1, data, want_ids, rows);
}

/* "SELECT [id, ]c1, ..., cd FROM rel" */
char *
pg_gpu_source_select(const PgGpuSource *src, bool want_ids)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	if (want_ids)
		appendStringInfo(&sql, "%s, ", quote_identifier(src->idname));
	for (int j = 0; j < src->natts; j++)
		appendStringInfo(&sql, "%s%s", j ? ", " : "", quote_identifier(src->colnames[j]));
	if (src->wname)
		appendStringInfo(&sql, ", %s", quote_identifier(src->wname));
	appendStringInfo(&sql, " FROM %s", src->qualname);
	return sql.data;
}
