/*
 * citus.h - the coordinator's connections to Citus nodes (citus.c), shared
 * by the calls that run on the nodes (citus_kmeans.c, citus_matmul.c).
 */
#ifndef PG_GPU_CITUS_H
#define PG_GPU_CITUS_H

#include "libpq-fe.h"
#include "lib/stringinfo.h"
#include "utils/array.h"

typedef struct PgGpuNode
{
	char	   *host;
	int			port;
	int			nodeid;
	char	   *shards;			/* regclass[] literal, the shards read there */
	PGconn	   *conn;
	int64		rows;
	int64		invalid;		/* k-means: rows with NULL / NaN */
	char	   *device;
} PgGpuNode;

/* the nodes that hold a table's shards, and a connection to each */
typedef struct PgGpuNodes
{
	int			nnodes;
	PgGpuNode  *nodes;
	MemoryContextCallback cb;	/* closes the connections */
} PgGpuNodes;

extern void pg_gpu_nodes_open(PgGpuNodes *ns, Oid relid, const char *relname);
extern void pg_gpu_nodes_close(PgGpuNodes *ns);

/* a query to a node (parameters in text, or binary where lengths[i] > 0; results in binary) */
extern void pg_gpu_node_send(PgGpuNode *node, const char *sql, int nparams, const Oid *types,
							 const char *const *values, const int *lengths, const char *doing);
extern PGresult *pg_gpu_node_next(PgGpuNode *node, const char *doing);
extern PGresult *pg_gpu_node_next_rows(PgGpuNode *node, const char *doing);
extern PGresult *pg_gpu_node_result(PgGpuNode *node, const char *doing);
pg_noreturn extern void pg_gpu_node_lost(PgGpuNode *node, const char *doing);

/* pg_gpu's schema (quoted), which qualifies every call sent to a node; the GRANT a role needs there */
extern const char *pg_gpu_node_schema(void);
extern char *pg_gpu_node_grant(const char *role);

/* binary values, as libpq parameters and results; a node's answer checked (08P01 naming it) */
extern char *pg_gpu_names_literal(const char *const *names, int n);
extern char *pg_gpu_array_binary(ArrayType *a, int *len);
pg_noreturn extern void pg_gpu_node_bad_answer(PgGpuNode *node, const char *doing, const char *what);
extern void pg_gpu_node_check_result(PgGpuNode *node, PGresult *res, int ntuples, int nfields,
									 const char *doing);
extern ArrayType *pg_gpu_result_array(PgGpuNode *node, PGresult *res, int row, int col, Oid elemtype,
									  const char *doing);
extern StringInfoData pg_gpu_result_field(PGresult *res, int row, int col);
extern int64 pg_gpu_result_int8(PgGpuNode *node, PGresult *res, int row, int col, const char *doing);
extern int32 pg_gpu_result_int4(PgGpuNode *node, PGresult *res, int row, int col, const char *doing);
extern double pg_gpu_result_float8(PgGpuNode *node, PGresult *res, int row, int col, const char *doing);

#endif							/* PG_GPU_CITUS_H */
