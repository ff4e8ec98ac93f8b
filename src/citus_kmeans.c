/*
 * citus_kmeans.c - k-means on a Citus distributed table where its rows live.
 *
 * Each node that holds shards (citus.c connects to them) reads its own
 * shards into its own GPU (or CPU) with pg_gpu_node_kmeans_load (citus_node.c).
 * The fit is the compute layer's pggpu_kmeans_over with the nodes as its
 * source: an iteration sends the centroids to every node at once and gets
 * back k x (d + 1) sums and counts from each (weighted rows: and the
 * clusters' weights), added here in node order; the
 * seeding gathers the sample that every node draws by the same rule (each
 * row by its content key), and an emptied cluster takes the farthest row of
 * any node, so a fit is the one the same rows give in one table.  Memberships come back from the nodes as
 * rows of arrays (pg_gpu_node_kmeans_labels).  Every call is qualified
 * with pg_gpu's schema, on connections whose search_path is pg_catalog, in
 * one transaction a node (citus.c), and every answer is checked before it is
 * used (08P01 naming the node).
 *
 * Not on the nodes (read through Citus's executor instead, as before):
 * reference and Citus local tables, scale => 'standard' fits,
 * gpu_kmeans_choose_k, and a transaction that has written already (its
 * uncommitted rows are seen only through Citus's own connections).
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "pg_gpu.h"
#include "citus.h"

struct PgGpuCluster
{
	PgGpuNodes	ns;
	int			d;
	Oid			keytype;		/* the ids' (PgGpuSource.keytype) */
	int			k;				/* of the fit's steps */
	pggpu_metric metric;
	double	   *held;			/* the fit's centroids (k x d, fit units) */
	int64	   *counts;			/* its last step's counts */
	bool		weighted;		/* the rows weigh (the nodes answer the clusters' weights too) */
	PgGpuData  *home;			/* the fit's host memory (and the seeding sample) */
	const char *nsp;			/* pg_gpu's schema, quoted: every call sent is qualified with it */
};

static char *
centroids_param(const double *C, int k, int d, int *len)
{
	char	   *b = MemoryContextAllocHuge(CurrentMemoryContext, 8 * (Size) k * d);

	pg_gpu_doubles_to_wire(C, (int64) k * d, b);
	*len = 8 * k * d;
	return b;
}

PgGpuCluster *
pg_gpu_cluster_load(const PgGpuSource *src, pggpu_metric metric, bool want_ids, const double *mean,
					const double *std, PgGpuRows *rows)
{
	PgGpuCluster *cl = palloc0(sizeof(PgGpuCluster));
	static const Oid types[9] = {REGCLASSARRAYOID, TEXTARRAYOID, TEXTOID, TEXTOID, INT4OID,
	FLOAT8ARRAYOID, FLOAT8ARRAYOID, TEXTOID, BOOLOID};
	const char *values[9];
	int			lengths[9] = {0};
	char	   *sql;

	cl->metric = metric;
	cl->weighted = PG_GPU_WEIGHTED(src);
	values[7] = src->wname;
	values[8] = src->mweights ? "true" : "false";
	cl->d = src->ncols;
	cl->keytype = src->keytype;
	values[1] = pg_gpu_names_literal((const char *const *) src->colnames, src->natts);
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
		values[5] = pg_gpu_array_binary(a, &lengths[5]);
		for (int j = 0; j < src->ncols; j++)
			v[j] = Float8GetDatum(std[j]);
		a = construct_array(v, src->ncols, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
		values[6] = pg_gpu_array_binary(a, &lengths[6]);
	}

	cl->nsp = pg_gpu_node_schema();
	pg_gpu_nodes_open(&cl->ns, src->relid, src->relname);
	pg_gpu_progress(true, "%d Citus nodes reading their shards", cl->ns.nnodes);
	sql = psprintf("SELECT rows, invalid, device FROM %s.pg_gpu_node_kmeans_load($1, $2, $3, $4, $5, $6, $7, $8, $9)",
				   cl->nsp);
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		values[0] = cl->ns.nodes[i].shards;
		pg_gpu_node_send(&cl->ns.nodes[i], sql, 9, types, values, lengths, "reading its shards");
	}
	memset(rows, 0, sizeof(*rows));
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		PgGpuNode  *node = &cl->ns.nodes[i];
		const char *doing = "reading its shards";
		PGresult   *res = pg_gpu_node_result(node, doing);

		pg_gpu_node_check_result(node, res, 1, 3, doing);
		node->rows = pg_gpu_result_int8(node, res, 0, 0, doing);
		node->invalid = pg_gpu_result_int8(node, res, 0, 1, doing);
		if (node->rows < 0 || node->invalid < 0 || node->rows > PG_INT64_MAX / 4 - rows->nvalid ||
			node->invalid > PG_INT64_MAX / 4 - rows->ninvalid || PQgetisnull(res, 0, 2))
			pg_gpu_node_bad_answer(node, doing, "counts of rows that cannot be");
		node->device = pnstrdup(PQgetvalue(res, 0, 2), PQgetlength(res, 0, 2));
		PQclear(res);
		rows->nvalid += node->rows;
		rows->ninvalid += node->invalid;
	}
	/* the fit's host memory: a CPU set of no rows (closed with the call's context) */
	cl->home = pg_gpu_data_open(PGGPU_BACKEND_CPU, cl->d, 0, 0);
	pg_gpu_data_set_kmeans(cl->home, metric, true);
	return cl;
}

