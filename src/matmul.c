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
 * one (row_id, col_id, value), read by matrix_table.c in the caller's
 * snapshot, both operands in the same one.  A dense a distributed by Citus
 * is multiplied on the nodes that hold its shards (citus_matmul.c), b sent
 * to each.  The result comes back value-per-call, one row of C per call,
 * after the device has been released.
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

void
pg_gpu_matmul_run(PgGpuMatmul *w, pggpu_dtype dtype, int64 m, int64 n, int64 k,
				  const void *a, const void *b, void *c)
{
	pggpu_matmul_params p;
	pggpu_matmul_info info;
	pggpu_error err = {0};
	/* a's rows split over the shares' workspaces (several GPUs), unless too few or too little work */
	int			shares = m >= w->nshares ? w->nshares : 1;

	if (!pg_gpu_split_product((double) m, (double) n, (double) k))
		shares = 1;
	if (shares > 1)
		pg_gpu_matmul_open_shares(w);

	memset(&p, 0, sizeof(p));
	p.dtype = dtype;
	p.m = m;
	p.n = n;
	p.k = k;
	p.allow_tf32 = pg_gpu_allow_tf32;
	p.gpu_memory = (int64) pg_gpu_matmul_gpu_memory * 1024 * 1024;
	p.check_interrupts = pg_gpu_check_interrupts;
	p.pending = pg_gpu_interrupt_pending;
	if (pggpu_matmul_run_split(w->all, shares, &p, a, b, c, &info, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	elog(DEBUG2, "pg_gpu: %lld x %lld x %lld %s product on %s (%d shares of its rows): %lld block products of %lld x %lld x %lld",
		 (long long) m, (long long) k, (long long) n, dtype == PGGPU_FLOAT64 ? "float8" : "float4",
		 pggpu_matmul_device_name(w->all[0]), shares, (long long) info.products,
		 (long long) info.mb, (long long) info.kb, (long long) info.nb);
}

/*
 * dst (cols x rows) := src (rows x cols) transposed, both row-major, es bytes
 * a value, in 32 x 32 tiles (both sides' cache lines used whole).  b's copy
 * into its buffer transposes it (b_transposed): the BLAS then multiplies as
 * always, the transposition costing no more than the copy it rides on.
 */
static void
transpose_into(char *dst, const char *src, int64 rows, int64 cols, Size es)
{
	for (int64 r0 = 0; r0 < rows; r0 += 32)
	{
		CHECK_FOR_INTERRUPTS();
		for (int64 c0 = 0; c0 < cols; c0 += 32)
			for (int64 r = r0; r < Min(r0 + 32, rows); r++)
				for (int64 c = c0; c < Min(c0 + 32, cols); c++)
					memcpy(dst + (c * rows + r) * es, src + (r * cols + c) * es, es);
	}
}

/* b_transposed, an argument that may be missing (a 1.9 function calling) or NULL */
static bool
b_transposed_arg(FunctionCallInfo fcinfo, int i)
{
	if (PG_NARGS() <= i)
		return false;
	if (PG_ARGISNULL(i))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("b_transposed must not be NULL"),
				 errhint("Pass true (b's rows are the right operand's columns: a x b^T) or false (the default).")));
	return PG_GETARG_BOOL(i);
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
	bool		bt = b_transposed_arg(fcinfo, 2);
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
	if (bt)
		check_matrix_arg(b, "b", &n, &kb);
	else
		check_matrix_arg(b, "b", &kb, &n);
	if (ka != kb)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("matrix dimensions do not match: a is %d x %d, b is %d x %d", m, ka,
						bt ? n : kb, bt ? kb : n),
				 bt ? errdetail("With b_transposed, the number of columns of a must equal the number of columns of b.") :
				 errdetail("The number of columns of a must equal the number of rows of b."),
				 bt ? 0 : errhint("Pass b_transposed => true if the rows of b are the columns to multiply by.")));
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
	if (bt)
		transpose_into(B, ARR_DATA_PTR(b), n, kb, es);
	else
		memcpy(B, ARR_DATA_PTR(b), (Size) kb * n * es);
	C = pg_gpu_matmul_buffer(w, PGGPU_MM_C, (Size) nelems * es, 0);
	pg_gpu_matmul_run(w, dtype, m, n, ka, A, B, C);

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
	PgGpuMatTable a,
				b;
	TableResult *res = palloc0(sizeof(TableResult));
	TupleDesc	tupdesc;
	int64		ka,
				kb;
	PgGpuMatmul *w;
	PgGpuMatNodes *nodes = NULL;
	bool		bt = b_transposed_arg(fcinfo, 4);
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

	pg_gpu_mat_resolve(PG_GETARG_OID(0), PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2), "a_columns", &a);
	pg_gpu_mat_resolve(PG_GETARG_OID(1), PG_ARGISNULL(3) ? NULL : PG_GETARG_ARRAYTYPE_P(3), "b_columns", &b);

	/* a dense a distributed by Citus: multiplied where its rows are */
	if (pg_gpu_on_nodes(a.relid, a.sparse ? "a is a sparse matrix table" : NULL))
		nodes = pg_gpu_matmul_nodes_load(&a);

	t0 = GetCurrentTimestamp();
	/* (on the nodes, this backend only holds b and C) */
	w = res->w = pg_gpu_matmul_open(nodes ? PGGPU_BACKEND_CPU : pg_gpu_choose_backend(), CurrentMemoryContext);
	t1 = GetCurrentTimestamp();
	if (!nodes && a.sparse)
		pg_gpu_mat_read_sparse(&a);
	else if (!nodes)
		pg_gpu_mat_read_dense(&a, w, PGGPU_MM_A);
	if (b.sparse)
		pg_gpu_mat_read_sparse(&b);
	else
		pg_gpu_mat_read_dense(&b, w, PGGPU_MM_B);
	if (nodes)
		pg_gpu_matmul_nodes_shape(nodes, &a);
	t2 = GetCurrentTimestamp();

	/*
	 * shapes: a sparse operand widens to the other's inner dimension (b's
	 * columns where b_transposed: its rows are the right operand's columns)
	 */
	ka = a.cols;
	kb = bt ? b.cols : b.rows;
	if (a.sparse && ka < kb)
		ka = a.cols = kb;
	if (b.sparse && kb < ka)
	{
		kb = ka;
		if (bt)
			b.cols = ka;
		else
			b.rows = ka;
	}
	if (ka != kb)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("matrix dimensions do not match: \"%s\" is %lld x %lld, \"%s\" is %lld x %lld",
						a.relname, (long long) a.rows, (long long) a.cols,
						b.relname, (long long) b.rows, (long long) b.cols),
				 bt ? errdetail("With b_transposed, the number of columns of a must equal the number of columns of b.") :
				 errdetail("The number of columns of a must equal the number of rows of b."),
				 (a.sparse || b.sparse) ? errhint("A sparse matrix takes the larger of its largest id and the other matrix's size, but cannot shrink.") :
				 bt ? 0 : errhint("Pass b_transposed => true if the rows of b are the columns to multiply by.")));
	res->m = a.rows;
	res->n = bt ? b.rows : b.cols;
	if (res->n > (int64) MaxArraySize ||
		ARR_OVERHEAD_NONULLS(1) + (Size) res->n * sizeof(double) > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("result rows of %lld elements are too long for an array", (long long) res->n)));
	if (a.sparse)
		pg_gpu_mat_densify(&a, w, PGGPU_MM_A);
	if (b.sparse)
		pg_gpu_mat_densify(&b, w, PGGPU_MM_B);
	if (bt)
	{
		/*
		 * b^T into b's buffer, through the result's (taken as large as b
		 * first: within pg_gpu.max_memory like the rest)
		 */
		Size		bbytes = (Size) b.rows * b.cols * sizeof(double);
		char	   *tmp = pg_gpu_matmul_buffer(w, PGGPU_MM_C, Max(bbytes, (Size) res->m * res->n * sizeof(double)), 0);

		transpose_into(tmp, (const char *) b.data, b.rows, b.cols, sizeof(double));
		memcpy(b.data, tmp, bbytes);
		b.rows = kb;
		b.cols = res->n;
	}

	t3 = GetCurrentTimestamp();
	res->c = pg_gpu_matmul_buffer(w, PGGPU_MM_C, (Size) res->m * res->n * sizeof(double), 0);
	t4 = GetCurrentTimestamp();
	if (nodes)
		pg_gpu_matmul_nodes_product(nodes, &a, b.data, ka, res->n, (double *) res->c);
	else
		pg_gpu_matmul_run(w, PGGPU_FLOAT64, res->m, res->n, ka, a.data, b.data, (void *) res->c);
	t5 = GetCurrentTimestamp();
	/* only C is needed from here on */
	pg_gpu_matmul_keep_only(w, PGGPU_MM_C);
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
