/*
 * transform.c - gpu_kmeans_transform(relation, model, n, id_column): every
 * row's n nearest clusters of a model (all k by default), nearest first,
 * with their distances, as scikit-learn's transform gives every cluster's
 * distance.  The model's columns, metric and scaling, as gpu_kmeans_apply;
 * with n => 1 its very cluster and distance.  The rows stream past a chunk
 * at a time (sample.c), the results go into the tuplestore as they come
 * (it spills to disk): neither the rows nor the results are all held.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "pg_gpu.h"

PG_FUNCTION_INFO_V1(gpu_kmeans_transform);
PG_FUNCTION_INFO_V1(gpu_kmeans_transform_keyed);

/* its arguments (the keyed overload's id_type after the model, left out: keys.c) */
enum
{
	AT_RELATION, AT_MODEL, AT_N, AT_ID_COLUMN
};
#define AT_ID_TYPE 2

typedef struct TransformOut
{
	ReturnSetInfo *rsinfo;
	PgGpuRows	rows;			/* the counts only, for the NOTICE of rows left out */
} TransformOut;

/* one result row: (id, rank, cluster, distance); rank 0, an unusable row: (id, NULL, NULL, NULL) */
static void
emit_nearest(void *arg, Datum key, int rank, int32 cluster, double distance)
{
	TransformOut *o = (TransformOut *) arg;
	Datum		v[4] = {key, Int32GetDatum(rank), Int32GetDatum(cluster), Float8GetDatum(distance)};
	bool		nulls[4] = {false, rank == 0, rank == 0, rank == 0};

	if (rank == 0)
		o->rows.ninvalid++;
	else if (rank == 1)
		o->rows.nvalid++;
	tuplestore_putvalues(o->rsinfo->setResult, o->rsinfo->setDesc, v, nulls);
}

static Datum
transform_call(FunctionCallInfo fcinfo, const Oid *keytypes)
{
	TransformOut o;
	PgGpuSource src;
	PgGpuModel *m;
	int			n;

	pg_gpu_require_arg(fcinfo, AT_RELATION, "relation");
	pg_gpu_require_arg(fcinfo, AT_MODEL, "model");
	m = pg_gpu_model_from_jsonb(PG_GETARG_JSONB_P(AT_MODEL));
	n = PG_ARGISNULL(AT_N) ? m->k : PG_GETARG_INT32(AT_N);
	if (n < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be at least 1, not %d", n),
				 errhint("Leave n NULL for the distance to every cluster of the model.")));
	n = Min(n, m->k);			/* (more than k: every cluster, as NULL) */
	memset(&src, 0, sizeof(src));
	pg_gpu_model_source(m, PG_GETARG_OID(AT_RELATION),
						PG_ARGISNULL(AT_ID_COLUMN) ? NULL : PG_GETARG_TEXT_PP(AT_ID_COLUMN), keytypes[0], &src);
	/* (a distributed table: read through Citus's executor, DEBUG1 says so) */
	(void) pg_gpu_on_nodes(src.relid, "gpu_kmeans_transform reads on the coordinator");
	InitMaterializedSRF(fcinfo, 0);
	memset(&o, 0, sizeof(o));
	o.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	pg_gpu_progress_begin("gpu_kmeans_transform");
	pg_gpu_transform_rows(&src, m->metric, m->standard ? m->mean : NULL, m->std, m->scaled, m->k, n,
						  emit_nearest, &o);
	pg_gpu_notice_skipped(&src, &o.rows, "they come back once, with rank, cluster and distance NULL");
	pg_gpu_progress_end();
	return (Datum) 0;
}

Datum
gpu_kmeans_transform(PG_FUNCTION_ARGS)
{
	static const Oid none[2];

	return transform_call(fcinfo, none);
}

Datum
gpu_kmeans_transform_keyed(PG_FUNCTION_ARGS)
{
	return pg_gpu_call_keyed(fcinfo, AT_ID_TYPE, 1, transform_call);
}