const char *
pg_gpu_cluster_device(const PgGpuCluster *cl)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		bool		seen = false;

		for (int j = 0; j < i; j++)
			seen |= strcmp(cl->ns.nodes[j].device, cl->ns.nodes[i].device) == 0;
		if (!seen)
			appendStringInfo(&s, "%s%s", s.len ? ", " : "", cl->ns.nodes[i].device);
	}
	appendStringInfo(&s, " (%d Citus node%s)", cl->ns.nnodes, cl->ns.nnodes == 1 ? "" : "s");
	return s.data;
}

/*
 * The source's step: every node's at once, added in node order.  The nodes
 * speak the caller's units (each computes at a scale of its own); the fit
 * computes at 2^e times them.
 */
static pggpu_status
cluster_step(void *arg, const double *C, int k, int e, bool begin, bool update, int64_t *empty,
			 int64_t *counts_out, double *inertia, int64_t *changed, int32_t *labels, pggpu_error *err)
{
	PgGpuCluster *cl = (PgGpuCluster *) arg;
	int			d = cl->d;
	static const Oid types[2] = {BYTEAOID, BOOLOID};
	const char *values[2];
	int			lengths[2] = {0, 0};
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_gpu step", ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	double	   *psums = palloc(sizeof(double) * k * d);
	double	   *sums = palloc0(sizeof(double) * k * d);
	double	   *pmass = palloc(sizeof(double) * k);
	double	   *mass = cl->weighted ? palloc0(sizeof(double) * k) : NULL;
	double	   *Cu = palloc(sizeof(double) * k * d);
	const char *doing = "computing a k-means iteration";
	char	   *sql = psprintf("SELECT sums, counts, inertia, changed, mass FROM %s.pg_gpu_node_kmeans_step($1, $2)",
							   cl->nsp);
	int64	   *counts;
	double		unwanted;

	Assert(labels == NULL);
	/* (the nodes measure it all the same: their step's answer has it) */
	if (inertia == NULL)
		inertia = &unwanted;
	if (cl->held == NULL || cl->k != k)
	{
		cl->held = MemoryContextAllocHuge(GetMemoryChunkContext(cl), sizeof(double) * k * d);
		cl->counts = MemoryContextAllocHuge(GetMemoryChunkContext(cl), sizeof(int64) * k);
		cl->k = k;
	}
	counts = cl->counts;
	if (C)
		memcpy(cl->held, C, sizeof(double) * k * d);
	for (int64 j = 0; j < (int64) k * d; j++)
		Cu[j] = ldexp(cl->held[j], -e);
	values[0] = centroids_param(Cu, k, d, &lengths[0]);
	values[1] = begin ? "true" : "false";
	for (int i = 0; i < cl->ns.nnodes; i++)
		pg_gpu_node_send(&cl->ns.nodes[i], sql, 2, types, values, lengths, doing);
	memset(counts, 0, sizeof(int64_t) * k);
	*inertia = 0;
	*changed = 0;
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		PgGpuNode  *node = &cl->ns.nodes[i];
		PGresult   *res = pg_gpu_node_result(node, doing);
		ArrayType  *c;
		const int64 *cv;
		int64		nchanged;

		pg_gpu_node_check_result(node, res, 1, 5, doing);
		c = pg_gpu_result_array(node, res, 0, 1, INT8OID, doing);
		cv = (const int64 *) ARR_DATA_PTR(c);
		if (PQgetisnull(res, 0, 0) || PQgetlength(res, 0, 0) != 8 * k * d)
			pg_gpu_node_bad_answer(node, doing, psprintf("sums of another size than %d x %d doubles", k, d));
		if (ArrayGetNItems(ARR_NDIM(c), ARR_DIMS(c)) != k || ARR_HASNULL(c))
			pg_gpu_node_bad_answer(node, doing, psprintf("counts of another length than %d", k));
		for (int j = 0; j < k; j++)
			if (cv[j] < 0 || cv[j] > node->rows)
				pg_gpu_node_bad_answer(node, doing, psprintf("a count of %lld for a node of %lld rows",
															 (long long) cv[j], (long long) node->rows));
		nchanged = pg_gpu_result_int8(node, res, 0, 3, doing);
		if (nchanged < 0 || nchanged > node->rows)
			pg_gpu_node_bad_answer(node, doing, "a count of changed rows that cannot be");
		pg_gpu_doubles_from_wire(PQgetvalue(res, 0, 0), (int64) k * d, psums);
		for (int64 j = 0; j < (int64) k * d; j++)
			sums[j] += psums[j];
		for (int j = 0; j < k; j++)
			counts[j] += cv[j];
		if (mass)
		{
			/* (weighted rows: the clusters' weights, added in node order as the sums) */
			if (PQgetisnull(res, 0, 4) || PQgetlength(res, 0, 4) != 8 * k)
				pg_gpu_node_bad_answer(node, doing, psprintf("clusters' weights of another length than %d", k));
			pg_gpu_doubles_from_wire(PQgetvalue(res, 0, 4), k, pmass);
			for (int j = 0; j < k; j++)
			{
				if (!(pmass[j] >= 0) || isinf(pmass[j]))
					pg_gpu_node_bad_answer(node, doing, "a cluster's weight that cannot be");
				mass[j] += pmass[j];
			}
		}
		*inertia += pg_gpu_result_float8(node, res, 0, 2, doing);
		*changed += nchanged;
		PQclear(res);
	}
	*inertia = ldexp(*inertia, 2 * e);
	if (update)
	{
		for (int64 j = 0; j < (int64) k * d; j++)
			sums[j] = ldexp(sums[j], e);
		pggpu_centroids_update(cl->held, sums, counts, mass, k, d, cl->metric, e);
	}
	*empty = 0;
	for (int c = 0; c < k; c++)
		*empty += counts[c] == 0;
	if (counts_out)
		memcpy(counts_out, counts, sizeof(int64) * k);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return PGGPU_OK;
}

