/*
 * citus.c - the Citus cluster as pg_gpu's coordinator sees it: Citus's
 * metadata (which tables it distributes, where their shards are) and one
 * libpq connection a node, for the calls that run where the rows live
 * (citus_kmeans.c, citus_matmul.c; the nodes' side is citus_node.c).
 *
 * A connection is made as the calling user with Citus's authentication
 * (citus.node_conninfo, pg_dist_authinfo) within
 * citus.node_connection_timeout, carries the session's pg_gpu settings,
 * and lives for one call.  Every wait is on the sockets and the latch, so a
 * cancel or statement_timeout answers at once; then (and after any error)
 * each busy connection gets a cancel request (PQcancel) and every
 * connection is closed, which ends the node's backend and frees whatever it
 * held.  An error on a node is raised here with its SQLSTATE, naming the
 * node; a lost connection is 08006, one never made 08001.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq-fe.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/wait_event.h"

#include "pg_gpu.h"
#include "citus.h"

bool		pg_gpu_citus_nodes = true;

/*
 * The settings a node's backend takes from the calling session: those any
 * role may set.  The superuser's bounds (pg_gpu.max_memory, pg_gpu.gpus)
 * are each node's own.
 */
static const char *const node_settings[] = {
	"pg_gpu.device", "pg_gpu.kmeans_precision", "pg_gpu.kmeans_gpu_memory",
	"pg_gpu.cpu_threads", "pg_gpu.allow_tf32"
};

/*
 * Citus's partition method of relid ('h' hash, 'r' range, 'a' append, 'n'
 * none: reference and Citus local tables), or 0 when Citus does not manage
 * it.  Read from pg_dist_partition directly (no privilege on it needed).
 */
char
pg_gpu_citus_method(Oid relid)
{
	Oid			catid = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	Relation	cat;
	AttrNumber	att,
				matt;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char		method = 0;

	if (!OidIsValid(catid))
		return 0;
	cat = table_open(catid, AccessShareLock);
	att = pg_gpu_find_column(RelationGetDescr(cat), "logicalrelid") + 1;
	matt = pg_gpu_find_column(RelationGetDescr(cat), "partmethod") + 1;
	if (att > 0 && matt > 0)
	{
		ScanKeyInit(&key, att, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
		scan = systable_beginscan(cat, InvalidOid, false, NULL, 1, &key);
		if (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			bool		isnull;
			Datum		m = heap_getattr(tup, matt, RelationGetDescr(cat), &isnull);

			method = isnull ? 'n' : DatumGetChar(m);
		}
		systable_endscan(scan);
	}
	table_close(cat, AccessShareLock);
	return method;
}

/* the nodes' functions (citus_node.c), as the coordinator calls them */
static const char *const node_functions[] = {
	"pg_gpu_node_kmeans_load", "pg_gpu_node_kmeans_sample", "pg_gpu_node_kmeans_step",
	"pg_gpu_node_kmeans_labels", "pg_gpu_node_kmeans_close", "pg_gpu_node_matmul_load",
	"pg_gpu_node_matmul_product"
};

/* pg_gpu's schema here (and, as Citus creates the extension alike, on every node) */
static Oid
extension_schema(void)
{
	Oid			ext = get_extension_oid("pg_gpu", false);
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(nsp) || get_namespace_name(nsp) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_SCHEMA),
				 errmsg("the schema of extension pg_gpu does not exist"),
				 errhint("Reinstall the extension: DROP EXTENSION pg_gpu; CREATE EXTENSION pg_gpu.")));
	return nsp;
}

/* pg_gpu's schema, quoted as an identifier: what qualifies every call sent to a node */
const char *
pg_gpu_node_schema(void)
{
	return quote_identifier(get_namespace_name(extension_schema()));
}

/* the GRANT that lets role run the nodes' functions (on every node) */
char *
pg_gpu_node_grant(const char *role)
{
	StringInfoData s;
	const char *nsp = pg_gpu_node_schema();

	initStringInfo(&s);
	appendStringInfoString(&s, "GRANT EXECUTE ON FUNCTION ");
	for (int i = 0; i < lengthof(node_functions); i++)
		appendStringInfo(&s, "%s%s.%s", i ? ", " : "", nsp, node_functions[i]);
	appendStringInfo(&s, " TO %s", quote_identifier(role));
	return s.data;
}

