/*
 * citus_matmul.c - the table form of gpu_matmul where a is a Citus
 * distributed table: each node that holds shards of a (citus.c connects to
 * them) reads its own rows of a into its own GPU (or CPU) workspace
 * (pg_gpu_node_matmul_load, citus_node.c) while the coordinator reads b; b goes to
 * every node, each multiplies its rows (pg_gpu_node_matmul_product) and streams
 * them back with their row ids, pieces of a few megabytes sent as they are
 * made, and the coordinator puts them in row id order.  a never crosses the network; b crosses it once a node, C once.
 *
 * The checks of a single node's call hold across the cluster: a's row ids
 * are 1..m, each once (duplicates across nodes are found as the rows come
 * back), all rows have one length, and it matches b's rows.  Every call is
 * qualified with pg_gpu's schema, on connections whose search_path is
 * pg_catalog, in one transaction a node (citus.c), and every answer is
 * checked before it is used (08P01 naming the node).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "pg_gpu.h"
#include "citus.h"

/* what the nodes hold of a */
struct PgGpuMatNodes
{
	PgGpuNodes	ns;
	int64	   *first_id;		/* a row id a node read (for errors) */
	int64	   *len;			/* its rows' length, -1 without rows */
};

/* connects to the nodes holding a's shards and has them read their rows (answered by _shape) */
PgGpuMatNodes *
pg_gpu_matmul_nodes_load(const PgGpuMatTable *a)
{
	PgGpuMatNodes *mn = palloc0(sizeof(PgGpuMatNodes));
	static const Oid types[2] = {REGCLASSARRAYOID, TEXTARRAYOID};
	const char *values[2];
	char	   *sql = psprintf("SELECT rows, first_id, min_id, max_id, len, device FROM %s.pg_gpu_node_matmul_load($1, $2)",
							   pg_gpu_node_schema());

	Assert(!a->sparse);
	pg_gpu_nodes_open(&mn->ns, a->relid, a->relname);
	mn->first_id = palloc0(sizeof(int64) * Max(mn->ns.nnodes, 1));
	mn->len = palloc0(sizeof(int64) * Max(mn->ns.nnodes, 1));
	values[1] = pg_gpu_names_literal((const char *const *) a->names, 2);
	pg_gpu_progress(true, "%d Citus nodes reading their rows of a", mn->ns.nnodes);
	for (int i = 0; i < mn->ns.nnodes; i++)
	{
		values[0] = mn->ns.nodes[i].shards;
		pg_gpu_node_send(&mn->ns.nodes[i], sql, 2, types, values, NULL, "reading its rows of a");
	}
	return mn;
}

/*
 * a's shape from what the nodes read (a->rows, a->cols), checked as a
 * single node checks it: rows, one length, ids 1..m
 */
void
pg_gpu_matmul_nodes_shape(PgGpuMatNodes *mn, PgGpuMatTable *a)
{
	int64		m = 0,
				lo = PG_INT64_MAX,
				hi = PG_INT64_MIN;
	int			with = -1;		/* a node with rows */

	for (int i = 0; i < mn->ns.nnodes; i++)
	{
		PgGpuNode  *node = &mn->ns.nodes[i];
		const char *doing = "reading its rows of a";
		PGresult   *res = pg_gpu_node_result(node, doing);

		pg_gpu_node_check_result(node, res, 1, 6, doing);
		node->rows = pg_gpu_result_int8(node, res, 0, 0, doing);
		if (node->rows < 0 || node->rows > PG_INT64_MAX / 4 - m || PQgetisnull(res, 0, 5))
			pg_gpu_node_bad_answer(node, doing, "a count of rows that cannot be");
		node->device = pnstrdup(PQgetvalue(res, 0, 5), PQgetlength(res, 0, 5));
		mn->len[i] = -1;
		if (node->rows > 0)
		{
			int64		nlo,
						nhi;

			mn->first_id[i] = pg_gpu_result_int8(node, res, 0, 1, doing);
			nlo = pg_gpu_result_int8(node, res, 0, 2, doing);
			nhi = pg_gpu_result_int8(node, res, 0, 3, doing);
			mn->len[i] = pg_gpu_result_int4(node, res, 0, 4, doing);
			if (nlo > nhi || mn->first_id[i] < nlo || mn->first_id[i] > nhi || mn->len[i] < 1)
				pg_gpu_node_bad_answer(node, doing, "row ids or a row length that cannot be");
			lo = Min(lo, nlo);
			hi = Max(hi, nhi);
			m += node->rows;
			if (with >= 0 && mn->len[i] != mn->len[with])
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("rows of \"%s\" differ in length", a->relname),
						 errdetail("Row %lld has %lld elements, row %lld has %lld.",
								   (long long) mn->first_id[i], (long long) mn->len[i],
								   (long long) mn->first_id[with], (long long) mn->len[with])));
			if (with < 0)
				with = i;
		}
		PQclear(res);
	}
	if (m == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("matrix table \"%s\" has no rows", a->relname),
				 errhint("A matrix needs at least one row.")));
	if (lo < 1 || hi > m)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("the row ids of \"%s\" are not 1 to %lld", a->relname, (long long) m),
				 errdetail("\"%s\" has %lld rows, so its row ids must be 1 to %lld, but one is %lld.",
						   a->relname, (long long) m, (long long) m, (long long) (lo < 1 ? lo : hi))));
	a->rows = m;
	a->cols = mn->len[with];
}

