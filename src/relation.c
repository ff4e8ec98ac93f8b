/*
 * relation.c - what the readers share about a relation: the types of its
 * columns, a column by name, opening it as the caller would (privileges,
 * schema usage), its estimated rows, and a SELECT run into a receiver
 * (SPI, in the same order at every call).  read.c, scan.c and citus.c use
 * it; it uses none of them.
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/tupdesc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "optimizer/plancat.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_gpu.h"

bool
pg_gpu_is_numeric_type(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID ||
		t == FLOAT4OID || t == FLOAT8OID || t == NUMERICOID;
}

bool
pg_gpu_is_integer_type(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID;
}

int
pg_gpu_find_column(TupleDesc td, const char *name)
{
	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return a;
	}
	return -1;
}

/*
 * The checks a SELECT makes before it reaches a relation named in its query,
 * for a relation given by OID: it exists (an OID of a dropped relation, or
 * 0, is what a SELECT of a name that is gone says: 42P01), and the caller
 * may look into its schema (USAGE, 42501), which a name lookup requires.
 */
Relation
pg_gpu_open_relation(Oid relid, char **relname, char **qualname)
{
	Relation	rel = OidIsValid(relid) ? try_relation_open(relid, AccessShareLock) : NULL;
	char		kind;
	AclResult	aclresult;

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid),
				 errhint("Pass the relation by name, for example 'schema.table'; it may have been dropped.")));
	kind = rel->rd_rel->relkind;
	aclresult = pg_gpu_namespace_aclcheck(RelationGetNamespace(rel), GetUserId(), ACL_USAGE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_SCHEMA,
					   get_namespace_name(RelationGetNamespace(rel)));

	*relname = pstrdup(RelationGetRelationName(rel));
	*qualname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										   RelationGetRelationName(rel));
	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE &&
		kind != RELKIND_VIEW && kind != RELKIND_MATVIEW && kind != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table, view or materialized view", *relname)));
	return rel;
}

double
pg_gpu_estimate_rows(Relation rel)
{
	char		kind = rel->rd_rel->relkind;
	BlockNumber pages;
	double		tuples = 0;
	double		allvisfrac;

	if (kind == RELKIND_RELATION || kind == RELKIND_MATVIEW)
		estimate_rel_size(rel, NULL, &pages, &tuples, &allvisfrac);
	return tuples > 0 ? tuples : 0;
}

static void
null_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
null_shutdown(DestReceiver *self)
{
}

void
pg_gpu_receiver_init(DestReceiver *dest, bool (*receive) (TupleTableSlot *, DestReceiver *))
{
	memset(dest, 0, sizeof(*dest));
	dest->receiveSlot = receive;
	dest->rStartup = null_startup;
	dest->rShutdown = null_shutdown;
	dest->rDestroy = null_shutdown;
	dest->mydest = DestNone;
}

void
pg_gpu_run_select(const char *sql, DestReceiver *dest, bool read_only)
{
	SPIExecuteOptions opts;
	int			ret;
	int			nest = NewGUCNestLevel();

	/*
	 * Rows in the same order at every call: a synchronized scan would start
	 * where a concurrent scan of the table is, and k-means++ seeding (like
	 * scikit-learn's) depends on the order of the rows.  Restored below, or
	 * by the abort on error.
	 */
	(void) set_config_option("synchronize_seqscans", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	memset(&opts, 0, sizeof(opts));
	opts.dest = dest;
	opts.read_only = read_only;
	ret = SPI_execute_extended(sql, &opts);
	if (ret < 0)
		elog(ERROR, "SPI_execute_extended failed: %s", SPI_result_code_string(ret));
	SPI_finish();
	AtEOXact_GUC(true, nest);
}
