/*
 * compat.c - what compat.h declares that is more than a macro.
 */
#include "postgres.h"

#include "executor/executor.h"
#include "nodes/makefuncs.h"
#if PG_VERSION_NUM >= 160000
#include "parser/parse_relation.h"
#endif

#include "pg_gpu.h"

void
pg_gpu_check_select_privileges(Relation rel, Bitmapset *cols)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = AccessShareLock;
#if PG_VERSION_NUM >= 160000
	{
		List	   *perminfos = NIL;
		RTEPermissionInfo *perm = addRTEPermissionInfo(&perminfos, rte);

		perm->requiredPerms = ACL_SELECT;
		perm->selectedCols = cols;
		ExecCheckPermissions(list_make1(rte), perminfos, true);
	}
#else
	rte->requiredPerms = ACL_SELECT;
	rte->selectedCols = cols;
	ExecCheckRTPerms(list_make1(rte), true);
#endif
}
