/*
 * compat.h - the differences between the PostgreSQL versions pg_gpu builds
 * against (15 to 18), in one place.  Everything else in src/ is written
 * against the newest API and these shims.
 */
#ifndef PG_GPU_COMPAT_H
#define PG_GPU_COMPAT_H

#include "postgres.h"

#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#if PG_VERSION_NUM < 150000
#error "pg_gpu needs PostgreSQL 15 or later"
#endif

/*
 * 18: pg_noreturn precedes a declaration; before, pg_attribute_noreturn()
 * followed it.  GCC-style attributes may stand in front too.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/* 18: the primary key's index takes whether a deferrable one will do */
static inline Oid
pg_gpu_primary_key_index(Relation rel)
{
#if PG_VERSION_NUM >= 180000
	return RelationGetPrimaryKeyIndex(rel, false);
#else
	return RelationGetPrimaryKeyIndex(rel);
#endif
}

/* 16: object_aclcheck replaced the per-kind aclcheck functions */
static inline AclResult
pg_gpu_namespace_aclcheck(Oid nspid, Oid roleid, AclMode mode)
{
#if PG_VERSION_NUM >= 160000
	return object_aclcheck(NamespaceRelationId, nspid, roleid, mode);
#else
	return pg_namespace_aclcheck(nspid, roleid, mode);
#endif
}

/* (the same for a function) */
static inline AclResult
pg_gpu_proc_aclcheck(Oid procid, Oid roleid, AclMode mode)
{
#if PG_VERSION_NUM >= 160000
	return object_aclcheck(ProcedureRelationId, procid, roleid, mode);
#else
	return pg_proc_aclcheck(procid, roleid, mode);
#endif
}

/*
 * The executor's privilege check of SELECT <cols> FROM rel, as a plan of
 * that query makes it (ERROR when it fails).  cols: attribute numbers less
 * FirstLowInvalidHeapAttributeNumber, as selectedCols holds them.  16 moved
 * the permissions from RangeTblEntry into RTEPermissionInfo.
 */
extern void pg_gpu_check_select_privileges(Relation rel, Bitmapset *cols);

#endif							/* PG_GPU_COMPAT_H */
