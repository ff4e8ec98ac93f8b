/*
 * matrix_table.c - gpu_matmul's operands as tables: a dense matrix table
 * (row_id, row_vec) or a sparse one (row_id, col_id, value), found by its
 * columns' names or named by the caller, and read through SPI by a
 * generated SELECT (so privileges and row-level security apply) in the
 * caller's snapshot.
 *
 * Dense rows are converted straight into a workspace's host buffer as they
 * arrive (read in parallel where scan.c can) and put in row_id order
 * afterwards; a Citus node reads its shards' rows the same way, keeping
 * their own ids (citus_node.c).  Sparse entries are collected and scattered
 * into a dense buffer once both shapes are known.
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pg_gpu.h"

#define DENSE_HINT "A dense matrix table has columns (row_id integer, row_vec double precision[]), one row per matrix row."
#define SPARSE_HINT "A sparse matrix table has columns (row_id integer, col_id integer, value double precision), one row per non-zero."

void
pg_gpu_mat_resolve(Oid relid, ArrayType *names, const char *arg, PgGpuMatTable *t)
{
	Relation	rel;
	TupleDesc	td;
	int			att[3];

	memset(t, 0, sizeof(*t));
	t->arg = arg;
	t->relid = relid;
	rel = pg_gpu_open_relation(relid, &t->relname, &t->qualname);
	td = RelationGetDescr(rel);

	if (names != NULL)
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		if (ARR_NDIM(names) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("%s must be a one-dimensional array of column names", arg)));
		deconstruct_array(names, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		if (n != 2 && n != 3)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must name 2 columns (dense matrix) or 3 (sparse matrix), not %d", arg, n),
					 errhint("Dense: ARRAY['row id column', 'row vector column']; sparse: ARRAY['row id column', 'column id column', 'value column'].")));
		for (int i = 0; i < n; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("%s must not contain NULL", arg)));
			t->names[i] = TextDatumGetCString(elems[i]);
			att[i] = pg_gpu_find_column(td, t->names[i]);
			if (att[i] < 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of relation \"%s\" does not exist", t->names[i], t->relname)));
		}
		t->ncols = n;
	}
	else
	{
		int			id = pg_gpu_find_column(td, "row_id");
		int			vec = pg_gpu_find_column(td, "row_vec");
		int			col = pg_gpu_find_column(td, "col_id");
		int			val = pg_gpu_find_column(td, "value");

		if (id < 0 || (vec < 0 && (col < 0 || val < 0)))
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("\"%s\" is not a matrix table", t->relname),
					 errdetail("It has neither the columns (row_id, row_vec) of a dense matrix nor (row_id, col_id, value) of a sparse one."),
					 errhint("Name its columns with %s => ARRAY['id', 'vector'] (dense) or ARRAY['row', 'col', 'value'] (sparse).", arg)));
		if (vec >= 0 && col >= 0 && val >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_AMBIGUOUS_COLUMN),
					 errmsg("\"%s\" has the columns of both a dense matrix (row_id, row_vec) and a sparse one (row_id, col_id, value)", t->relname),
					 errhint("Say which to use with %s => ARRAY['row_id', 'row_vec'] or ARRAY['row_id', 'col_id', 'value'].", arg)));
		t->ncols = vec >= 0 ? 2 : 3;
		att[0] = id;
		att[1] = vec >= 0 ? vec : col;
		att[2] = val;
		for (int i = 0; i < t->ncols; i++)
			t->names[i] = pstrdup(NameStr(TupleDescAttr(td, att[i])->attname));
	}
	t->sparse = t->ncols == 3;
	memcpy(t->att, att, sizeof(att));

	for (int i = 0; i < t->ncols; i++)
	{
		Oid			type = TupleDescAttr(td, att[i])->atttypid;
		Oid			base = getBaseType(type);
		bool		index = i == 0 || (t->sparse && i == 1);

		if (index && !pg_gpu_is_integer_type(base))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of \"%s\" is of type %s, not an integer type",
							t->names[i], t->relname, format_type_be(type)),
					 errhint("Matrix row and column ids are smallint, integer or bigint, counted from 1.")));
		if (!index && !t->sparse)
		{
			Oid			elem = get_element_type(base);

			if (elem != FLOAT8OID && elem != FLOAT4OID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of \"%s\" is of type %s, not double precision[] or real[]",
								t->names[i], t->relname, format_type_be(type)),
						 errhint(OidIsValid(elem) ? "Cast it in a view, for example row_vec::float8[] AS row_vec."
								 : DENSE_HINT " " SPARSE_HINT)));
			base = elem;
		}
		if (!index && t->sparse && !pg_gpu_is_numeric_type(base))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of \"%s\" is of type %s, not a numeric type",
							t->names[i], t->relname, format_type_be(type)),
					 errhint(OidIsValid(get_element_type(base)) ? SPARSE_HINT " " DENSE_HINT
							 : "Use smallint, integer, bigint, real, double precision or numeric.")));
		t->types[i] = base;
	}
	t->expected_rows = pg_gpu_estimate_rows(rel);
	relation_close(rel, NoLock);
}

static char *
select_sql(const PgGpuMatTable *t)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < t->ncols; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "", quote_identifier(t->names[i]));
	appendStringInfo(&sql, " FROM %s", t->qualname);
	return sql.data;
}

/* ---- dense rows: parts (rows.c, scan.c) into a workspace buffer ---- */

