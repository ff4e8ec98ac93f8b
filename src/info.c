/*
 * info.c - gpu_info(): the GPUs this backend sees.  No rows, not an error,
 * where there is none (or the build has no CUDA).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "pg_gpu.h"

PG_FUNCTION_INFO_V1(gpu_info);

#define MAX_GPUS 64

static Datum
version_text(int v)
{
	return CStringGetTextDatum(psprintf("%d.%d", v / 1000, (v % 1000) / 10));
}

Datum
gpu_info(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	pggpu_error err = {0};

	InitMaterializedSRF(fcinfo, 0);
	if (!pggpu_cuda_built())
		return (Datum) 0;
	for (int i = 0; i < MAX_GPUS; i++)
	{
		pggpu_device_info info;
		Datum		v[8];
		bool		nulls[8] = {false};

		if (pggpu_gpu_info(i, &info, &err) != PGGPU_OK)
			break;				/* no device i: the end of the list */
		v[0] = Int32GetDatum(info.index);
		v[1] = CStringGetTextDatum(info.name);
		v[2] = CStringGetTextDatum(psprintf("%d.%d", info.cc_major, info.cc_minor));
		v[3] = Int32GetDatum(info.multiprocessors);
		v[4] = Int64GetDatum(info.memory_total / (1024 * 1024));
		v[5] = Int64GetDatum(info.memory_free / (1024 * 1024));
		v[6] = version_text(info.driver_version);
		v[7] = version_text(info.runtime_version);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}
