/*
 * matmul.c - SQL entry points gpu_matmul(float8[], float8[]),
 * gpu_matmul(float4[], float4[]) and gpu_matmul(regclass, regclass, ...).
 *
 * Arrays: checked, copied into the workspace's host buffers (pinned on the
 * GPU), multiplied, and copied into the result array.  The workspace is
 * cached in fn_extra, so a call per row (SELECT gpu_matmul(w, x) FROM t)
 * reuses its buffers, streams and cuBLAS handle for the whole query.
 *
 * Tables: each operand is a dense matrix table (row_id, row_vec) or a sparse
 * one (row_id, col_id, value), read through SPI by a generated SELECT (so
 * privileges and row-level security apply) in the caller's snapshot, both
 * operands in the same one.  Dense rows are converted straight into the
 * workspace's host buffer as they arrive and put in row_id order
 * afterwards; sparse entries are collected and scattered into a dense
 * buffer once both shapes are known.  The result comes back value-per-call,
 * one row of C per call, after the device has been released.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "pg_gpu.h"

PG_FUNCTION_INFO_V1(gpu_matmul_float8);
PG_FUNCTION_INFO_V1(gpu_matmul_float4);
PG_FUNCTION_INFO_V1(gpu_matmul_tables);

/*
 * With pg_gpu.device = auto, products of fewer multiply-adds than this run on
 * the CPU: copying to the GPU and back costs more than they do.
 */
#define GPU_MIN_WORK 16777216.0	/* 256 x 256 x 256 */

#define TABLE_FORM_HINT \
	"Store the matrices as tables and use gpu_matmul(a regclass, b regclass), which returns one row per result row."

/* a zeroed bitmap of nbits bits */
static bits8 *
palloc0_huge_bits(int64 nbits)
{
	return MemoryContextAllocExtended(CurrentMemoryContext, (Size) (nbits + 7) / 8,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

static inline bool
bit_get(const bits8 *bits, int64 i)
{
	return (bits[i >> 3] >> (i & 7)) & 1;
}

static inline void
bit_set(bits8 *bits, int64 i)
{
	bits[i >> 3] |= 1 << (i & 7);
}

static void
run_product(PgGpuMatmul *w, pggpu_dtype dtype, int64 m, int64 n, int64 k,
			const void *a, const void *b, void *c)
{
	pggpu_matmul_params p;
	pggpu_matmul_info info;
	pggpu_error err = {0};

	memset(&p, 0, sizeof(p));
	p.dtype = dtype;
	p.m = m;
	p.n = n;
	p.k = k;
	p.allow_tf32 = pg_gpu_allow_tf32;
	p.gpu_memory = (int64) pg_gpu_matmul_gpu_memory * 1024 * 1024;
	p.check_interrupts = pg_gpu_check_interrupts;
	if (pggpu_matmul_run(w->mm, &p, a, b, c, &info, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	elog(DEBUG2, "pg_gpu: %lld x %lld x %lld %s product on %s: %lld block products of %lld x %lld x %lld",
		 (long long) m, (long long) k, (long long) n, dtype == PGGPU_FLOAT64 ? "float8" : "float4",
		 pggpu_matmul_device_name(w->mm), (long long) info.products,
		 (long long) info.mb, (long long) info.kb, (long long) info.nb);
}

/* ---- arrays ------------------------------------------------------------- */

/* one workspace per backend kind, for the whole query */
typedef struct ArrayCache
{
	PgGpuMatmul *w[2];
} ArrayCache;

static void
check_matrix_arg(ArrayType *a, const char *name, int *rows, int *cols)
{
	int			nd = ARR_NDIM(a);

	if (nd == 0)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("matrix %s is empty", name),
				 errhint("A matrix is a two-dimensional array with at least one element, such as ARRAY[[1, 2], [3, 4]].")));
	if (nd != 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("matrix %s must be a two-dimensional array, not %d-dimensional", name, nd),
				 errhint(nd == 1 ? "Write a row vector as ARRAY[[1, 2, 3]] and a column vector as ARRAY[[1], [2], [3]]."
						 : "A matrix is a two-dimensional array, such as ARRAY[[1, 2], [3, 4]].")));
	if (array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("matrix %s contains NULL elements", name),
				 errhint("Replace them, for example with 0 or 'NaN'.")));
	*rows = ARR_DIMS(a)[0];
	*cols = ARR_DIMS(a)[1];
}

