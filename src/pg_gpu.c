/*
 * pg_gpu.c - module load, settings, device choice, error mapping, and the
 * memory-context tie that frees GPU resources on every exit path.
 *
 * CUDA is never touched here at load time: the postmaster may load this
 * library (shared_preload_libraries) and CUDA does not survive fork().  It is
 * initialised lazily by the first call that needs it, in that backend.
 */
#include "postgres.h"

#include <math.h>

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "pg_gpu.h"

PG_MODULE_MAGIC;

int			pg_gpu_device = PG_GPU_DEVICE_AUTO;
bool		pg_gpu_allow_tf32 = false;
int			pg_gpu_matmul_gpu_memory = 0;
int			pg_gpu_kmeans_gpu_memory = 0;
int			pg_gpu_max_memory = 8192 * 1024;
int			pg_gpu_pinned_memory_cache = 512;
int			pg_gpu_cpu_threads = 0;
int			pg_gpu_kmeans_precision = PG_GPU_PRECISION_AUTO;

/* no CUDA call unless cached buffers are to be freed, so safe in the postmaster */
static void
assign_pinned_cache(int newval, void *extra)
{
	pggpu_pinned_cache_limit((size_t) newval << 20);
}

static const struct config_enum_entry device_options[] = {
	{"auto", PG_GPU_DEVICE_AUTO, false},
	{"gpu", PG_GPU_DEVICE_GPU, false},
	{"cpu", PG_GPU_DEVICE_CPU, false},
	{NULL, 0, false}
};