/*
 * May the calling user execute the nodes' functions?  Checked on the
 * coordinator's own copies (a Citus deployment grants on every node alike);
 * NULL if so, else why not
 */
static const char *
node_functions_refused(void)
{
	Oid			nsp = extension_schema();
	char	   *nspname = get_namespace_name(nsp);

	for (int i = 0; i < lengthof(node_functions); i++)
	{
		Oid			fn = LookupFuncName(list_make2(makeString(nspname), makeString(pstrdup(node_functions[i]))),
									   -1, NULL, true);

		if (!OidIsValid(fn))
			return psprintf("function %s.%s does not exist (ALTER EXTENSION pg_gpu UPDATE installs it)",
							quote_identifier(nspname), node_functions[i]);
		if (pg_gpu_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
			return psprintf("the calling role may not execute pg_gpu's node functions (%s on every node lets it)",
							pg_gpu_node_grant(GetUserNameFromId(GetUserId(), false)));
	}
	return NULL;
}

/*
 * Does a k-means call on relid run on the Citus nodes that hold its shards?
 * Not for tables Citus does not distribute, nor with pg_gpu.citus_nodes
 * off, nor for a call that says why not (why_not), nor in a transaction
 * that has written: DEBUG1 says so for a distributed table.
 */
bool
pg_gpu_on_nodes(Oid relid, const char *why_not)
{
	char		m = pg_gpu_citus_method(relid);

	if (m == 0 || m == 'n')
		return false;
	if (!pg_gpu_citus_nodes)
	{
		elog(DEBUG1, "pg_gpu: the distributed table is read through Citus's executor: pg_gpu.citus_nodes is off");
		return false;
	}
	if (why_not)
	{
		elog(DEBUG1, "pg_gpu: the distributed table is read through Citus's executor: %s", why_not);
		return false;
	}
	if (GetTopTransactionIdIfAny() != InvalidTransactionId)
	{
		elog(DEBUG1, "pg_gpu: the distributed table is read through Citus's executor: this transaction has written, and its rows are seen only on Citus's connections");
		return false;
	}
	if ((why_not = node_functions_refused()) != NULL)
	{
		elog(DEBUG1, "pg_gpu: the distributed table is read through Citus's executor: %s", why_not);
		return false;
	}
	return true;
}


/* ---- connections --------------------------------------------------------- */

static void
release_nodes(void *arg)
{
	PgGpuNodes *ns = (PgGpuNodes *) arg;

	for (int i = 0; i < ns->nnodes; i++)
	{
		PGconn	   *conn = ns->nodes[i].conn;

		if (conn == NULL)
			continue;
		ns->nodes[i].conn = NULL;
		/* a node still computing: stop it before the connection goes */
		if (PQtransactionStatus(conn) == PQTRANS_ACTIVE)
		{
			PGcancel   *c = PQgetCancel(conn);
			char		buf[256];

			if (c)
			{
				PQcancel(c, buf, sizeof(buf));
				PQfreeCancel(c);
			}
		}
		PQfinish(conn);
	}
}

pg_noreturn void
pg_gpu_node_lost(PgGpuNode *node, const char *doing)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("lost the connection to Citus node %s:%d while %s", node->host, node->port, doing),
			 errdetail("%s", pchomp(PQerrorMessage(node->conn))),
			 errhint("Check that the node is up (SELECT * FROM citus_check_cluster_node_health()), then run the call again.")));
}

