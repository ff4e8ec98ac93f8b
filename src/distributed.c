/*
 * distributed.c - k-means on a Citus distributed table where its rows live.
 *
 * The coordinator finds the shards' placements in Citus's metadata
 * (pg_dist_shard, pg_dist_placement, pg_dist_node), opens one libpq
 * connection a node that holds shards, as the calling user with Citus's
 * authentication (citus.node_conninfo, pg_dist_authinfo), and has each node
 * read its own shards into its own GPU (or CPU) with gpu_kmeans_node_load
 * (worker.c).  The fit is the compute layer's pggpu_kmeans_over with the
 * nodes as its source: an iteration sends the centroids to every node at
 * once and gets back k x (d + 1) sums and counts from each, added here in
 * node order; the seeding gathers a sample that every node draws by the
 * same rule (each row by its index in the union of the nodes' rows), so a
 * fit depends on the seed and the shard layout only.  Memberships come back
 * from the nodes as rows of arrays (gpu_kmeans_node_labels).
 *
 * Every wait is on the sockets and the latch, so a cancel or
 * statement_timeout answers at once; then (and after any error) each busy
 * connection gets a cancel request (PQcancel) and every connection is
 * closed, which ends the node's backend and frees whatever it held.  The
 * connections live for one call: nothing stays on a node between calls.
 *
 * Not on the nodes (read through Citus's executor instead, as before):
 * reference and Citus local tables, scale => 'standard' fits,
 * gpu_kmeans_choose_k, and a transaction that has written already (its
 * uncommitted rows are seen only through Citus's own connections).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq-fe.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/wait_event.h"

#include "pg_gpu.h"

bool		pg_gpu_citus_nodes = true;

/* the settings a node's backend takes from the calling session */
static const char *const node_settings[] = {
	"pg_gpu.device", "pg_gpu.kmeans_precision", "pg_gpu.kmeans_gpu_memory",
	"pg_gpu.max_memory", "pg_gpu.cpu_threads", "pg_gpu.allow_tf32"
};

typedef struct PgGpuNode
{
	char	   *host;
	int			port;
	int			nodeid;
	char	   *shards;			/* regclass[] literal, the shards read there */
	PGconn	   *conn;
	int64		first;			/* its rows' first index in the union */
	int64		rows;
	int64		invalid;
	char	   *device;
} PgGpuNode;

struct PgGpuCluster
{
	int			nnodes;
	PgGpuNode  *nodes;
	int			d;
	PgGpuData  *home;			/* the fit's host memory (and the seeding sample) */
	MemoryContextCallback cb;
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
	return true;
}

/* ---- connections --------------------------------------------------------- */

static void
release_cluster(void *arg)
{
	PgGpuCluster *cl = (PgGpuCluster *) arg;

	for (int i = 0; i < cl->nnodes; i++)
	{
		PGconn	   *conn = cl->nodes[i].conn;

		if (conn == NULL)
			continue;
		cl->nodes[i].conn = NULL;
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

pg_noreturn static void
node_lost(PgGpuNode *node, const char *doing)
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
static void
node_send(PgGpuNode *node, const char *sql, int nparams, const Oid *types,
		  const char *const *values, const int *lengths, const char *doing)
{
	int			formats[8];

	for (int i = 0; i < nparams; i++)
		formats[i] = lengths && lengths[i] > 0 ? 1 : 0;
	if (!PQsendQueryParams(node->conn, sql, nparams, types, values, lengths, formats, 1))
		node_lost(node, doing);
}

/*
 * The next result of the query sent (NULL: it completed): its rows, in
 * binary, all of them or one (single-row mode).  An error on the node is
 * raised here with its SQLSTATE, naming the node.
 */
static PGresult *
node_next(PgGpuNode *node, const char *doing)
{
	PGresult   *res;

	while (PQisBusy(node->conn))
	{
		wait_socket(node->conn, WL_SOCKET_READABLE);
		if (!PQconsumeInput(node->conn))
			node_lost(node, doing);
	}
	if ((res = PQgetResult(node->conn)) == NULL)
		return NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_SINGLE_TUPLE)
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
			node_lost(node, doing);
		ereport(ERROR,
				(errcode(MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4])),
				 errmsg("Citus node %s:%d: %s", node->host, node->port, m),
				 dt ? errdetail("%s", dt) : 0,
				 ht ? errhint("%s", ht) : 0));
	}
	return res;
}