static const struct config_enum_entry precision_options[] = {
	{"auto", PG_GPU_PRECISION_AUTO, false},
	{"double", PG_GPU_PRECISION_DOUBLE, false},
	{NULL, 0, false}
};

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomEnumVariable("pg_gpu.device",
							 "Where pg_gpu runs its algorithms.",
							 "auto: the GPU when one is usable, else the CPU; "
							 "gpu: the GPU or an error; cpu: the CPU, never touching CUDA.",
							 &pg_gpu_device,
							 PG_GPU_DEVICE_AUTO,
							 device_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("pg_gpu.allow_tf32",
							 "Lets gpu_matmul on real[] use the GPU's TF32 tensor cores.",
							 "Off: real[] products are IEEE single precision. "
							 "On: faster, with products rounded to 10-bit mantissas.",
							 &pg_gpu_allow_tf32,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("pg_gpu.kmeans_precision",
							 "The arithmetic of k-means' distance products on the GPU for d > 32.",
							 "auto: TF32 tensor cores, every label certified against the product's "
							 "error bound and uncertain rows measured in float64, so the answers are "
							 "float64's exactly; double: float64 products throughout (slower, the "
							 "same answers).",
							 &pg_gpu_kmeans_precision,
							 PG_GPU_PRECISION_AUTO,
							 precision_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("pg_gpu.kmeans_gpu_memory",
							"The most memory a k-means call's rows take on the GPU at once.",
							"0: what is free.  Rows beyond it are kept in pinned host memory and streamed "
							"through the GPU every iteration, a part at a time (on the CPU the same parts are made).",
							&pg_gpu_kmeans_gpu_memory,
							0, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pg_gpu.matmul_gpu_memory",
							"The most GPU memory one gpu_matmul uses for its operands.",
							"0: what is free.  Larger products stream through the GPU in blocks.",
							&pg_gpu_matmul_gpu_memory,
							0, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);
	/*
	 * In kB, -1 for no limit (as temp_file_limit): a value given in smaller
	 * units rounds to a limit, never to "no limit".
	 */
	DefineCustomIntVariable("pg_gpu.max_memory",
							"The most memory the data of one pg_gpu call may take.",
							"The rows read (8 bytes per value and per id) with their labels and "
							"distances, or the three matrices of gpu_matmul, and the parallel "
							"read's shared memory, wherever they are held; checked before anything "
							"is allocated.  -1: no limit.  Superuser only (as temp_file_limit): a "
							"role cannot raise the bound set for it.",
							&pg_gpu_max_memory,
							8192 * 1024, -1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pg_gpu.pinned_memory_cache",
							"Pinned host memory kept by a backend between gpu_matmul calls.",
							"Page-locked memory is slow to allocate; buffers freed by one call are "
							"kept for the next, up to this much.  0 frees them at once.  Superuser "
							"only: page-locked memory is taken from the whole host.",
							&pg_gpu_pinned_memory_cache,
							512, 0, INT_MAX / 2,
							PGC_SUSET,
							GUC_UNIT_MB,
							NULL, assign_pinned_cache, NULL);
	DefineCustomIntVariable("pg_gpu.cpu_threads",
							"Threads of a k-means call on the CPU.",
							"0: as many as a parallel query may use (1 + "
							"max_parallel_workers_per_gather).  Never more than 1 + "
							"max_worker_processes, the server's bound on a query's processes.  "
							"The results do not depend on it.",
							&pg_gpu_cpu_threads,
							0, 0, PGGPU_MAX_THREADS,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("pg_gpu.citus_nodes",
							 "Runs k-means on a Citus distributed table on the nodes that hold its shards.",
							 "On: each node reads its own shards into its own GPU (or CPU) and only "
							 "per-cluster sums cross the network.  Off: the rows are read through "
							 "Citus's executor into this backend.",
							 &pg_gpu_citus_nodes,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("pg_gpu.gpus",
							   "The GPUs a call may use.",
							   "all (default): every GPU this build can use; or a list of indexes "
							   "from gpu_info(), such as '0,1'.  A k-means call deals its rows to them "
							   "and gpu_matmul its rows of a; the results agree with one GPU's up to "
							   "the rounding of adding the GPUs' sums.  Superuser only, so that "
							   "ALTER ROLE or ALTER DATABASE can give roles their GPUs.",
							   &pg_gpu_gpus,
							   "all",
							   PGC_SUSET,
							   0,
							   pg_gpu_check_gpus, NULL, NULL);
	DefineCustomIntVariable("pg_gpu.parts",
							"The shares a call's rows are split into.",
							"0 (default): one a GPU of pg_gpu.gpus, one on the CPU.  More than the "
							"GPUs deals several to a GPU in turn; on the CPU splits as the GPUs "
							"would.  For testing the combining of shares on one GPU or the CPU; "
							"not faster.  Superuser only.",
							&pg_gpu_parts,
							0, 0, PGGPU_MAX_THREADS,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("pg_gpu");
}

/* usable GPUs in this backend: -1 until first asked */
static int	gpu_count = -1;
static char gpu_count_why[512];
static bool fallback_noticed = false;

static void
notice_fallback(const char *why)
{
	if (fallback_noticed)
		return;
	fallback_noticed = true;
	ereport(NOTICE,
			(errmsg("pg_gpu: no usable GPU, running on the CPU"),
			 errdetail("%s.", why),
			 errhint("Set pg_gpu.device to \"cpu\" to silence this notice.")));
}

static int
usable_gpus(void)
{
	if (gpu_count < 0)
	{
		pggpu_error err = {0};

		gpu_count = pggpu_gpu_count(&err);
		strlcpy(gpu_count_why, err.msg, sizeof(gpu_count_why));
	}
	return gpu_count;
}

pggpu_backend
pg_gpu_choose_backend(void)
{
	switch (pg_gpu_device)
	{
		case PG_GPU_DEVICE_CPU:
			return PGGPU_BACKEND_CPU;
		case PG_GPU_DEVICE_GPU:
			if (usable_gpus() == 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("pg_gpu.device is \"gpu\" but no GPU can be used"),
						 errdetail("%s.", gpu_count_why),
						 errhint("Set pg_gpu.device to \"auto\" or \"cpu\" to run on the CPU.")));
			return PGGPU_BACKEND_GPU;
		default:
			if (usable_gpus() > 0)
				return PGGPU_BACKEND_GPU;
			notice_fallback(gpu_count_why);
			return PGGPU_BACKEND_CPU;
	}
}

void
pg_gpu_raise(const pggpu_error *err)
{
	switch (err->code)
	{
		case PGGPU_ERR_GPU_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("not enough GPU memory"),
					 errdetail("%s.", err->msg),
					 errhint("Use fewer rows or columns, or set pg_gpu.device to \"cpu\" to run on the CPU.")));
			break;
		case PGGPU_ERR_HOST_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("%s.", err->msg)));
			break;
		case PGGPU_ERR_NO_GPU:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no GPU can be used"),
					 errdetail("%s.", err->msg),
					 errhint("Set pg_gpu.device to \"auto\" or \"cpu\" to run on the CPU.")));
			break;
		case PGGPU_ERR_CUDA:
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("GPU failure"),
					 errdetail("%s.", err->msg),
					 errhint("Set pg_gpu.device to \"cpu\" to run on the CPU.")));
			break;
		case PGGPU_ERR_RANGE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("values too far apart in magnitude to cluster in double precision"),
					 errdetail("The %s.", err->msg),
					 errhint("Rescale the columns (or the centroids given), or leave out the rows of extreme magnitude, so that non-zero magnitudes span less than about 1e301.")));
			break;
		case PGGPU_ERR_LIBRARY:
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FILE),
					 errmsg("%s", err->msg),
					 errhint("Install OpenBLAS (Debian: libopenblas0) where the server's dynamic loader finds it.")));
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("pg_gpu internal error: %s", err->msg)));
	}
	pg_unreachable();
}