static Datum
matmul_arrays(FunctionCallInfo fcinfo, pggpu_dtype dtype, Oid elemtype)
{
	ArrayType  *a = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *b = PG_GETARG_ARRAYTYPE_P(1);
	int64		es = dtype == PGGPU_FLOAT64 ? sizeof(float8) : sizeof(float4);
	int			m,
				ka,
				kb,
				n;
	int64		nelems;
	Size		bytes;
	pggpu_backend backend;
	ArrayCache *cache;
	PgGpuMatmul *w;
	void	   *A,
			   *B,
			   *C;
	ArrayType  *r;

	check_matrix_arg(a, "a", &m, &ka);
	check_matrix_arg(b, "b", &kb, &n);
	if (ka != kb)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("matrix dimensions do not match: a is %d x %d, b is %d x %d", m, ka, kb, n),
				 errdetail("The number of columns of a must equal the number of rows of b.")));
	nelems = (int64) m * n;
	bytes = ARR_OVERHEAD_NONULLS(2) + nelems * es;
	if (nelems > (int64) MaxArraySize || bytes > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the %d x %d result is too large for an array", m, n),
				 errdetail("It needs %.0f MB; an array holds at most 1 GB.", bytes / 1048576.0),
				 errhint(TABLE_FORM_HINT)));

	backend = (pg_gpu_device == PG_GPU_DEVICE_AUTO && (double) m * n * ka < GPU_MIN_WORK)
		? PGGPU_BACKEND_CPU : pg_gpu_choose_backend();
	cache = (ArrayCache *) fcinfo->flinfo->fn_extra;
	if (cache == NULL)
		cache = fcinfo->flinfo->fn_extra =
			MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ArrayCache));
	if (cache->w[backend] == NULL)
		cache->w[backend] = pg_gpu_matmul_open(backend, fcinfo->flinfo->fn_mcxt);
	w = cache->w[backend];

	A = pg_gpu_matmul_buffer(w, PGGPU_MM_A, (Size) m * ka * es, 0);
	memcpy(A, ARR_DATA_PTR(a), (Size) m * ka * es);
	B = pg_gpu_matmul_buffer(w, PGGPU_MM_B, (Size) kb * n * es, 0);
	memcpy(B, ARR_DATA_PTR(b), (Size) kb * n * es);
	C = pg_gpu_matmul_buffer(w, PGGPU_MM_C, (Size) nelems * es, 0);
	run_product(w, dtype, m, n, ka, A, B, C);

	r = (ArrayType *) palloc(bytes);
	memset(r, 0, ARR_OVERHEAD_NONULLS(2));
	SET_VARSIZE(r, bytes);
	r->ndim = 2;
	r->dataoffset = 0;
	r->elemtype = elemtype;
	ARR_DIMS(r)[0] = m;
	ARR_DIMS(r)[1] = n;
	ARR_LBOUND(r)[0] = 1;
	ARR_LBOUND(r)[1] = 1;
	memcpy(ARR_DATA_PTR(r), C, nelems * es);
	PG_RETURN_ARRAYTYPE_P(r);
}

Datum
gpu_matmul_float8(PG_FUNCTION_ARGS)
{
	return matmul_arrays(fcinfo, PGGPU_FLOAT64, FLOAT8OID);
}

Datum
gpu_matmul_float4(PG_FUNCTION_ARGS)
{
	return matmul_arrays(fcinfo, PGGPU_FLOAT32, FLOAT4OID);
}

/* ---- matrix tables --------------------------------------------------------- */