/* the whole result of the query sent, once it completed */
static PGresult *
node_result(PgGpuNode *node, const char *doing)
{
	PGresult   *res = NULL,
			   *r;

	while ((r = node_next(node, doing)) != NULL)
	{
		if (res)
			PQclear(res);
		res = r;
	}
	if (res == NULL || PQstatus(node->conn) == CONNECTION_BAD)
		node_lost(node, doing);
	return res;
}

/* ---- binary values --------------------------------------------------------- */

/* an array as its binary send form (a libpq parameter) */
static char *
array_binary(ArrayType *a, int *len)
{
	bytea	   *b = DatumGetByteaPP(OidFunctionCall1(F_ARRAY_SEND, PointerGetDatum(a)));

	*len = VARSIZE_ANY_EXHDR(b);
	return VARDATA_ANY(b);
}

static ArrayType *
result_array(PGresult *res, int row, int col, Oid elemtype)
{
	StringInfoData buf;

	if (PQgetisnull(res, row, col))
		elog(ERROR, "a Citus node returned NULL for an array");
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, PQgetvalue(res, row, col), PQgetlength(res, row, col));
	return DatumGetArrayTypeP(OidReceiveFunctionCall(F_ARRAY_RECV, &buf, elemtype, -1));
}

/* a binary field of a result, to be read with pq_getmsg* */
static StringInfoData
result_field(PGresult *res, int row, int col)
{
	StringInfoData buf;

	buf.data = PQgetvalue(res, row, col);
	buf.len = PQgetlength(res, row, col);
	buf.maxlen = buf.len;
	buf.cursor = 0;
	return buf;
}

static int64
result_int8(PGresult *res, int row, int col)
{
	StringInfoData buf = result_field(res, row, col);

	return pq_getmsgint64(&buf);
}

static double
result_float8(PGresult *res, int row, int col)
{
	StringInfoData buf = result_field(res, row, col);

	return pq_getmsgfloat8(&buf);
}

/* k x d centroids as a bytea parameter (binary: their wire form) */
static char *
centroids_param(const double *C, int k, int d, int *len)
{
	char	   *b = MemoryContextAllocHuge(CurrentMemoryContext, 8 * (Size) k * d);

	pg_gpu_doubles_to_wire(C, (int64) k * d, b);
	*len = 8 * k * d;
	return b;
}

/* ---- the cluster ------------------------------------------------------------ */

/* the nodes holding relid's shards, one active placement a shard */
static void
find_nodes(PgGpuCluster *cl, Oid relid, const char *relname)
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
							  "        array_agg(pg_catalog.shard_name($1, shardid) ORDER BY shardid)::text,"
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