static void
dense_consume(void *arg, const PgGpuPart *p)
{
	PgGpuDenseRows *r = (PgGpuDenseRows *) arg;

	CHECK_FOR_INTERRUPTS();
	if (p->nrows == 0)
		return;
	if (r->len < 0)
	{
		r->len = p->len;
		r->first_id = p->ids[0];
	}
	else if (p->len != r->len)
		pg_gpu_differ_in_length(r->spec, p->ids[0], p->len, r->first_id, r->len);
	if (r->rows + p->nrows > r->cap)
	{
		int64		cap = pg_gpu_grow_cap(r->rows + p->nrows,
										  Max(r->cap * 2, Max((int64) (r->expected_rows * 1.05) + 16, 64)),
										  (double) r->len * sizeof(double),
										  pg_gpu_matmul_others(r->w, r->which));

		r->data = pg_gpu_matmul_buffer(r->w, r->which, (Size) cap * r->len * sizeof(double),
									   (Size) r->rows * r->len * sizeof(double));
		r->ids = r->ids ? repalloc_huge(r->ids, sizeof(int64) * cap)
			: MemoryContextAllocHuge(r->cxt, sizeof(int64) * cap);
		r->cap = cap;
	}
	memcpy(r->data + r->rows * r->len, p->values, sizeof(double) * p->nrows * r->len);
	memcpy(r->ids + r->rows, p->ids, sizeof(int64) * p->nrows);
	r->rows += p->nrows;
}

void
pg_gpu_mat_rows_init(PgGpuDenseRows *r, PgGpuMatmul *w, int which, double expected_rows)
{
	memset(r, 0, sizeof(*r));
	r->w = w;
	r->which = which;
	r->cxt = CurrentMemoryContext;
	r->len = -1;
	r->expected_rows = expected_rows;
}

/* appends the rows of the dense matrix table t to r, in the order read */
void
pg_gpu_mat_rows_read(PgGpuDenseRows *r, const PgGpuMatTable *t)
{
	PgGpuRowSpec *spec = palloc0(sizeof(PgGpuRowSpec));

	Assert(!t->sparse);
	r->spec = spec;
	spec->kind = PG_GPU_ROWS_DENSE;
	spec->ncols = 1;
	spec->idtype = t->types[0];
	spec->types[0] = t->types[1];
	spec->first_len = spec->first_id = -1;
	namestrcpy(&spec->relname, t->relname);
	namestrcpy(&spec->idname, t->names[0]);
	/* positions in the table, else in SELECT id, vector */
	spec->idpos = t->att[0];
	spec->pos[0] = t->att[1];
	if (!pg_gpu_scan_table(t->relid, spec, true, dense_consume, r))
	{
		PgGpuPartReceiver pr;

		spec->idpos = 0;
		spec->pos[0] = 1;
		pg_gpu_part_receiver_init(&pr, spec, dense_consume, r);
		pg_gpu_run_select(select_sql(t), &pr.pub, true);
		pg_gpu_part_receiver_finish(&pr);
	}
	r->spec = NULL;
	pfree(spec);
}