/*
 * C (a->rows x n, row-major) = a b: b (k x n) sent to every node with rows,
 * their products put in row id order as they come back, a piece at a time
 * (single-row mode)
 */
void
pg_gpu_matmul_nodes_product(PgGpuMatNodes *mn, const PgGpuMatTable *a, const double *b,
							int64 k, int64 n, double *c)
{
	static const Oid types[3] = {BYTEAOID, INT4OID, INT4OID};
	const char *values[3];
	int			lengths[3] = {0, 0, 0};
	int64		m = a->rows,
				got = 0;
	bits8	   *seen;
	char	   *wire;
	const char *doing = "multiplying its rows of a";
	char	   *sql = psprintf("SELECT %s.pg_gpu_node_matmul_product($1, $2, $3)", pg_gpu_node_schema());

	if ((double) k * n * 8 > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("b is too large to send to the Citus nodes: %lld x %lld doubles is over 1 GB",
						(long long) k, (long long) n),
				 errhint("Multiply by blocks of b's columns, or set pg_gpu.citus_nodes = off to multiply on the coordinator.")));
	wire = MemoryContextAllocHuge(CurrentMemoryContext, 8 * (Size) k * n);
	pg_gpu_doubles_to_wire(b, k * n, wire);
	values[0] = wire;
	lengths[0] = (int) (8 * k * n);
	values[1] = psprintf("%lld", (long long) k);
	values[2] = psprintf("%lld", (long long) n);
	pg_gpu_progress(true, "%d Citus nodes multiplying their rows of a", mn->ns.nnodes);
	for (int i = 0; i < mn->ns.nnodes; i++)
	{
		if (mn->ns.nodes[i].rows == 0)
			continue;
		pg_gpu_node_send(&mn->ns.nodes[i], sql, 3, types, values, lengths, doing);
		if (!PQsetSingleRowMode(mn->ns.nodes[i].conn))
			pg_gpu_node_lost(&mn->ns.nodes[i], doing);
	}
	pfree(wire);

	seen = pg_gpu_bits_alloc(m);
	for (int i = 0; i < mn->ns.nnodes; i++)
	{
		PgGpuNode  *node = &mn->ns.nodes[i];
		PGresult   *res;
		int64		from_node = 0;

		if (node->rows == 0)
			continue;
		while ((res = pg_gpu_node_next_rows(node, doing)) != NULL)
		{
			pg_gpu_node_check_result(node, res, -1, 1, doing);
			for (int t = 0; t < PQntuples(res); t++)
			{
				/* a piece: its rows' ids, then the rows */
				const char *piece = PQgetvalue(res, t, 0);
				int64		rows = PQgetlength(res, t, 0) / (8 * (n + 1));

				if (PQgetisnull(res, t, 0) || rows < 1 || PQgetlength(res, t, 0) != 8 * rows * (n + 1))
					pg_gpu_node_bad_answer(node, doing, psprintf("a piece of the product that is not rows of an id and %lld doubles",
																 (long long) n));
				from_node += rows;
				if (from_node > node->rows)
					pg_gpu_node_bad_answer(node, doing, psprintf("more rows of the product than the %lld it read",
																 (long long) node->rows));
				for (int64 r = 0; r < rows; r++)
				{
					uint64		be;
					int64		id;

					memcpy(&be, piece + 8 * r, 8);
					id = (int64) pg_ntoh64(be);
					if (id < 1 || id > m)
						pg_gpu_node_bad_answer(node, doing, psprintf("row %lld, out of 1 to %lld",
																	 (long long) id, (long long) m));
					if (pg_gpu_bit_get(seen, id - 1))
						ereport(ERROR,
								(errcode(ERRCODE_DATA_EXCEPTION),
								 errmsg("row %lld appears more than once in \"%s\"", (long long) id, a->relname),
								 errhint("Each row id of a dense matrix table must occur once.")));
					pg_gpu_bit_set(seen, id - 1);
					pg_gpu_doubles_from_wire(piece + 8 * rows + 8 * (Size) r * n, n, c + (id - 1) * n);
				}
				got += rows;
			}
			PQclear(res);
			CHECK_FOR_INTERRUPTS();
		}
		if (PQstatus(node->conn) == CONNECTION_BAD)
			pg_gpu_node_lost(node, doing);
	}
	pfree(seen);
	if (got != m)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("the Citus nodes returned %lld rows of the product, not the %lld they read",
						(long long) got, (long long) m),
				 errhint("Rows changed while the call ran? Run it again.")));
	pg_gpu_nodes_close(&mn->ns);
}