PgGpuCluster *
pg_gpu_cluster_load(const PgGpuSource *src, pggpu_metric metric, bool want_ids, const double *mean,
					const double *std, PgGpuRows *rows)
{
	PgGpuCluster *cl = palloc0(sizeof(PgGpuCluster));
	static const Oid types[7] = {REGCLASSARRAYOID, TEXTARRAYOID, TEXTOID, TEXTOID, INT4OID,
	FLOAT8ARRAYOID, FLOAT8ARRAYOID};
	const char *values[7];
	int			lengths[7] = {0};
	StringInfoData cols;

	find_nodes(cl, src->relid, src->relname);
	cl->d = src->ncols;
	cl->cb.func = release_cluster;
	cl->cb.arg = cl;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &cl->cb);

	initStringInfo(&cols);
	appendStringInfoChar(&cols, '{');
	for (int i = 0; i < src->natts; i++)
	{
		appendStringInfo(&cols, "%s\"", i ? "," : "");
		for (const char *c = src->colnames[i]; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				appendStringInfoChar(&cols, '\\');
			appendStringInfoChar(&cols, *c);
		}
		appendStringInfoChar(&cols, '"');
	}
	appendStringInfoChar(&cols, '}');
	values[1] = cols.data;
	values[2] = want_ids ? src->idname : NULL;
	values[3] = metric == PGGPU_METRIC_COSINE ? "cosine" : "euclidean";
	values[4] = psprintf("%d", src->ncols);
	values[5] = values[6] = NULL;
	if (mean)
	{
		ArrayType  *a;
		Datum	   *v = palloc(sizeof(Datum) * src->ncols);

		for (int j = 0; j < src->ncols; j++)
			v[j] = Float8GetDatum(mean[j]);
		a = construct_array(v, src->ncols, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
		values[5] = array_binary(a, &lengths[5]);
		for (int j = 0; j < src->ncols; j++)
			v[j] = Float8GetDatum(std[j]);
		a = construct_array(v, src->ncols, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
		values[6] = array_binary(a, &lengths[6]);
	}

	elog(DEBUG1, "pg_gpu: \"%s\" is read on the %d Citus nodes that hold its shards", src->relname, cl->nnodes);
	pg_gpu_progress(true, "connecting to %d Citus nodes", cl->nnodes);
	for (int i = 0; i < cl->nnodes; i++)
		node_connect(&cl->nodes[i]);
	pg_gpu_progress(true, "%d Citus nodes reading their shards", cl->nnodes);
	for (int i = 0; i < cl->nnodes; i++)
	{
		values[0] = cl->nodes[i].shards;
		node_send(&cl->nodes[i],
				  "SELECT rows, invalid, device FROM gpu_kmeans_node_load($1, $2, $3, $4, $5, $6, $7)",
				  7, types, values, lengths, "reading its shards");
	}
	memset(rows, 0, sizeof(*rows));
	for (int i = 0; i < cl->nnodes; i++)
	{
		PgGpuNode  *node = &cl->nodes[i];
		PGresult   *res = node_result(node, "reading its shards");

		node->first = rows->nvalid;
		node->rows = result_int8(res, 0, 0);
		node->invalid = result_int8(res, 0, 1);
		node->device = pnstrdup(PQgetvalue(res, 0, 2), PQgetlength(res, 0, 2));
		PQclear(res);
		rows->nvalid += node->rows;
		rows->ninvalid += node->invalid;
	}
	/* the fit's host memory: a CPU set of no rows (closed with the call's context) */
	cl->home = pg_gpu_data_open(PGGPU_BACKEND_CPU, cl->d, 0);
	pg_gpu_data_set_kmeans(cl->home, metric, true);
	return cl;
}

const char *
pg_gpu_cluster_device(const PgGpuCluster *cl)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < cl->nnodes; i++)
	{
		bool		seen = false;

		for (int j = 0; j < i; j++)
			seen |= strcmp(cl->nodes[j].device, cl->nodes[i].device) == 0;
		if (!seen)
			appendStringInfo(&s, "%s%s", s.len ? ", " : "", cl->nodes[i].device);
	}
	appendStringInfo(&s, " (%d Citus node%s)", cl->nnodes, cl->nnodes == 1 ? "" : "s");
	return s.data;
}