/* waits until conn's socket is ready for "what" (WL_SOCKET_*), answering interrupts */
static void
wait_socket(PGconn *conn, int what)
{
	int			rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | what,
									   PQsocket(conn), -1, PG_WAIT_EXTENSION);

	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* the authinfo of pg_dist_authinfo for this node and role (the node's own row first), or NULL */
static char *
node_authinfo(int nodeid, const char *role)
{
	Oid			catid = get_relname_relid("pg_dist_authinfo", PG_CATALOG_NAMESPACE);
	Relation	cat;
	TableScanDesc scan;
	HeapTuple	tup;
	char	   *found = NULL;
	int			best = -1;
	AttrNumber	an, ar, ai;

	if (!OidIsValid(catid))
		return NULL;
	cat = table_open(catid, AccessShareLock);
	an = pg_gpu_find_column(RelationGetDescr(cat), "nodeid") + 1;
	ar = pg_gpu_find_column(RelationGetDescr(cat), "rolename") + 1;
	ai = pg_gpu_find_column(RelationGetDescr(cat), "authinfo") + 1;
	if (an > 0 && ar > 0 && ai > 0)
	{
		scan = table_beginscan_catalog(cat, 0, NULL);
		while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
		{
			bool		n1, n2, n3;
			int			id = DatumGetInt32(heap_getattr(tup, an, RelationGetDescr(cat), &n1));
			Name		r = DatumGetName(heap_getattr(tup, ar, RelationGetDescr(cat), &n2));
			Datum		info = heap_getattr(tup, ai, RelationGetDescr(cat), &n3);
			int			rank;

			if (n1 || n2 || n3 || (id != nodeid && id != 0) ||
				(strcmp(NameStr(*r), role) != 0 && NameStr(*r)[0] != '\0'))
				continue;
			/* the node's own row before the wildcard node 0; the role's before the empty role */
			rank = (id == nodeid ? 2 : 0) + (NameStr(*r)[0] != '\0' ? 1 : 0);
			if (rank > best)
				best = rank, found = TextDatumGetCString(info);
		}
		table_endscan(scan);
	}
	table_close(cat, AccessShareLock);
	return found;
}

/* adds the keywords of a conninfo string (citus.node_conninfo, authinfo) */
static void
add_conninfo(const char *s, const char **kw, const char **val, int *n, int max)
{
	PQconninfoOption *opts;
	char	   *msg = NULL;

	if (s == NULL || *s == '\0')
		return;
	opts = PQconninfoParse(s, &msg);
	if (opts == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("could not parse Citus's connection settings: %s", msg ? msg : "out of memory")));
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (o->val && *n < max - 1)
		{
			kw[*n] = pstrdup(o->keyword);
			val[*n] = pstrdup(o->val);
			(*n)++;
		}
	PQconninfoFree(opts);
}

/* connects to a node as the calling user, without blocking interrupts */
static void
node_connect(PgGpuNode *node)
{
	const char *kw[40];
	const char *val[40];
	int			n = 0;
	char	   *role = GetUserNameFromId(GetUserId(), false);
	StringInfoData opts;
	const char *timeout;
	int			timeout_ms = 30000;
	TimestampTz deadline;
	PostgresPollingStatusType ps = PGRES_POLLING_WRITING;

	initStringInfo(&opts);
	for (int i = 0; i < lengthof(node_settings); i++)
	{
		const char *v = GetConfigOption(node_settings[i], true, false);

		if (v)
			appendStringInfo(&opts, " -c %s=%s", node_settings[i], v);
	}
	/* nothing on the node resolves by the caller's path: every name sent is qualified */
	appendStringInfoString(&opts, " -c search_path=pg_catalog");
	/* (GetConfigOption's value of an integer lives in a static buffer until its next call) */
	timeout = GetConfigOption("citus.node_connection_timeout", true, false);
	if (timeout == NULL || !parse_int(timeout, &timeout_ms, GUC_UNIT_MS, NULL) || timeout_ms <= 0)
		timeout_ms = 30000;
	add_conninfo(GetConfigOption("citus.node_conninfo", true, false), kw, val, &n, lengthof(kw) - 8);
	add_conninfo(node_authinfo(node->nodeid, role), kw, val, &n, lengthof(kw) - 8);
	kw[n] = "host", val[n++] = node->host;
	kw[n] = "port", val[n++] = psprintf("%d", node->port);
	kw[n] = "dbname", val[n++] = get_database_name(MyDatabaseId);
	kw[n] = "user", val[n++] = role;
	kw[n] = "application_name", val[n++] = "pg_gpu";
	kw[n] = "options", val[n++] = opts.data;
	kw[n] = NULL, val[n] = NULL;

	node->conn = PQconnectStartParams(kw, val, false);
	if (node->conn == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	/* citus.node_connection_timeout (ms), as Citus's own connections */
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	while (ps != PGRES_POLLING_OK && ps != PGRES_POLLING_FAILED)
	{
		if (GetCurrentTimestamp() > deadline)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to Citus node %s:%d within citus.node_connection_timeout (%d ms)",
							node->host, node->port, timeout_ms)));
		if (ps == PGRES_POLLING_READING || ps == PGRES_POLLING_WRITING)
		{
			int			rc = WaitLatchOrSocket(MyLatch,
											   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | WL_TIMEOUT |
											   (ps == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE),
											   PQsocket(node->conn), 100, PG_WAIT_EXTENSION);

			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		ps = PQconnectPoll(node->conn);
	}
	if (ps == PGRES_POLLING_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to Citus node %s:%d", node->host, node->port),
				 errdetail("%s", pchomp(PQerrorMessage(node->conn))),
				 errhint("Check that the node is up (SELECT * FROM citus_check_cluster_node_health()) and that it lets user \"%s\" in as Citus does.",
						 role)));
}