/* puts row s at position ids[s] - 1 (ids: a permutation of 1..m), in place */
static void
permute_rows(double *data, const int64 *ids, int64 m, int64 len)
{
	Size		rowbytes = len * sizeof(double);
	bits8	   *done = pg_gpu_bits_alloc(m);
	double	   *tmp = palloc(rowbytes);
	double	   *tmp2 = palloc(rowbytes);

	for (int64 s = 0; s < m; s++)
	{
		int64		d;

		if (pg_gpu_bit_get(done, s))
			continue;
		pg_gpu_bit_set(done, s);
		if (ids[s] - 1 == s)
			continue;
		CHECK_FOR_INTERRUPTS();
		memcpy(tmp, data + s * len, rowbytes);
		for (d = ids[s] - 1; d != s; d = ids[d] - 1)
		{
			double	   *swap;

			memcpy(tmp2, data + d * len, rowbytes);
			memcpy(data + d * len, tmp, rowbytes);
			swap = tmp, tmp = tmp2, tmp2 = swap;
			pg_gpu_bit_set(done, d);
		}
		memcpy(data + s * len, tmp, rowbytes);
	}
	pfree(done);
	pfree(tmp);
	pfree(tmp2);
}

void
pg_gpu_mat_read_dense(PgGpuMatTable *t, PgGpuMatmul *w, int which)
{
	PgGpuDenseRows r;
	int64		m;
	bits8	   *seen;
	int64		bad = 0;
	bool		have_bad = false;

	pg_gpu_mat_rows_init(&r, w, which, t->expected_rows);
	pg_gpu_mat_rows_read(&r, t);
	m = r.rows;
	if (m == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("matrix table \"%s\" has no rows", t->relname),
				 errhint("A matrix needs at least one row.")));
	/* row ids must be 1..m, each once */
	seen = pg_gpu_bits_alloc(m);
	for (int64 s = 0; s < m; s++)
	{
		int64		id = r.ids[s];

		if (id < 1 || id > m)
		{
			if (!have_bad)
				bad = id, have_bad = true;
			continue;
		}
		if (pg_gpu_bit_get(seen, id - 1))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("row %lld appears more than once in \"%s\"", (long long) id, t->relname),
					 errhint("Each row id of a dense matrix table must occur once.")));
		pg_gpu_bit_set(seen, id - 1);
	}
	if (have_bad)
	{
		int64		missing = 1;

		while (pg_gpu_bit_get(seen, missing - 1))
			missing++;
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("row %lld is missing from \"%s\"", (long long) missing, t->relname),
				 errdetail("\"%s\" has %lld rows, so its row ids must be 1 to %lld, but one is %lld.",
						   t->relname, (long long) m, (long long) m, (long long) bad)));
	}
	pfree(seen);
	t->data = r.data;
	permute_rows(t->data, r.ids, m, r.len);
	/* the limit counts what was read, not the room it grew into */
	pg_gpu_matmul_count(w, which, (Size) m * r.len * sizeof(double));
	pfree(r.ids);
	t->rows = m;
	t->cols = r.len;
}

/* sparse entries, collected */
typedef struct SparseReceiver
{
	DestReceiver pub;
	PgGpuMatTable   *t;
	MemoryContext cxt;
	int64		cap;
} SparseReceiver;