/*
 * the source's sample: every node's sampled rows, in node order, into the
 * home's scratch (no keys; weighted rows: their weights, each row's last
 * value on the wire)
 */
static pggpu_status
cluster_sample(void *arg, uint64_t seed, double rate, double **rows, uint64_t **keys, double **weights,
			   int64_t *mout, pggpu_error *err)
{
	PgGpuCluster *cl = (PgGpuCluster *) arg;
	int			width = cl->d + (cl->weighted ? 1 : 0);
	double	   *R = NULL,
			   *W = NULL;
	static const Oid types[2] = {INT8OID, FLOAT8OID};
	const char *values[2];
	PGresult  **got = palloc(sizeof(PGresult *) * cl->ns.nnodes);
	int64		m = 0;
	double	   *X;

	const char *doing = "drawing the seeding sample";
	char	   *sql = psprintf("SELECT %s.pg_gpu_node_kmeans_sample($1, $2)", cl->nsp);

	values[0] = psprintf("%lld", (long long) (int64) seed);
	values[1] = psprintf("%.17g", rate);
	for (int i = 0; i < cl->ns.nnodes; i++)
		pg_gpu_node_send(&cl->ns.nodes[i], sql, 2, types, values, NULL, doing);
	/* (each result is read before the next node's: a sample is about pggpu_seed_rows) */
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		PgGpuNode  *node = &cl->ns.nodes[i];

		got[i] = pg_gpu_node_result(node, doing);
		pg_gpu_node_check_result(node, got[i], 1, 1, doing);
		if (PQgetisnull(got[i], 0, 0) || PQgetlength(got[i], 0, 0) % (8 * width) != 0 ||
			PQgetlength(got[i], 0, 0) / (8 * width) > node->rows)
			pg_gpu_node_bad_answer(node, doing, psprintf("a sample that is not rows of %d doubles, at most %lld",
														 width, (long long) node->rows));
		m += PQgetlength(got[i], 0, 0) / (8 * width);
	}
	X = pggpu_scratch_realloc(cl->home->ds, *rows, sizeof(double) * Max(m, 1) * cl->d);
	if (X != NULL && cl->weighted)
	{
		W = pggpu_scratch_realloc(cl->home->ds, *weights, sizeof(double) * Max(m, 1));
		R = palloc(sizeof(double) * width * Max(m, 1));
	}
	if (X == NULL || (cl->weighted && W == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory for a seeding sample of %lld rows", (long long) m)));
	*rows = X;
	if (W)
		*weights = W;
	m = 0;
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		int64		nv = PQgetlength(got[i], 0, 0) / 8;

		pg_gpu_doubles_from_wire(PQgetvalue(got[i], 0, 0), nv, R ? R : X + m * cl->d);
		for (int64 r = 0; R && r < nv / width; r++)
		{
			memcpy(X + (m + r) * cl->d, R + r * width, sizeof(double) * cl->d);
			W[m + r] = R[r * width + cl->d];
			if (!(W[m + r] >= 0) || isinf(W[m + r]))
				pg_gpu_node_bad_answer(&cl->ns.nodes[i], doing, "a sampled row's weight that cannot be");
		}
		m += nv / width;
		PQclear(got[i]);
	}
	*mout = m;
	return PGGPU_OK;
}