/* sends a query (parameters in text, or binary where lengths[i] > 0); the result comes in binary */
void
pg_gpu_node_send(PgGpuNode *node, const char *sql, int nparams, const Oid *types,
		  const char *const *values, const int *lengths, const char *doing)
{
	int			formats[8];

	for (int i = 0; i < nparams; i++)
		formats[i] = lengths && lengths[i] > 0 ? 1 : 0;
	if (!PQsendQueryParams(node->conn, sql, nparams, types, values, lengths, formats, 1))
		pg_gpu_node_lost(node, doing);
}

/*
 * The next result of the query sent (NULL: it completed): its rows, in
 * binary, all of them or one (single-row mode).  An error on the node is
 * raised here with its SQLSTATE, naming the node.
 */
PGresult *
pg_gpu_node_next(PgGpuNode *node, const char *doing)
{
	PGresult   *res;

	while (PQisBusy(node->conn))
	{
		wait_socket(node->conn, WL_SOCKET_READABLE);
		if (!PQconsumeInput(node->conn))
			pg_gpu_node_lost(node, doing);
	}
	if ((res = PQgetResult(node->conn)) == NULL)
		return NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_SINGLE_TUPLE &&
		PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
		const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
		const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
		char	   *m = pstrdup(msg ? msg : pchomp(PQerrorMessage(node->conn)));
		char	   *dt = detail ? pstrdup(detail) : NULL;
		char	   *ht = hint ? pstrdup(hint) : NULL;

		PQclear(res);
		/* no SQLSTATE: libpq's own error, the connection gone */
		if (state == NULL || strlen(state) != 5)
			pg_gpu_node_lost(node, doing);
		/* the node's functions not granted to this role there */
		if (strcmp(state, "42501") == 0 && strncmp(m, "permission denied for function", 30) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("Citus node %s:%d: %s", node->host, node->port, m),
					 errdetail("The role may execute pg_gpu's node functions on the coordinator, not on this node."),
					 errhint("Run on every node (e.g. with run_command_on_all_nodes): %s",
							 pg_gpu_node_grant(GetUserNameFromId(GetUserId(), false)))));
		ereport(ERROR,
				(errcode(MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4])),
				 errmsg("Citus node %s:%d: %s", node->host, node->port, m),
				 dt ? errdetail("%s", dt) : 0,
				 ht ? errhint("%s", ht) : 0));
	}
	return res;
}

/* the next result of rows in single-row mode (its empty end skipped), NULL after the last */
PGresult *
pg_gpu_node_next_rows(PgGpuNode *node, const char *doing)
{
	PGresult   *res;

	while ((res = pg_gpu_node_next(node, doing)) != NULL &&
		   PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 0)
		PQclear(res);
	return res;
}

/* the whole result of the query sent, once it completed */
PGresult *
pg_gpu_node_result(PgGpuNode *node, const char *doing)
{
	PGresult   *res = NULL,
			   *r;

	while ((r = pg_gpu_node_next(node, doing)) != NULL)
	{
		if (res)
			PQclear(res);
		res = r;
	}
	if (res == NULL || PQstatus(node->conn) == CONNECTION_BAD)
		pg_gpu_node_lost(node, doing);
	return res;
}

/* ---- binary values --------------------------------------------------------- */

/* an array as its binary send form (a libpq parameter) */
char *
pg_gpu_array_binary(ArrayType *a, int *len)
{
	bytea	   *b = DatumGetByteaPP(OidFunctionCall1(F_ARRAY_SEND, PointerGetDatum(a)));

	*len = VARSIZE_ANY_EXHDR(b);
	return VARDATA_ANY(b);
}

