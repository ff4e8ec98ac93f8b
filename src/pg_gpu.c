/*
 * pg_gpu.c - module load, settings, device choice, error mapping, and the
 * memory-context tie that frees GPU resources on every exit path.
 *
 * CUDA is never touched here at load time: the postmaster may load this
 * library (shared_preload_libraries) and CUDA does not survive fork().  It is
 * initialised lazily by the first call that needs it, in that backend.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "pg_gpu.h"

PG_MODULE_MAGIC;

int			pg_gpu_device = PG_GPU_DEVICE_AUTO;

static const struct config_enum_entry device_options[] = {
	{"auto", PG_GPU_DEVICE_AUTO, false},
	{"gpu", PG_GPU_DEVICE_GPU, false},
	{"cpu", PG_GPU_DEVICE_CPU, false},
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
	MarkGUCPrefixReserved("pg_gpu");
}

/* usable GPUs in this backend: -1 until first asked */
static int	gpu_count = -1;
static char gpu_count_why[512];
static bool fallback_noticed = false;

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
			if (!fallback_noticed)
			{
				fallback_noticed = true;
				ereport(NOTICE,
						(errmsg("pg_gpu: no usable GPU, running on the CPU"),
						 errdetail("%s.", gpu_count_why),
						 errhint("Set pg_gpu.device to \"cpu\" to silence this notice.")));
			}
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

	pggpu_data_close(data->ds);
	data->ds = NULL;
}

PgGpuData *
pg_gpu_data_open(pggpu_backend backend, int d, int64 expected_rows)
{
	PgGpuData  *data = palloc0(sizeof(PgGpuData));
	pggpu_error err = {0};

	data->cb.func = data_release;
	data->cb.arg = data;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &data->cb);
	if (pggpu_data_open(&data->ds, backend, -1, d, expected_rows, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	return data;
}

void
pg_gpu_data_close(PgGpuData *data)
{
	data_release(data);
}