/* the source's centroids: the fit's, held here */
static pggpu_status
cluster_centroids(void *arg, double *C, pggpu_error *err)
{
	PgGpuCluster *cl = (PgGpuCluster *) arg;

	memcpy(C, cl->held, sizeof(double) * cl->k * cl->d);
	return PGGPU_OK;
}

/* the source's counts: the last step's */
static pggpu_status
cluster_counts(void *arg, int64_t *counts, pggpu_error *err)
{
	PgGpuCluster *cl = (PgGpuCluster *) arg;

	memcpy(counts, cl->counts, sizeof(int64) * cl->k);
	return PGGPU_OK;
}

/* the source's farthest rows: every node's best m, merged */
static pggpu_status
cluster_farthest(void *arg, int m, int e, double *rows, double *d2, uint64_t *keys, int *got,
				 pggpu_error *err)
{
	PgGpuCluster *cl = (PgGpuCluster *) arg;
	int			d = cl->d;
	static const Oid types[1] = {INT4OID};
	const char *values[1] = {psprintf("%d", m)};
	const char *doing = "finding the farthest rows";
	char	   *sql = psprintf("SELECT rows, distances, keys FROM %s.pg_gpu_node_kmeans_farthest($1)", cl->nsp);
	double	   *nrows = palloc(sizeof(double) * m * d);

	*got = 0;
	for (int i = 0; i < cl->ns.nnodes; i++)
		pg_gpu_node_send(&cl->ns.nodes[i], sql, 1, types, values, NULL, doing);
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		PgGpuNode  *node = &cl->ns.nodes[i];
		PGresult   *res = pg_gpu_node_result(node, doing);
		ArrayType  *da,
				   *ka;
		int			ng;
		const double *dv;
		const int64 *kv;

		pg_gpu_node_check_result(node, res, 1, 3, doing);
		da = pg_gpu_result_array(node, res, 0, 1, FLOAT8OID, doing);
		ka = pg_gpu_result_array(node, res, 0, 2, INT8OID, doing);
		ng = ArrayGetNItems(ARR_NDIM(da), ARR_DIMS(da));
		if (ng > m || ARR_HASNULL(da) || ARR_HASNULL(ka) || ArrayGetNItems(ARR_NDIM(ka), ARR_DIMS(ka)) != ng ||
			PQgetisnull(res, 0, 0) || PQgetlength(res, 0, 0) != 8 * ng * d)
			pg_gpu_node_bad_answer(node, doing, psprintf("not at most %d rows of %d doubles with a distance and a key each", m, d));
		dv = (const double *) ARR_DATA_PTR(da);
		kv = (const int64 *) ARR_DATA_PTR(ka);
		pg_gpu_doubles_from_wire(PQgetvalue(res, 0, 0), (int64) ng * d, nrows);
		for (int a = 0; a < ng; a++)
		{
			int			q;

			if (!(dv[a] > 0))
				pg_gpu_node_bad_answer(node, doing, "a farthest row at no distance");
			q = pggpu_farthest_slot(d2, keys, rows, sizeof(double) * d, m, got, ldexp(dv[a], 2 * e),
									(uint64) kv[a]);
			for (int j = 0; q >= 0 && j < d; j++)
				rows[(int64) q * d + j] = ldexp(nrows[(int64) a * d + j], e);
		}
		PQclear(res);
	}
	pfree(nrows);
	return PGGPU_OK;
}