/* a node's answer that is not what it should be: 08P01, naming the node */
pg_noreturn void
pg_gpu_node_bad_answer(PgGpuNode *node, const char *doing, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("Citus node %s:%d returned %s while %s", node->host, node->port, what, doing),
			 errhint("Check that every node runs the same pg_gpu as the coordinator (ALTER EXTENSION pg_gpu UPDATE, and the same build installed).")));
}

/* a result of rows (ntuples of them, -1: any) of nfields columns */
void
pg_gpu_node_check_result(PgGpuNode *node, PGresult *res, int ntuples, int nfields, const char *doing)
{
	if ((PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_SINGLE_TUPLE) ||
		PQnfields(res) != nfields || (ntuples >= 0 && PQntuples(res) != ntuples) ||
		PQbinaryTuples(res) != 1)
		pg_gpu_node_bad_answer(node, doing,
							   psprintf("%d rows of %d columns, not %d of %d", PQntuples(res), PQnfields(res),
										ntuples, nfields));
}

/* a binary field of a result of len bytes (-1: any), not NULL */
static StringInfoData
node_field(PgGpuNode *node, PGresult *res, int row, int col, int len, const char *doing)
{
	if (PQgetisnull(res, row, col) || (len >= 0 && PQgetlength(res, row, col) != len))
		pg_gpu_node_bad_answer(node, doing, psprintf("%s in column %d", PQgetisnull(res, row, col) ? "NULL" :
													 psprintf("a value of %d bytes", PQgetlength(res, row, col)),
													 col + 1));
	return pg_gpu_result_field(res, row, col);
}

/* a one-dimensional array (or empty) of elemtype */
ArrayType *
pg_gpu_result_array(PgGpuNode *node, PGresult *res, int row, int col, Oid elemtype, const char *doing)
{
	StringInfoData buf;
	ArrayType  *a;

	node_field(node, res, row, col, -1, doing);
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, PQgetvalue(res, row, col), PQgetlength(res, row, col));
	a = DatumGetArrayTypeP(OidReceiveFunctionCall(F_ARRAY_RECV, &buf, elemtype, -1));
	if (ARR_NDIM(a) > 1 || ARR_ELEMTYPE(a) != elemtype)
		pg_gpu_node_bad_answer(node, doing, "an array of another shape");
	return a;
}

/* a binary field of a result, to be read with pq_getmsg* */
StringInfoData
pg_gpu_result_field(PGresult *res, int row, int col)
{
	StringInfoData buf;

	buf.data = PQgetvalue(res, row, col);
	buf.len = PQgetlength(res, row, col);
	buf.maxlen = buf.len;
	buf.cursor = 0;
	return buf;
}

int64
pg_gpu_result_int8(PgGpuNode *node, PGresult *res, int row, int col, const char *doing)
{
	StringInfoData buf = node_field(node, res, row, col, 8, doing);

	return pq_getmsgint64(&buf);
}

int32
pg_gpu_result_int4(PgGpuNode *node, PGresult *res, int row, int col, const char *doing)
{
	StringInfoData buf = node_field(node, res, row, col, 4, doing);

	return (int32) pq_getmsgint(&buf, 4);
}

double
pg_gpu_result_float8(PgGpuNode *node, PGresult *res, int row, int col, const char *doing)
{
	StringInfoData buf = node_field(node, res, row, col, 8, doing);

	return pq_getmsgfloat8(&buf);
}

/* k x d centroids as a bytea parameter (binary: their wire form) */

/* a text[] literal of n names (a text parameter) */
char *
pg_gpu_names_literal(const char *const *names, int n)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < n; i++)
	{
		appendStringInfo(&s, "%s\"", i ? "," : "");
		for (const char *c = names[i]; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				appendStringInfoChar(&s, '\\');
			appendStringInfoChar(&s, *c);
		}
		appendStringInfoChar(&s, '"');
	}
	appendStringInfoChar(&s, '}');
	return s.data;
}

/* ---- the nodes of a table ------------------------------------------------- */