typedef struct MatTable
{
	const char *arg;			/* "a" or "b" */
	Oid			relid;
	char	   *relname;
	char	   *qualname;
	bool		sparse;
	int			ncols;			/* 2 (dense) or 3 (sparse) */
	char	   *names[3];		/* dense: id, vector; sparse: row, col, value */
	int			att[3];			/* their attribute indexes */
	Oid			types[3];		/* base types; for the vector, its element */
	double		expected_rows;
	/* after reading: the shape (sparse: largest indices, maybe widened) */
	int64		rows;
	int64		cols;
	double	   *data;			/* dense: rows x cols, in a workspace buffer */
	/* sparse entries */
	int64		nnz;
	int64	   *ri;
	int64	   *ci;
	double	   *v;
} MatTable;

#define DENSE_HINT "A dense matrix table has columns (row_id integer, row_vec double precision[]), one row per matrix row."
#define SPARSE_HINT "A sparse matrix table has columns (row_id integer, col_id integer, value double precision), one row per non-zero."

static void
resolve_table(Oid relid, ArrayType *names, const char *arg, MatTable *t)
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
					 errmsg("%s_columns must be a one-dimensional array of column names", arg)));
		deconstruct_array(names, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		if (n != 2 && n != 3)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s_columns must name 2 columns (dense matrix) or 3 (sparse matrix), not %d", arg, n),
					 errhint("Dense: ARRAY['row id column', 'row vector column']; sparse: ARRAY['row id column', 'column id column', 'value column'].")));
		for (int i = 0; i < n; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("%s_columns must not contain NULL", arg)));
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
					 errhint("Name its columns with %s_columns => ARRAY['id', 'vector'] (dense) or ARRAY['row', 'col', 'value'] (sparse).", arg)));
		if (vec >= 0 && col >= 0 && val >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_AMBIGUOUS_COLUMN),
					 errmsg("\"%s\" has the columns of both a dense matrix (row_id, row_vec) and a sparse one (row_id, col_id, value)", t->relname),
					 errhint("Say which to use with %s_columns => ARRAY['row_id', 'row_vec'] or ARRAY['row_id', 'col_id', 'value'].", arg)));
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
select_sql(const MatTable *t)
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

typedef struct DenseSink
{
	MatTable   *t;
	PgGpuMatmul *w;
	int			which;
	const PgGpuRowSpec *spec;
	MemoryContext cxt;			/* where ids live */
	int64		len;			/* elements per row, -1 before the first */
	int64		first_id;
	int64		rows;
	int64		cap;
	int64	   *ids;
} DenseSink;

static void
dense_consume(void *arg, const PgGpuPart *p)
{
	DenseSink  *r = (DenseSink *) arg;
	MatTable   *t = r->t;

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
										  Max(r->cap * 2, Max((int64) (t->expected_rows * 1.05) + 16, 64)),
										  (double) r->len * sizeof(double),
										  pg_gpu_matmul_others(r->w, r->which));

		t->data = pg_gpu_matmul_buffer(r->w, r->which, (Size) cap * r->len * sizeof(double),
									   (Size) r->rows * r->len * sizeof(double));
		r->ids = r->ids ? repalloc_huge(r->ids, sizeof(int64) * cap)
			: MemoryContextAllocHuge(r->cxt, sizeof(int64) * cap);
		r->cap = cap;
	}
	memcpy(t->data + r->rows * r->len, p->values, sizeof(double) * p->nrows * r->len);
	memcpy(r->ids + r->rows, p->ids, sizeof(int64) * p->nrows);
	r->rows += p->nrows;
}

/* puts row s at position ids[s] - 1 (ids: a permutation of 1..m), in place */
static void
permute_rows(double *data, const int64 *ids, int64 m, int64 len)
{
	Size		rowbytes = len * sizeof(double);
	bits8	   *done = palloc0_huge_bits(m);
	double	   *tmp = palloc(rowbytes);
	double	   *tmp2 = palloc(rowbytes);

	for (int64 s = 0; s < m; s++)
	{
		int64		d;

		if (bit_get(done, s))
			continue;
		bit_set(done, s);
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
			bit_set(done, d);
		}
		memcpy(data + s * len, tmp, rowbytes);
	}
	pfree(done);
	pfree(tmp);
	pfree(tmp2);
}