void
pg_gpu_cluster_fit(PgGpuCluster *cl, const pggpu_kmeans_params *p, pggpu_kmeans_result *r)
{
	pggpu_kmeans_source src = {0};
	pggpu_error err = {0};

	src.home = cl->home->ds;
	for (int i = 0; i < cl->ns.nnodes; i++)
		src.n += cl->ns.nodes[i].rows;
	src.step = cluster_step;
	src.centroids = cluster_centroids;
	src.counts = cluster_counts;
	src.sample = cluster_sample;
	src.farthest = cluster_farthest;
	src.arg = cl;
	if (pggpu_kmeans_over(&src, p, r, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
}

/* an id a node sent as text, into keys */
static int64
node_key(PgGpuKeys *keys, FmgrInfo *in, Oid ioparam, Datum value)
{
	char	   *str = TextDatumGetCString(value);
	Datum		key = InputFunctionCall(in, str, ioparam, -1);
	int64		id = pg_gpu_keys_add(keys, key);

	pfree(str);
	pfree(DatumGetPointer(key));
	return id;
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
	const char *doing = "assigning its rows";
	char	   *sql = psprintf("SELECT ids, clusters, distances, keys FROM %s.pg_gpu_node_kmeans_labels($1)",
							   cl->nsp);
	bool		as_text;
	FmgrInfo	in;
	Oid			ioparam = InvalidOid;

	/* ids passed by reference come as text (pg_gpu_node_kmeans_labels), read by the type's input */
	rows->keys = palloc(sizeof(PgGpuKeys));
	pg_gpu_keys_init(rows->keys, cl->keytype);
	as_text = !rows->keys->typbyval;
	if (as_text)
	{
		Oid			fn;

		getTypeInputInfo(cl->keytype, &fn, &ioparam);
		fmgr_info(fn, &in);
	}

	rows->ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * Max(rows->nvalid, 1));
	rows->invalid_ids = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * Max(rows->ninvalid, 1));
	*labels = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int32) * Max(rows->nvalid, 1));
	if (distances)
		*distances = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * Max(rows->nvalid, 1));
	values[0] = centroids_param(C, k, cl->d, &lengths[0]);
	pg_gpu_progress(true, "assigning %lld rows on %d Citus nodes", (long long) rows->nvalid, cl->ns.nnodes);
	/* a row of arrays at a time (single-row mode): never a node's whole answer in memory at once */
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		pg_gpu_node_send(&cl->ns.nodes[i], sql, 1, types, values, lengths, doing);
		if (!PQsetSingleRowMode(cl->ns.nodes[i].conn))
			pg_gpu_node_lost(&cl->ns.nodes[i], doing);
	}
	for (int i = 0; i < cl->ns.nnodes; i++)
	{
		PgGpuNode  *node = &cl->ns.nodes[i];
		PGresult   *res;
		int64		seen = 0;	/* this node's rows so far */

		while ((res = pg_gpu_node_next_rows(node, doing)) != NULL)
		{
			pg_gpu_node_check_result(node, res, -1, 4, doing);
			for (int t = 0; t < PQntuples(res); t++)
			{
				ArrayType  *ia = as_text ? pg_gpu_result_array(node, res, t, 3, TEXTOID, doing) :
					pg_gpu_result_array(node, res, t, 0, INT8OID, doing);
				ArrayType  *ca = pg_gpu_result_array(node, res, t, 1, INT4OID, doing);
				ArrayType  *da = pg_gpu_result_array(node, res, t, 2, FLOAT8OID, doing);
				Datum	   *iv,
						   *cv,
						   *dv;
				bool	   *cn,
						   *dn;
				int			m,
							m2;

				int			m3;

				if (ARR_HASNULL(ia))
					pg_gpu_node_bad_answer(node, doing, "a NULL id");
				if (as_text)
					deconstruct_array(ia, TEXTOID, -1, false, TYPALIGN_INT, &iv, NULL, &m);
				else
					deconstruct_array(ia, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &iv, NULL, &m);
				deconstruct_array(ca, INT4OID, 4, true, TYPALIGN_INT, &cv, &cn, &m2);
				deconstruct_array(da, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &dv, &dn, &m3);
				if (m2 != m || m3 != m)
					pg_gpu_node_bad_answer(node, doing, psprintf("ids, clusters and distances of %d, %d and %d rows",
																 m, m2, m3));
				seen += m;
				if (seen > node->rows + node->invalid)
					pg_gpu_node_bad_answer(node, doing, psprintf("more rows than the %lld it read",
																 (long long) (node->rows + node->invalid)));
				for (int j = 0; j < m; j++)
				{
					if (cn[j] != dn[j] || (!cn[j] && (DatumGetInt32(cv[j]) < 1 || DatumGetInt32(cv[j]) > k)))
						pg_gpu_node_bad_answer(node, doing, psprintf("cluster %s for a fit of %d clusters",
																	 cn[j] ? "NULL" : psprintf("%d", DatumGetInt32(cv[j])), k));
				}
				for (int j = 0; j < m; j++)
				{
					int64		id = as_text ? node_key(rows->keys, &in, ioparam, iv[j]) : DatumGetInt64(iv[j]);

					if (cn[j] && ni < rows->ninvalid)
						rows->invalid_ids[ni++] = id;
					else if (!cn[j] && nv < rows->nvalid)
					{
						rows->ids[nv] = id;
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
		if (PQstatus(node->conn) == CONNECTION_BAD)
			pg_gpu_node_lost(node, doing);
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
	pg_gpu_nodes_close(&cl->ns);
	pg_gpu_data_close(cl->home);
}