void
pg_gpu_check_interrupts(void *arg)
{
	CHECK_FOR_INTERRUPTS();
}

static void
data_release(void *arg)
{
	PgGpuData  *data = (PgGpuData *) arg;

	for (int i = 0; i < data->nparts; i++)
		pggpu_data_close(data->parts[i]);
	data->nparts = 0;
	data->ds = NULL;
}

/* the GPUs of n shares (dealt in turn: the first ones are those distinct ones) */
static int
distinct_gpus(const int *share_gpu, int n)
{
	int			gpus = 0;

	for (int i = 0; i < n; i++)
	{
		bool		seen = false;

		for (int j = 0; j < i; j++)
			seen |= share_gpu[j] == share_gpu[i];
		gpus += !seen && share_gpu[i] >= 0;
	}
	return gpus;
}

/* a new part of data on gpu, set up as the others (ERROR when it cannot be opened) */
static pggpu_data *
open_part(PgGpuData *data, int gpu, int64 expected_rows)
{
	pggpu_error err = {0};
	pggpu_data *ds;

	if ((data->nparts & (data->nparts - 1)) == 0 && data->nparts >= 4)
		data->parts = repalloc(data->parts, sizeof(pggpu_data *) * data->nparts * 2);
	if (pggpu_data_open(&ds, data->backend, gpu, data->d, expected_rows, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	data->parts[data->nparts++] = ds;
	pggpu_data_set_threads(ds, pg_gpu_threads(), pg_gpu_interrupt_pending);
	pggpu_data_set_interrupts(ds, pg_gpu_check_interrupts, NULL);
	pggpu_data_set_metric(ds, data->metric);
	pggpu_data_set_double_only(ds, data->double_only);
	if (pggpu_data_set_dtype(ds, data->dtype, &err) != PGGPU_OK ||
		(data->wide && pggpu_data_hold_wide(ds, &err) != PGGPU_OK))
		pg_gpu_raise(&err);
	return ds;
}

/*
 * The threads of a call on the CPU: pg_gpu.cpu_threads, or as many as a
 * parallel query may use; any role may set either, so both are bounded by
 * what the server lets one query have (max_worker_processes, set at start)
 */
int
pg_gpu_threads(void)
{
	int			want = pg_gpu_cpu_threads >= 1 ? pg_gpu_cpu_threads : 1 + max_parallel_workers_per_gather;

	return Max(1, Min(want, 1 + max_worker_processes));
}

/* one: a single share (the first GPU's, or the CPU), whatever the work */
static PgGpuData *
data_open(pggpu_backend backend, int d, int64 expected_rows, int k, bool one)
{
	PgGpuData  *data = palloc0(sizeof(PgGpuData));
	int			most = 1;		/* shares on one GPU */
	int64		share_rows;

	data->backend = backend;
	data->d = d;
	data->nshares = pg_gpu_shares(backend, data->share_gpu);
	/* too little work to gain from several GPUs: the first */
	if (one || (backend == PGGPU_BACKEND_GPU && data->nshares > 1 &&
				!pg_gpu_split_kmeans((double) expected_rows, d, k, data->nshares)))
		data->nshares = 1;
	if (backend == PGGPU_BACKEND_GPU)
		pggpu_gpus_start(data->share_gpu, distinct_gpus(data->share_gpu, data->nshares));
	for (int i = 0; i < data->nshares; i++)
	{
		int			on = 0;

		for (int j = 0; j < data->nshares; j++)
			on += data->share_gpu[j] == data->share_gpu[i];
		most = Max(most, on);
	}
	/*
	 * a part's rows, 8 bytes a value (4 once pg_gpu_data_set_dtype says
	 * float32, 2 for float16 past 32 columns): a quarter of the cap (two parts are on the GPU at once while
	 * streaming; the k-means state and workspace take the rest), shared by a
	 * GPU's shares
	 */
	if (pg_gpu_kmeans_gpu_memory > 0)
		data->part_rows = (int64) Max(pg_gpu_kmeans_gpu_memory * 1048576.0 / 4 / (8.0 * d) / most, 1);
	data->parts = palloc0(sizeof(pggpu_data *) * 4);
	data->cb.func = data_release;
	data->cb.arg = data;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &data->cb);
	share_rows = expected_rows / data->nshares + 1;
	data->share_rows = share_rows;
	for (int i = 0; i < data->nshares; i++)
	{
		open_part(data, data->share_gpu[i],
				  data->part_rows > 0 ? Min(share_rows, data->part_rows) : share_rows);
		data->share_part[i] = i;
	}
	data->ds = data->parts[0];
	return data;
}

PgGpuData *
pg_gpu_data_open(pggpu_backend backend, int d, int64 expected_rows, int k)
{
	return data_open(backend, d, expected_rows, k, false);
}

PgGpuData *
pg_gpu_data_open_one(pggpu_backend backend, int d, int64 expected_rows)
{
	return data_open(backend, d, expected_rows, 0, true);
}

void
pg_gpu_data_set_kmeans(PgGpuData *data, pggpu_metric metric, bool double_only)
{
	data->metric = metric;
	data->double_only = double_only;
	for (int i = 0; i < data->nparts; i++)
	{
		pggpu_data_set_metric(data->parts[i], metric);
		pggpu_data_set_double_only(data->parts[i], double_only);
	}
}

void
pg_gpu_data_set_dtype(PgGpuData *data, pggpu_dtype dtype)
{
	pggpu_error err = {0};

	/*
	 * A part holds its share of pg_gpu.kmeans_gpu_memory's bytes: more rows
	 * of smaller values.  The parts (no rows yet, a share each) are opened
	 * again for that many, so that every part has batches of the same rows
	 * (a full part's last batch moves to the next part whole).
	 */
	if (data->part_rows > 0 && data->dtype != dtype && data->nparts == data->nshares &&
		pg_gpu_data_rows(data) == 0)
	{
		int			n = data->nparts;

		data->part_rows = Max(data->part_rows * pggpu_dtype_held_bytes(data->dtype, data->d) /
							  pggpu_dtype_held_bytes(dtype, data->d), 1);
		data->dtype = dtype;
		for (int i = 0; i < n; i++)
			pggpu_data_close(data->parts[i]);
		data->nparts = 0;
		for (int i = 0; i < n; i++)
			open_part(data, data->share_gpu[i], Min(data->share_rows, data->part_rows));
		data->ds = data->parts[0];
		return;
	}
	data->dtype = dtype;
	for (int i = 0; i < data->nparts; i++)
		if (pggpu_data_set_dtype(data->parts[i], dtype, &err) != PGGPU_OK)
			pg_gpu_raise(&err);
}

void
pg_gpu_data_hold_wide(PgGpuData *data)
{
	pggpu_error err = {0};

	if (pg_gpu_data_rows(data) != 0 || data->dtype == PGGPU_FLOAT64)
		elog(ERROR, "pg_gpu: only floats or halves, before the first row, are held wide");
	/* a part's rows at 8 bytes a value again (pg_gpu_data_set_dtype made them more) */
	if (data->part_rows > 0)
		data->part_rows = Max(data->part_rows * pggpu_dtype_held_bytes(data->dtype, data->d) /
							  pggpu_dtype_held_bytes(PGGPU_FLOAT64, data->d), 1);
	data->wide = true;
	for (int i = 0; i < data->nparts; i++)
		if (pggpu_data_hold_wide(data->parts[i], &err) != PGGPU_OK)
			pg_gpu_raise(&err);
}

void
pg_gpu_data_unit_rows(PgGpuData *data)
{
	pggpu_error err = {0};

	for (int i = 0; i < data->nparts; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (pggpu_data_unit_rows(data->parts[i], &err) != PGGPU_OK)
			pg_gpu_raise(&err);
	}
}

pggpu_data *
pg_gpu_data_filling(PgGpuData *data)
{
	return data->parts[data->share_part[data->next_share]];
}

pggpu_data *
pg_gpu_data_next_part(PgGpuData *data)
{
	pggpu_error err = {0};
	int			s = data->next_share;
	pggpu_data *full = data->parts[data->share_part[s]];

	if (pggpu_data_park(full, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	/*
	 * The full part's batches exactly (its last batch moves over whole):
	 * expecting the rows of one of them gives the same batch, where
	 * expecting more could give a larger one (a planner's estimate under a
	 * part made the first part's smaller), and the batch moved would be
	 * taken as a partial one, its rows misplaced.  The part grows as rows
	 * come.
	 */
	open_part(data, data->share_gpu[s], pggpu_data_batch_rows(full));
	data->share_part[s] = data->nparts - 1;
	return data->parts[data->nparts - 1];
}

void
pg_gpu_data_next_share(PgGpuData *data)
{
	data->next_share = (data->next_share + 1) % data->nshares;
}

const char *
pg_gpu_data_device(const PgGpuData *data)
{
	int			gpus = distinct_gpus(data->share_gpu, data->nshares);

	if (gpus < 2)
		return pggpu_data_device_name(data->ds);
	return psprintf("%s (%d GPUs)", pggpu_data_device_name(data->ds), gpus);
}

int64
pg_gpu_data_rows(const PgGpuData *data)
{
	int64		n = 0;

	for (int i = 0; i < data->nparts; i++)
		n += pggpu_data_rows(data->parts[i]);
	return n;
}

/* rows (ascending, indexes in read order) of every part, m x d into X */
void
pg_gpu_data_get_rows(PgGpuData *data, const int64 *rows, int m, double *X)
{
	pggpu_error err = {0};
	int64		off = 0;
	int			r = 0;

	for (int i = 0; i < data->nparts && r < m; i++)
	{
		pggpu_data *ds = data->parts[i];
		int64		n = pggpu_data_rows(ds);
		int			r0 = r;
		int64	   *local;

		while (r < m && rows[r] < off + n)
			r++;
		if (r > r0)
		{
			bool		parked = pggpu_data_parked(ds);

			local = palloc(sizeof(int64) * (r - r0));
			for (int q = r0; q < r; q++)
				local[q - r0] = rows[q] - off;
			if (pggpu_data_get_rows(ds, local, r - r0, X + (int64) r0 * data->d, &err) != PGGPU_OK ||
				(parked && pggpu_data_park(ds, &err) != PGGPU_OK))
				pg_gpu_raise(&err);
			pfree(local);
		}
		off += n;
	}
}

void
pg_gpu_data_close(PgGpuData *data)
{
	data_release(data);
}

static void
matmul_release(void *arg)
{
	PgGpuMatmul *w = (PgGpuMatmul *) arg;

	for (int i = 0; i < w->nall; i++)
		pggpu_matmul_close(w->all[i]);
	w->nall = 0;
}

PgGpuMatmul *
pg_gpu_matmul_open(pggpu_backend backend, MemoryContext cxt)
{
	PgGpuMatmul *w = MemoryContextAllocZero(cxt, sizeof(PgGpuMatmul));
	pggpu_error err = {0};
	int			gpus[PGGPU_MAX_THREADS];
	int			n;

	w->cb.func = matmul_release;
	w->cb.arg = w;
	MemoryContextRegisterResetCallback(cxt, &w->cb);
	n = pg_gpu_shares(backend, gpus);
	if (pggpu_matmul_open(&w->all[0], backend, gpus[0], &err) != PGGPU_OK)
	{
		/* a GPU without cuBLAS: auto falls back like with no GPU at all */
		if (err.code != PGGPU_ERR_NO_GPU || pg_gpu_device != PG_GPU_DEVICE_AUTO)
			pg_gpu_raise(&err);
		notice_fallback(err.msg);
		memset(&err, 0, sizeof(err));
		if (pggpu_matmul_open(&w->all[0], PGGPU_BACKEND_CPU, -1, &err) != PGGPU_OK)
			pg_gpu_raise(&err);
		backend = PGGPU_BACKEND_CPU;
		n = pg_gpu_shares(backend, gpus);
	}
	w->nall = 1;
	/* the other shares of a's rows (pg_gpu.gpus, pg_gpu.parts): opened when a product is split */
	w->backend = backend;
	w->nshares = n;
	memcpy(w->share_gpu, gpus, sizeof(int) * n);
	return w;
}

void
pg_gpu_matmul_open_shares(PgGpuMatmul *w)
{
	pggpu_error err = {0};

	if (w->nall >= w->nshares)
		return;
	if (w->backend == PGGPU_BACKEND_GPU)
		pggpu_gpus_start(w->share_gpu, distinct_gpus(w->share_gpu, w->nshares));
	for (int i = w->nall; i < w->nshares; i++)
	{
		if (pggpu_matmul_open(&w->all[i], w->backend, w->share_gpu[i], &err) != PGGPU_OK)
			pg_gpu_raise(&err);
		w->nall++;
	}
}

void
pg_gpu_matmul_keep_only(PgGpuMatmul *w, int which)
{
	pggpu_matmul_keep_only(w->all[0], which);
	for (int i = 1; i < w->nall; i++)
		pggpu_matmul_close(w->all[i]);
	w->nall = 1;
	w->nshares = 1;
}

/* (for the compute layer's threads: polled by this thread while they run) */
bool
pg_gpu_interrupt_pending(void)
{
	return InterruptPending;
}

/* bytes as "N MB", or "N kB" under a megabyte (rounded up) */
static char *
size_text(double bytes)
{
	if (bytes >= 1048576.0)
		return psprintf("%.0f MB", ceil(bytes / 1048576.0));
	return psprintf("%.0f kB", ceil(bytes / 1024.0));
}

bool
pg_gpu_memory_allowed(double bytes)
{
	return pg_gpu_max_memory < 0 || bytes <= (double) pg_gpu_max_memory * 1024.0;
}

int64
pg_gpu_grow_cap(int64 need, int64 want, double unit, double others)
{
	double		fit;

	if (want < need)
		want = need;
	if (pg_gpu_memory_allowed(others + unit * (double) want))
		return want;
	/* halfway from need to what would fit: a few more growths, room left */
	fit = floor(((double) pg_gpu_max_memory * 1024.0 - others) / unit);
	return fit > (double) need ? need + (int64) ((fit - (double) need) / 2) : need;
}

void
pg_gpu_check_memory(double bytes, const char *what, const char *detail_fmt,...)
{
	char		detail[300];
	va_list		ap;

	if (pg_gpu_memory_allowed(bytes))
		return;
	va_start(ap, detail_fmt);
	vsnprintf(detail, sizeof(detail), detail_fmt, ap);
	va_end(ap);
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("%s needs %s, more than pg_gpu.max_memory (%s)",
					what, size_text(bytes), size_text((double) pg_gpu_max_memory * 1024.0)),
			 errdetail("%s", detail),
			 errhint("A superuser can raise pg_gpu.max_memory (-1: no limit), also for a role or database alone; or use fewer rows or columns.")));
}

void
pg_gpu_matmul_count(PgGpuMatmul *w, int which, Size bytes)
{
	w->bytes[which] = bytes;
}

double
pg_gpu_matmul_others(const PgGpuMatmul *w, int which)
{
	return (double) w->bytes[0] + w->bytes[1] + w->bytes[2] - w->bytes[which];
}

void *
pg_gpu_matmul_buffer(PgGpuMatmul *w, int which, Size bytes, Size keep)
{
	pggpu_error err = {0};
	void	   *p;

	if (which >= 0 && which < 3 && bytes > w->bytes[which])
	{
		Size		others = w->bytes[0] + w->bytes[1] + w->bytes[2] - w->bytes[which];

		pg_gpu_check_memory((double) others + (double) bytes, "gpu_matmul",
							"Its matrices A, B and C take rows x columns x 8 bytes each (4 for real[]).");
		w->bytes[which] = bytes;
	}
	p = pggpu_matmul_buffer(w->all[0], which, bytes, keep, &err);

	if (p == NULL)
		pg_gpu_raise(&err);
	return p;
}
