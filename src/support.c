/*
 * src/support.c - the planner's row estimate for gpu_kmeans and
 * gpu_kmeans_assign (a support function, SupportRequestRows).
 *
 * Both return a row for every row of their relation, so a fixed ROWS 1000
 * made joins over their output (UPDATE ... FROM gpu_kmeans(...)) plan
 * nested loops over millions of rows.  Where the relation argument is a
 * constant after simplification (the usual 'points' or 'points'::regclass),
 * the estimate is the relation's own, as the planner would make it for a
 * scan of the table: pg_class.reltuples where the table has been analyzed
 * or vacuumed, else from its size on disk (estimate_rel_size).  Views,
 * partitioned and foreign tables keep the declared ROWS.
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "utils/rel.h"

PG_FUNCTION_INFO_V1(pg_gpu_rows_support);

/* the estimated rows of relation relid, or -1 where there is none */
static double
relation_rows(Oid relid)
{
	Relation	rel = try_relation_open(relid, AccessShareLock);
	double		rows = -1;

	if (rel == NULL)
		return -1;
	if (rel->rd_rel->relkind == RELKIND_RELATION || rel->rd_rel->relkind == RELKIND_MATVIEW)
	{
		BlockNumber pages;
		double		tuples,
					allvisfrac;

		estimate_rel_size(rel, NULL, &pages, &tuples, &allvisfrac);
		rows = tuples;
	}
	relation_close(rel, AccessShareLock);
	return rows;
}

Datum
pg_gpu_rows_support(PG_FUNCTION_ARGS)
{
	Node	   *rawreq = (Node *) PG_GETARG_POINTER(0);
	SupportRequestRows *req;
	FuncExpr   *fn;
	Node	   *arg;
	double		rows;

	if (!IsA(rawreq, SupportRequestRows))
		PG_RETURN_POINTER(NULL);
	req = (SupportRequestRows *) rawreq;
	if (!is_funcclause(req->node))
		PG_RETURN_POINTER(NULL);
	fn = (FuncExpr *) req->node;
	if (list_length(fn->args) < 1)
		PG_RETURN_POINTER(NULL);
	/* the relation, folded to a constant where it can be */
	arg = (Node *) linitial(fn->args);
	if (req->root != NULL)
		arg = estimate_expression_value(req->root, arg);
	if (!IsA(arg, Const) || ((Const *) arg)->constisnull ||
		((Const *) arg)->consttype != REGCLASSOID)
		PG_RETURN_POINTER(NULL);
	rows = relation_rows(DatumGetObjectId(((Const *) arg)->constvalue));
	if (rows < 0)
		PG_RETURN_POINTER(NULL);
	req->rows = rows > 1 ? rows : 1;
	PG_RETURN_POINTER(req);
}
