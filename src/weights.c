/*
 * weights.c - the rows' weights of a k-means call (weight_column, or the
 * points' M): the argument resolved to a column, and each row's weight read
 * beside its values (rows.c's, vector.c's row decoders call it).
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_gpu.h"

void
pg_gpu_weight_arg(FunctionCallInfo fcinfo, int n, int64 sample, PgGpuSource *src)
{
	pg_gpu_resolve_weight(src, n >= 0 && PG_NARGS() > n && !PG_ARGISNULL(n) ? PG_GETARG_TEXT_PP(n) : NULL);
	if (PG_GPU_WEIGHTED(src))
		pg_gpu_check_source_memory(src, sample);
}

void
pg_gpu_resolve_weight(PgGpuSource *src, text *weight_column)
{
	Relation	rel;
	TupleDesc	td;
	char	   *name;
	int			a;

	if (weight_column == NULL)
	{
		/* points with M weigh M, as ST_ClusterKMeans weighs them */
		src->mweights = src->veckind == PG_GPU_VEC_GEOMETRY && src->first_m;
		return;
	}
	name = text_to_cstring(weight_column);
	rel = relation_open(src->relid, AccessShareLock);
	td = RelationGetDescr(rel);
	a = pg_gpu_find_column(td, name);
	if (a < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", name, src->relname),
				 errhint("weight_column names a numeric column of the relation, each row's weight (0 or more).")));
	src->wtype = getBaseType(TupleDescAttr(td, a)->atttypid);
	if (!pg_gpu_is_numeric_type(src->wtype))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("weight column \"%s\" is of type %s, not a numeric type", name,
						format_type_be(TupleDescAttr(td, a)->atttypid)),
				 errhint("Use a smallint, integer, bigint, real, double precision or numeric column, or cast in a view.")));
	src->wname = pstrdup(NameStr(TupleDescAttr(td, a)->attname));
	src->watt = a;
	relation_close(rel, NoLock);
}

bool
pg_gpu_slot_weight(const PgGpuRowSpec *spec, TupleTableSlot *slot, double m, double *w)
{
	if (spec->mweights)
		*w = isnan(m) ? 1.0 : m;
	else if (slot->tts_isnull[spec->wpos])
		return false;
	else
		*w = pg_gpu_datum_to_double(slot->tts_values[spec->wpos], spec->wtype);
	if (*w < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 spec->mweights ?
				 errmsg("a point of column \"%s\" of \"%s\" has a negative M (%g), its weight",
						NameStr(spec->colname), NameStr(spec->relname), *w) :
				 errmsg("weight column \"%s\" of \"%s\" holds a negative weight (%g)",
						NameStr(spec->wname), NameStr(spec->relname), *w),
				 errhint("A row weighs 0 or more (0: labelled, moving no centroid); filter or map negative weights in a view.")));
	return isfinite(*w);
}