static void
read_dense(MatTable *t, PgGpuMatmul *w, int which)
{
	DenseSink	r;
	PgGpuRowSpec *spec = palloc0(sizeof(PgGpuRowSpec));
	int64		m;
	bits8	   *seen;
	int64		bad = 0;
	bool		have_bad = false;

	memset(&r, 0, sizeof(r));
	r.t = t;
	r.w = w;
	r.which = which;
	r.spec = spec;
	r.cxt = CurrentMemoryContext;
	r.len = -1;
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
	if (!pg_gpu_scan_table(t->relid, spec, true, dense_consume, &r))
	{
		PgGpuPartReceiver pr;

		spec->idpos = 0;
		spec->pos[0] = 1;
		pg_gpu_part_receiver_init(&pr, spec, dense_consume, &r);
		pg_gpu_run_select(select_sql(t), &pr.pub, true);
		pg_gpu_part_receiver_finish(&pr);
	}

	m = r.rows;
	if (m == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("matrix table \"%s\" has no rows", t->relname),
				 errhint("A matrix needs at least one row.")));
	/* row ids must be 1..m, each once */
	seen = palloc0_huge_bits(m);
	for (int64 s = 0; s < m; s++)
	{
		int64		id = r.ids[s];

		if (id < 1 || id > m)
		{
			if (!have_bad)
				bad = id, have_bad = true;
			continue;
		}
		if (bit_get(seen, id - 1))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("row %lld appears more than once in \"%s\"", (long long) id, t->relname),
					 errhint("Each row id of a dense matrix table must occur once.")));
		bit_set(seen, id - 1);
	}
	if (have_bad)
	{
		int64		missing = 1;

		while (bit_get(seen, missing - 1))
			missing++;
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("row %lld is missing from \"%s\"", (long long) missing, t->relname),
				 errdetail("\"%s\" has %lld rows, so its row ids must be 1 to %lld, but one is %lld.",
						   t->relname, (long long) m, (long long) m, (long long) bad)));
	}
	pfree(seen);
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
	MatTable   *t;
	MemoryContext cxt;
	int64		cap;
} SparseReceiver;

static bool
sparse_receive(TupleTableSlot *slot, DestReceiver *self)
{
	SparseReceiver *r = (SparseReceiver *) self;
	MatTable   *t = r->t;
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

static void
read_sparse(MatTable *t)
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
static void
densify(MatTable *t, PgGpuMatmul *w, int which)
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
	seen = palloc0_huge_bits((int64) cells);
	for (int64 e = 0; e < t->nnz; e++)
	{
		Size		at = (Size) (t->ri[e] - 1) * t->cols + (Size) (t->ci[e] - 1);

		if (bit_get(seen, at))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("entry (%lld, %lld) appears more than once in \"%s\"",
							(long long) t->ri[e], (long long) t->ci[e], t->relname),
					 errhint("Give each entry of a sparse matrix table once; sum duplicates with GROUP BY in a view.")));
		bit_set(seen, at);
		t->data[at] = t->v[e];
	}
	pfree(seen);
}

typedef struct TableResult
{
	PgGpuMatmul *w;
	const double *c;
	int64		m;
	int64		n;
} TableResult;