/* the source's step: every node's at once, added in node order */
static pggpu_status
cluster_step(void *arg, const double *C, int k, bool begin, double *sums, int64_t *counts,
			 double *inertia, int64_t *changed, int32_t *labels, pggpu_error *err)
{
	PgGpuCluster *cl = (PgGpuCluster *) arg;
	int			d = cl->d;
	static const Oid types[2] = {BYTEAOID, BOOLOID};
	const char *values[2];
	int			lengths[2] = {0, 0};
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_gpu step", ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	double	   *psums = palloc(sizeof(double) * k * d);

	Assert(labels == NULL);
	values[0] = centroids_param(C, k, d, &lengths[0]);
	values[1] = begin ? "true" : "false";
	for (int i = 0; i < cl->nnodes; i++)
		node_send(&cl->nodes[i], "SELECT sums, counts, inertia, changed FROM gpu_kmeans_node_step($1, $2)",
				  2, types, values, lengths, "computing a k-means iteration");
	memset(sums, 0, sizeof(double) * k * d);
	memset(counts, 0, sizeof(int64_t) * k);
	*inertia = 0;
	*changed = 0;
	for (int i = 0; i < cl->nnodes; i++)
	{
		PGresult   *res = node_result(&cl->nodes[i], "computing a k-means iteration");
		ArrayType  *c = result_array(res, 0, 1, INT8OID);
		const int64 *cv = (const int64 *) ARR_DATA_PTR(c);

		if (PQgetlength(res, 0, 0) != 8 * k * d || ArrayGetNItems(ARR_NDIM(c), ARR_DIMS(c)) != k ||
			ARR_HASNULL(c))
			elog(ERROR, "Citus node %s:%d returned sums of another shape", cl->nodes[i].host, cl->nodes[i].port);
		pg_gpu_doubles_from_wire(PQgetvalue(res, 0, 0), (int64) k * d, psums);
		for (int64 j = 0; j < (int64) k * d; j++)
			sums[j] += psums[j];
		for (int j = 0; j < k; j++)
			counts[j] += cv[j];
		*inertia += result_float8(res, 0, 2);
		*changed += result_int8(res, 0, 3);
		PQclear(res);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return PGGPU_OK;
}

/* the source's sample: every node's sampled rows, in node order, pushed at once */
static pggpu_status
cluster_sample(void *arg, uint64_t seed, double rate, pggpu_data *into, pggpu_error *err)
{
	PgGpuCluster *cl = (PgGpuCluster *) arg;
	static const Oid types[3] = {INT8OID, INT8OID, FLOAT8OID};
	const char *values[3];
	PGresult  **got = palloc(sizeof(PGresult *) * cl->nnodes);
	int64		m = 0;
	double	   *X;
	pggpu_status st;

	values[0] = psprintf("%lld", (long long) (int64) seed);
	values[2] = psprintf("%.17g", rate);
	for (int i = 0; i < cl->nnodes; i++)
	{
		values[1] = psprintf("%lld", (long long) cl->nodes[i].first);
		node_send(&cl->nodes[i], "SELECT gpu_kmeans_node_sample($1, $2, $3)", 3, types, values, NULL,
				  "drawing the seeding sample");
	}
	/* (each result is read before the next node's: a sample is at most about 40 k rows) */
	for (int i = 0; i < cl->nnodes; i++)
	{
		got[i] = node_result(&cl->nodes[i], "drawing the seeding sample");
		if (PQgetlength(got[i], 0, 0) % (8 * cl->d) != 0)
			elog(ERROR, "Citus node %s:%d returned a sample of another shape", cl->nodes[i].host, cl->nodes[i].port);
		m += PQgetlength(got[i], 0, 0) / (8 * cl->d);
	}
	X = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * Max(m, 1) * cl->d);
	m = 0;
	for (int i = 0; i < cl->nnodes; i++)
	{
		int64		nv = PQgetlength(got[i], 0, 0) / 8;

		pg_gpu_doubles_from_wire(PQgetvalue(got[i], 0, 0), nv, X + m * cl->d);
		m += nv / cl->d;
		PQclear(got[i]);
	}
	st = pggpu_data_push_rows(into, X, m, err);
	pfree(X);
	return st;
}