/* the nodes holding relid's shards, one active placement a shard */
static void
find_nodes(PgGpuNodes *cl, Oid relid, const char *relname)
{
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	int64		missing = 0;
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute_with_args(
							  "WITH s AS (SELECT shardid FROM pg_catalog.pg_dist_shard WHERE logicalrelid = $1),"
							  " p AS (SELECT DISTINCT ON (s.shardid) s.shardid, n.nodeid, n.nodename, n.nodeport"
							  "       FROM s JOIN pg_catalog.pg_dist_placement pl USING (shardid)"
							  "       JOIN pg_catalog.pg_dist_node n USING (groupid)"
							  "       WHERE n.isactive AND n.noderole = 'primary' AND pl.shardstate = 1"
							  "       ORDER BY s.shardid, n.nodeid)"
							  " SELECT nodename::text, nodeport, nodeid,"
							  "        pg_catalog.array_agg(CASE WHEN (SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
							  "                                         ON n.oid OPERATOR(pg_catalog.=) c.relnamespace WHERE c.oid OPERATOR(pg_catalog.=) $1)"
							  "                                        OPERATOR(pg_catalog.=) 'public'"
							  "                                  THEN 'public.' OPERATOR(pg_catalog.||) pg_catalog.shard_name($1, shardid)"
							  "                                  ELSE pg_catalog.shard_name($1, shardid) END ORDER BY shardid)::text,"
							  "        (SELECT count(*) FROM s) - (SELECT count(*) FROM p)"
							  " FROM p GROUP BY nodeid, nodename, nodeport ORDER BY nodeid",
							  1, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read Citus's placements of \"%s\"", relname);
	cl->nnodes = (int) SPI_processed;
	cl->nodes = MemoryContextAllocZero(caller, sizeof(PgGpuNode) * Max(cl->nnodes, 1));
	for (int i = 0; i < cl->nnodes; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	td = SPI_tuptable->tupdesc;
		bool		isnull;
		PgGpuNode  *node = &cl->nodes[i];

		node->host = MemoryContextStrdup(caller, SPI_getvalue(t, td, 1));
		node->port = DatumGetInt32(SPI_getbinval(t, td, 2, &isnull));
		node->nodeid = DatumGetInt32(SPI_getbinval(t, td, 3, &isnull));
		node->shards = MemoryContextStrdup(caller, SPI_getvalue(t, td, 4));
		missing = DatumGetInt64(SPI_getbinval(t, td, 5, &isnull));
	}
	SPI_finish();
	if (missing > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%lld shards of \"%s\" have no active placement on an active primary node",
						(long long) missing, relname)));
}


/* a command (no rows) on every node's connection at once */
static void
nodes_command(PgGpuNodes *ns, const char *sql, const char *doing)
{
	for (int i = 0; i < ns->nnodes; i++)
		pg_gpu_node_send(&ns->nodes[i], sql, 0, NULL, NULL, NULL, doing);
	for (int i = 0; i < ns->nnodes; i++)
	{
		PGresult   *res = pg_gpu_node_result(&ns->nodes[i], doing);

		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			pg_gpu_node_bad_answer(&ns->nodes[i], doing, "rows to a command");
		PQclear(res);
	}
}

/*
 * Connects to every node that holds shards of relid, as the calling user;
 * the connections close with the current memory context (after success,
 * error or cancel), or with pg_gpu_nodes_close.
 */
void
pg_gpu_nodes_open(PgGpuNodes *ns, Oid relid, const char *relname)
{
	memset(ns, 0, sizeof(*ns));
	find_nodes(ns, relid, relname);
	ns->cb.func = release_nodes;
	ns->cb.arg = ns;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &ns->cb);
	elog(DEBUG1, "pg_gpu: \"%s\" is read on the %d Citus nodes that hold its shards", relname, ns->nnodes);
	pg_gpu_progress(true, "connecting to %d Citus nodes", ns->nnodes);
	for (int i = 0; i < ns->nnodes; i++)
		node_connect(&ns->nodes[i]);
	/* one transaction a node: what a node loads lives until its end (citus_node.c) */
	nodes_command(ns, "BEGIN", "starting a transaction");
}

/* closes the connections now: each node's backend ends, freeing what it held */
void
pg_gpu_nodes_close(PgGpuNodes *ns)
{
	nodes_command(ns, "COMMIT", "ending its transaction");
	release_nodes(ns);
}