static void
matmul_tables_first(FunctionCallInfo fcinfo, FuncCallContext *fc)
{
	MatTable	a,
				b;
	TableResult *res = palloc0(sizeof(TableResult));
	TupleDesc	tupdesc;
	int64		ka,
				kb;
	PgGpuMatmul *w;
	TimestampTz t0,
				t1,
				t2,
				t3,
				t4,
				t5;

	for (int i = 0; i < 2; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be NULL", i ? "b" : "a")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "gpu_matmul: return type must be a row type");
	fc->tuple_desc = BlessTupleDesc(tupdesc);

	resolve_table(PG_GETARG_OID(0), PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2), "a", &a);
	resolve_table(PG_GETARG_OID(1), PG_ARGISNULL(3) ? NULL : PG_GETARG_ARRAYTYPE_P(3), "b", &b);

	t0 = GetCurrentTimestamp();
	w = res->w = pg_gpu_matmul_open(pg_gpu_choose_backend(), CurrentMemoryContext);
	t1 = GetCurrentTimestamp();
	if (a.sparse)
		read_sparse(&a);
	else
		read_dense(&a, w, PGGPU_MM_A);
	if (b.sparse)
		read_sparse(&b);
	else
		read_dense(&b, w, PGGPU_MM_B);
	t2 = GetCurrentTimestamp();

	/* shapes: a sparse operand widens to the other's inner dimension */
	ka = a.cols;
	kb = b.rows;
	if (a.sparse && ka < kb)
		ka = a.cols = kb;
	if (b.sparse && kb < ka)
		kb = b.rows = ka;
	if (ka != kb)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("matrix dimensions do not match: \"%s\" is %lld x %lld, \"%s\" is %lld x %lld",
						a.relname, (long long) a.rows, (long long) a.cols,
						b.relname, (long long) b.rows, (long long) b.cols),
				 errdetail("The number of columns of a must equal the number of rows of b."),
				 (a.sparse || b.sparse) ? errhint("A sparse matrix takes the larger of its largest id and the other matrix's size, but cannot shrink.") : 0));
	if (b.cols > (int64) MaxArraySize ||
		ARR_OVERHEAD_NONULLS(1) + (Size) b.cols * sizeof(double) > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("result rows of %lld elements are too long for an array", (long long) b.cols)));
	if (a.sparse)
		densify(&a, w, PGGPU_MM_A);
	if (b.sparse)
		densify(&b, w, PGGPU_MM_B);

	res->m = a.rows;
	res->n = b.cols;
	t3 = GetCurrentTimestamp();
	res->c = pg_gpu_matmul_buffer(w, PGGPU_MM_C, (Size) res->m * res->n * sizeof(double), 0);
	t4 = GetCurrentTimestamp();
	run_product(w, PGGPU_FLOAT64, res->m, res->n, ka, a.data, b.data, (void *) res->c);
	t5 = GetCurrentTimestamp();
	/* only C is needed from here on */
	pggpu_matmul_keep_only(w->mm, PGGPU_MM_C);
	elog(DEBUG2, "pg_gpu: gpu_matmul stages (ms): open %.1f, read %.1f, densify %.1f, result buffer %.1f, product %.1f, release %.1f",
		 (t1 - t0) / 1000.0, (t2 - t1) / 1000.0, (t3 - t2) / 1000.0, (t4 - t3) / 1000.0,
		 (t5 - t4) / 1000.0, (GetCurrentTimestamp() - t5) / 1000.0);
	fc->user_fctx = res;
}

Datum
gpu_matmul_tables(PG_FUNCTION_ARGS)
{
	FuncCallContext *fc;
	TableResult *res;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext old;

		fc = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(fc->multi_call_memory_ctx);
		matmul_tables_first(fcinfo, fc);
		MemoryContextSwitchTo(old);
	}
	fc = SRF_PERCALL_SETUP();
	res = (TableResult *) fc->user_fctx;
	if (fc->call_cntr < (uint64) res->m)
	{
		int64		i = (int64) fc->call_cntr;
		Size		bytes = ARR_OVERHEAD_NONULLS(1) + res->n * sizeof(double);
		ArrayType  *vec = (ArrayType *) palloc(bytes);
		Datum		values[2];
		bool		nulls[2] = {false, false};

		memset(vec, 0, ARR_OVERHEAD_NONULLS(1));
		SET_VARSIZE(vec, bytes);
		vec->ndim = 1;
		vec->elemtype = FLOAT8OID;
		ARR_DIMS(vec)[0] = (int) res->n;
		ARR_LBOUND(vec)[0] = 1;
		memcpy(ARR_DATA_PTR(vec), res->c + i * res->n, res->n * sizeof(double));
		values[0] = Int64GetDatum(i + 1);
		values[1] = PointerGetDatum(vec);
		SRF_RETURN_NEXT(fc, HeapTupleGetDatum(heap_form_tuple(fc->tuple_desc, values, nulls)));
	}
	SRF_RETURN_DONE(fc);
}