void
pg_gpu_cluster_fit(PgGpuCluster *cl, const pggpu_kmeans_params *p, pggpu_kmeans_result *r)
{
	pggpu_kmeans_source src = {0};
	pggpu_error err = {0};

	src.home = cl->home->ds;
	for (int i = 0; i < cl->nnodes; i++)
		src.n += cl->nodes[i].rows;
	src.step = cluster_step;
	src.sample = cluster_sample;
	src.arg = cl;
	if (pggpu_kmeans_over(&src, p, r, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
}

void
pg_gpu_cluster_labels(PgGpuCluster *cl, const double *C, int k, PgGpuRows *rows, int32 **labels,
					  double **distances)
{
	static const Oid types[1] = {BYTEAOID};
	const char *values[1];
	int			lengths[1];
	int64		nv = 0,
				ni = 0;

	rows->ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * Max(rows->nvalid, 1));
	rows->invalid_ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * Max(rows->ninvalid, 1));
	*labels = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * Max(rows->nvalid, 1));
	if (distances)
		*distances = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * Max(rows->nvalid, 1));
	values[0] = centroids_param(C, k, cl->d, &lengths[0]);
	pg_gpu_progress(true, "assigning %lld rows on %d Citus nodes", (long long) rows->nvalid, cl->nnodes);
	/* a row of arrays at a time (single-row mode): never a node's whole answer in memory at once */
	for (int i = 0; i < cl->nnodes; i++)
	{
		node_send(&cl->nodes[i], "SELECT ids, clusters, distances FROM gpu_kmeans_node_labels($1)",
				  1, types, values, lengths, "assigning its rows");
		if (!PQsetSingleRowMode(cl->nodes[i].conn))
			node_lost(&cl->nodes[i], "assigning its rows");
	}
	for (int i = 0; i < cl->nnodes; i++)
	{
		PGresult   *res;

		while ((res = node_next(&cl->nodes[i], "assigning its rows")) != NULL)
		{
			for (int t = 0; t < PQntuples(res); t++)
			{
				ArrayType  *ia = result_array(res, t, 0, INT8OID);
				ArrayType  *ca = result_array(res, t, 1, INT4OID);
				ArrayType  *da = result_array(res, t, 2, FLOAT8OID);
				Datum	   *iv,
						   *cv,
						   *dv;
				bool	   *cn,
						   *dn;
				int			m,
							m2;

				deconstruct_array(ia, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &iv, NULL, &m);
				deconstruct_array(ca, INT4OID, 4, true, TYPALIGN_INT, &cv, &cn, &m2);
				deconstruct_array(da, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &dv, &dn, &m2);
				for (int j = 0; j < m; j++)
				{
					if (cn[j] && ni < rows->ninvalid)
						rows->invalid_ids[ni++] = DatumGetInt64(iv[j]);
					else if (!cn[j] && nv < rows->nvalid)
					{
						rows->ids[nv] = DatumGetInt64(iv[j]);
						(*labels)[nv] = DatumGetInt32(cv[j]) - 1;
						if (distances)
							(*distances)[nv] = DatumGetFloat8(dv[j]);
						nv++;
					}
				}
				pfree(ia), pfree(ca), pfree(da);
				pfree(iv), pfree(cv), pfree(dv), pfree(cn), pfree(dn);
			}
			PQclear(res);
		}
		if (PQstatus(cl->nodes[i].conn) == CONNECTION_BAD)
			node_lost(&cl->nodes[i], "assigning its rows");
	}
	if (nv != rows->nvalid || ni != rows->ninvalid)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("the Citus nodes returned %lld rows' clusters, not the %lld they read",
						(long long) (nv + ni), (long long) (rows->nvalid + rows->ninvalid)),
				 errhint("Rows changed while the call ran? Run it again.")));
}

void
pg_gpu_cluster_close(PgGpuCluster *cl)
{
	release_cluster(cl);
	pg_gpu_data_close(cl->home);
}