static bool
sparse_receive(TupleTableSlot *slot, DestReceiver *self)
{
	SparseReceiver *r = (SparseReceiver *) self;
	PgGpuMatTable   *t = r->t;
	int64		i,
				j;

	slot_getallattrs(slot);
	for (int a = 0; a < 3; a++)
		if (slot->tts_isnull[a])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("column \"%s\" of \"%s\" contains NULL", t->names[a], t->relname),
					 errhint(a == 2 ? "Leave zeros out of a sparse matrix table, and give other values."
							 : "Every entry of a sparse matrix table needs its row and column ids, counted from 1.")));
	i = pg_gpu_slot_int(slot, 0, t->types[0]);
	j = pg_gpu_slot_int(slot, 1, t->types[1]);
	if (i < 1 || j < 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("entry (%lld, %lld) of \"%s\" is out of range", (long long) i, (long long) j, t->relname),
				 errdetail("Row and column ids of a sparse matrix count from 1.")));
	if (t->nnz == r->cap)
	{
		int64		cap = pg_gpu_grow_cap(t->nnz + 1,
										  r->cap ? r->cap * 2 : Max((int64) (t->expected_rows * 1.05) + 16, 64),
										  24.0, 0.0);

		pg_gpu_check_memory(24.0 * cap, t->relname,
							"A sparse matrix's entries take 24 bytes each while they are read.");
		t->ri = t->ri ? repalloc_huge(t->ri, sizeof(int64) * cap) : MemoryContextAllocHuge(r->cxt, sizeof(int64) * cap);
		t->ci = t->ci ? repalloc_huge(t->ci, sizeof(int64) * cap) : MemoryContextAllocHuge(r->cxt, sizeof(int64) * cap);
		t->v = t->v ? repalloc_huge(t->v, sizeof(double) * cap) : MemoryContextAllocHuge(r->cxt, sizeof(double) * cap);
		r->cap = cap;
	}
	t->ri[t->nnz] = i;
	t->ci[t->nnz] = j;
	t->v[t->nnz++] = pg_gpu_datum_to_double(slot->tts_values[2], t->types[2]);
	t->rows = Max(t->rows, i);
	t->cols = Max(t->cols, j);
	return true;
}

void
pg_gpu_mat_read_sparse(PgGpuMatTable *t)
{
	SparseReceiver r;

	memset(&r, 0, sizeof(r));
	pg_gpu_receiver_init(&r.pub, sparse_receive);
	r.t = t;
	r.cxt = CurrentMemoryContext;
	pg_gpu_run_select(select_sql(t), &r.pub, true);
	if (t->nnz == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("sparse matrix table \"%s\" has no entries", t->relname),
				 errhint("Its shape comes from its largest row and column ids: give at least one entry, for example (m, n, 0) for an m x n zero matrix.")));
}

/* the sparse entries scattered into a zeroed rows x cols workspace buffer */
void
pg_gpu_mat_densify(PgGpuMatTable *t, PgGpuMatmul *w, int which)
{
	Size		cells = (Size) t->rows * (Size) t->cols;
	bits8	   *seen;

	if (t->rows > (int64) (MaxAllocHugeSize / sizeof(double)) / t->cols)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("sparse matrix \"%s\" is too large to multiply", t->relname),
				 errdetail("Its shape is %lld x %lld.", (long long) t->rows, (long long) t->cols)));
	t->data = pg_gpu_matmul_buffer(w, which, cells * sizeof(double), 0);
	memset(t->data, 0, cells * sizeof(double));
	seen = pg_gpu_bits_alloc((int64) cells);
	for (int64 e = 0; e < t->nnz; e++)
	{
		Size		at = (Size) (t->ri[e] - 1) * t->cols + (Size) (t->ci[e] - 1);

		if (pg_gpu_bit_get(seen, at))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("entry (%lld, %lld) appears more than once in \"%s\"",
							(long long) t->ri[e], (long long) t->ci[e], t->relname),
					 errhint("Give each entry of a sparse matrix table once; sum duplicates with GROUP BY in a view.")));
		pg_gpu_bit_set(seen, at);
		t->data[at] = t->v[e];
	}
	pfree(seen);
}
