/*
 * sql.c - bench_sql: the suite's measurements through PostgreSQL, a libpq
 * client of the server in PGHOST/PGPORT/PGUSER (database pg_gpu_bench,
 * made when missing).
 *
 *   bench_sql info
 *       the server's version and settings, one "key<TAB>value" a line
 *   bench_sql e2e [options] N ...
 *       per table of N rows (blobs, d columns, made by COPY from the
 *       generator and kept for later runs), side by side in one session:
 *       SELECT count(*), avg(x1), ... FROM t (the floor for reading, with the
 *       server's max_parallel_workers_per_gather and with 0),
 *       SELECT count(*) FROM generate_series(1, N) (the floor for returning
 *       N rows), then for each k: gpu_kmeans_fit and gpu_kmeans with their
 *       stages (the DEBUG2 message) and parallel workers (DEBUG1), for the
 *       first k both again through a view (read through SPI, as tables were
 *       before parallel reading); gpu_matmul of the same rows as a dense
 *       table (row_id, row_vec) by a d x d matrix, beside reading it and
 *       through a view (N <= 1e7); one Lloyd step in plain SQL (N <=
 *       LLOYD_MAX, under statement_timeout), and the export route: COPY out
 *       to a file, EXPORT_CMD (python: numpy loads, scikit-learn fits, labels
 *       to a file), COPY the labels back in.
 *       -t TSV  -b BUDGET_S  -c CAP_S  -r REPS (after one warm-up; median)
 *       -D cpu|gpu (pg_gpu.device)  -d D  -k K[,K...]  -l LLOYD_MAX
 *       -T LLOYD_TIMEOUT_S  -x EXPORT_CMD (run as: EXPORT_CMD IN N D K OUT)
 *       -W WORKERS: max_parallel_workers_per_gather of the bench database
 *       (for every command given it; the server's when not given)
 *       Every statement runs under statement_timeout = CAP_S (the Lloyd
 *       step under LLOYD_TIMEOUT_S).
 *   bench_sql matmul [-t TSV] [-b BUDGET_S] [-c CAP_S] [-r REPS] [-D cpu|gpu] N
 *       gpu_matmul on two N x N matrices stored as dense rows and as
 *       entries (row_id, col_id, value), beside the SQL join-and-sum product
 *       of the entry tables; checks that the results agree.
 *
 * Rows go to the TSV as in bench.h; the exit status is non-zero when a
 * measurement failed (skipped ones do not count).
 */
#include <endian.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "blobs.h"
#include "libpq-fe.h"

#define DB "pg_gpu_bench"
#define MAX_K 8
#define MAX_REPS 16
#define MAX_STAGES 8
#define CHUNK_ROWS 65536
#define MATMUL_ROWS_MAX 10000000	/* the largest dense table gpu_matmul reads */

static PGconn *conn;
static int	failures;
static char stage_msg[1024];	/* the last "stages (ms):" message */
static int	read_workers = -1;	/* from the last "parallel workers: N launched" */

static struct
{
	int			reps;
	const char *device;
	int			d;
	int			ks[MAX_K];
	int			nk;
	int64_t		lloyd_max;
	int			lloyd_timeout;
	int			timeout;		/* statement_timeout now, seconds; 0: none */
	const char *export_cmd;
	char		tmpdir[64];
	int			workers;		/* max_parallel_workers_per_gather, -1: the server's */
}			opt = {3, "cpu", 8, {8}, 1, 1000000, 30, 0, NULL, "", -1};

static void
on_notice(void *arg, const char *msg)
{
	const char *stages = strstr(msg, "stages (ms):");
	const char *workers = strstr(msg, "parallel workers: ");

	if (workers)
		read_workers = atoi(workers + strlen("parallel workers: "));
	if (stages)
		snprintf(stage_msg, sizeof(stage_msg), "%s", stages + strlen("stages (ms):"));
}

/* runs sql; on failure false, with the message's first line and SQLSTATE */
static bool
exec_sql(const char *sql, char *err, size_t len)
{
	PGresult   *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	bool		ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

	if (!ok && err)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		snprintf(err, len, "%s %s", state ? state : "", PQerrorMessage(conn));
		err[strcspn(err, "\n")] = '\0';
	}
	PQclear(res);
	return ok;
}

/* runs a statement built with printf; exits when it fails */
static void
must(const char *fmt,...)
{
	char		sql[8192],
				err[512];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	if (!exec_sql(sql, err, sizeof(err)))
	{
		fprintf(stderr, "bench_sql: %s\n  in: %s\n", err, sql);
		exit(1);
	}
}

/* the first value of a query's result, or "" (static buffer) */
static const char *
value(const char *sql)
{
	static char out[1024];
	PGresult   *res = PQexec(conn, sql);

	out[0] = '\0';
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0)
		snprintf(out, sizeof(out), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return out;
}

static void
connect_db(void)
{
	conn = PQconnectdb("dbname=postgres");
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "bench_sql: %s", PQerrorMessage(conn));
		exit(1);
	}
	if (strcmp(value("SELECT count(*) FROM pg_database WHERE datname = '" DB "'"), "0") == 0)
		must("CREATE DATABASE " DB);
	/* the bench database's own setting, so that every session has it */
	if (opt.workers >= 0)
		must("ALTER DATABASE " DB " SET max_parallel_workers_per_gather = %d", opt.workers);
	PQfinish(conn);
	conn = PQconnectdb("dbname=" DB);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "bench_sql: %s", PQerrorMessage(conn));
		exit(1);
	}
	PQsetNoticeProcessor(conn, on_notice, NULL);
	must("CREATE EXTENSION IF NOT EXISTS pg_gpu");
	must("SET pg_gpu.max_memory = -1");
}

/*
 * COPY ... FROM STDIN with the data next() produces (it returns the bytes
 * it put into buf, 0 at the end).  Returns the rows copied, or -1.
 */
static int64_t
copy_in(const char *sql, size_t (*next) (void *arg, char *buf, size_t cap),
		void *arg)
{
	size_t		cap = 1 << 20,
				len;
	char	   *buf = malloc(cap);
	PGresult   *res = PQexec(conn, sql);
	int64_t		rows = -1;

	if (PQresultStatus(res) == PGRES_COPY_IN)
	{
		while ((len = next(arg, buf, cap)) > 0)
			if (PQputCopyData(conn, buf, len) != 1)
				break;
		PQputCopyEnd(conn, NULL);
		PQclear(res);
		res = PQgetResult(conn);
		if (PQresultStatus(res) == PGRES_COMMAND_OK)
			rows = atoll(PQcmdTuples(res));
	}
	if (rows < 0)
		fprintf(stderr, "bench_sql: %s", PQerrorMessage(conn));
	PQclear(res);
	while ((res = PQgetResult(conn)) != NULL)
		PQclear(res);
	free(buf);
	return rows;
}

static size_t
next_from_file(void *arg, char *buf, size_t cap)
{
	return fread(buf, 1, cap, (FILE *) arg);
}

/* binary COPY rows (id bigint, x1..xd float8) from the blobs generator */
typedef struct BlobStream
{
	int64_t		n;
	int			d;
	int64_t		next_row;
	bool		header_done,
				trailer_done;
	double	   *chunk;
} BlobStream;

static size_t
next_blobs(void *arg, char *buf, size_t cap)
{
	BlobStream *s = arg;
	size_t		row_bytes = 2 + 12 * (1 + s->d),
				len = 0;
	int64_t		m = s->n - s->next_row;

	if (!s->header_done)
	{
		memcpy(buf, "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);
		s->header_done = true;
		return 19;
	}
	if (m == 0)
	{
		if (s->trailer_done)
			return 0;
		s->trailer_done = true;
		memcpy(buf, "\377\377", 2);	/* field count -1: the end */
		return 2;
	}
	if (m > CHUNK_ROWS)
		m = CHUNK_ROWS;
	if ((size_t) m > cap / row_bytes)
		m = cap / row_bytes;
	blobs_fill(BLOBS_SEED, s->next_row, m, s->d, s->chunk, CHUNK_ROWS);
	for (int64_t r = 0; r < m; r++)
	{
		uint16_t	nf = htobe16(1 + s->d);
		uint32_t	w = htobe32(8);
		uint64_t	id = htobe64(s->next_row + r + 1);

		memcpy(buf + len, &nf, 2);
		memcpy(buf + len + 2, &w, 4);
		memcpy(buf + len + 6, &id, 8);
		len += 14;
		for (int j = 0; j < s->d; j++)
		{
			uint64_t	bits;

			memcpy(&bits, &s->chunk[j * CHUNK_ROWS + r], 8);
			bits = htobe64(bits);
			memcpy(buf + len, &w, 4);
			memcpy(buf + len + 4, &bits, 8);
			len += 12;
		}
	}
	s->next_row += m;
	return len;
}

/*
 * fmt once for each column j = 1..d, joined by sep; fmt's %d (up to four)
 * all take j.  A static buffer: one call per statement built.
 */
static char *
columns(const char *fmt, const char *sep, int d)
{
	static char out[4096];
	size_t		len = 0;

	out[0] = '\0';
	for (int j = 1; j <= d && len < sizeof(out); j++)
	{
		len += snprintf(out + len, sizeof(out) - len, "%s", j > 1 ? sep : "");
		len += snprintf(out + len, sizeof(out) - len, fmt, j, j, j, j);
	}
	return out;
}

/* statement_timeout, seconds (0: none) */
static void
set_timeout(int seconds)
{
	must("SET statement_timeout = '%ds'", seconds);
	opt.timeout = seconds;
}

/* the table of n blobs in d columns: reused when complete, else made */
static void
ensure_table(const char *t, int64_t n, int d)
{
	char		sql[8192],
				tag[128];
	double		t0 = bench_now();
	int			timeout = opt.timeout;
	BlobStream	s = {n, d, 0, false, false, NULL};

	snprintf(tag, sizeof(tag), "pg_gpu bench blobs seed=%d rows=%lld d=%d",
			 BLOBS_SEED, (long long) n, d);
	snprintf(sql, sizeof(sql),
			 "SELECT obj_description(to_regclass('%s'), 'pg_class') = '%s' AND (SELECT count(*) FROM %s) = %lld",
			 t, tag, t, (long long) n);
	if (strcmp(value(sql), "t") == 0)
	{
		bench_emit("table", "reuse", n, d, 0, bench_now() - t0,
				   "existing table with the right rows (count(*) checked)");
		return;
	}
	/* making it may take minutes: no statement_timeout */
	set_timeout(0);
	must("DROP TABLE IF EXISTS %s", t);
	must("CREATE TABLE %s (id bigint, %s)", t, columns("x%d float8", ", ", d));
	s.chunk = malloc(sizeof(double) * CHUNK_ROWS * d);
	snprintf(sql, sizeof(sql), "COPY %s FROM STDIN (FORMAT binary)", t);
	if (copy_in(sql, next_blobs, &s) != n)
	{
		fprintf(stderr, "bench_sql: loading %s failed\n", t);
		exit(1);
	}
	free(s.chunk);
	must("SET maintenance_work_mem = '1GB'");
	must("ALTER TABLE %s ADD PRIMARY KEY (id)", t);
	must("RESET maintenance_work_mem");
	must("VACUUM ANALYZE %s", t);
	must("COMMENT ON TABLE %s IS '%s'", t, tag);
	set_timeout(timeout);
	bench_emit("table", "create", n, d, 0, bench_now() - t0,
			   "COPY (binary) from the generator, primary key, VACUUM ANALYZE");
}

/* parses "read 1.0, transfer 2.0, ..." into names/vals; returns the count */
static int
parse_stages(const char *msg, char names[][16], double *vals)
{
	int			n = 0;
	const char *p = msg;

	while (n < MAX_STAGES && *p)
	{
		int			used;

		if (sscanf(p, " %15[a-z_] %lf%n", names[n], &vals[n], &used) != 2)
			break;
		n++;
		p += used;
		p += strspn(p, ", ");
	}
	return n;
}

/*
 * One run of sql, its stages (from the DEBUG2 message) into column r of
 * stages; false when it failed, with its row (statement_timeout: skipped).
 */
static bool
run_once(const char *section, const char *method, int64_t n, int d, int k,
		 const char *sql, double *sec, double stages[][MAX_REPS], int r,
		 char names[][16], int *nst)
{
	char		err[512];
	double		vals[MAX_STAGES],
				t0 = bench_now();
	int			m;

	stage_msg[0] = '\0';
	read_workers = -1;
	if (!exec_sql(sql, err, sizeof(err)))
	{
		if (strncmp(err, "57014", 5) == 0)
			bench_emit(section, method, n, d, k, -1,
					   "skipped: >%ds (statement_timeout)", opt.timeout);
		else
		{
			bench_emit(section, method, n, d, k, -1, "failed: %s", err);
			failures++;
		}
		return false;
	}
	*sec = bench_now() - t0;
	m = stage_msg[0] ? parse_stages(stage_msg, names, vals) : 0;
	*nst = r == 0 || m < *nst ? m : *nst;
	for (int s = 0; s < m; s++)
		stages[s][r] = vals[s];
	return true;
}

/*
 * Times sql: one warm-up, then the median of reps runs (reps = 0, or no
 * time left for them: the one run).  Stages, when the statement logs them,
 * give rows of section "stage".  Returns the seconds, or -1 (skipped or
 * failed, with its row).
 */
static double
statement(const char *section, const char *method, int64_t n, int d, int k,
		  int reps, const char *sql)
{
	char		key[128],
				note[512],
				names[MAX_STAGES][16];
	double		t[MAX_REPS],
				stages[MAX_STAGES][MAX_REPS],
				t0 = bench_now(),
				sec;
	int			timed = 1,
				runs = 1,
				nst = 0;

	snprintf(key, sizeof(key), "%s/%s/%d/%d", section, method, d, k);
	if (bench_skip(key, n, 1, note, sizeof(note)))
	{
		bench_emit(section, method, n, d, k, -1, "%s", note);
		return -1;
	}
	if (!run_once(section, method, n, d, k, sql, &t[0], stages, 0, names, &nst))
		return -1;
	if (reps == 0 || t[0] * reps > bench_left())
		snprintf(note, sizeof(note), reps == 0 ? "1 run" : "1 run (no time for more)");
	else
	{
		/* the warm-up's time and stages are overwritten */
		for (timed = 0; timed < reps; timed++, runs++)
			if (!run_once(section, method, n, d, k, sql, &t[timed], stages, timed, names, &nst))
				return -1;
		snprintf(note, sizeof(note), "median of %d after a warm-up", reps);
	}
	/* the time of one run, for predicting larger N */
	bench_done(key, n, (bench_now() - t0) / runs);
	sec = bench_median(t, timed);
	for (int s = 0; s < nst; s++)
		if (strcmp(names[s], "iterations") == 0)
			snprintf(note + strlen(note), sizeof(note) - strlen(note), "; iterations %.0f",
					 bench_median(stages[s], timed));
	if (read_workers >= 0)
		snprintf(note + strlen(note), sizeof(note) - strlen(note), "; parallel workers %d",
				 read_workers);
	bench_emit(section, method, n, d, k, sec, "%s", note);
	if (strcmp(section, "e2e") == 0 && strncmp(method, "gpu_kmeans", 10) == 0 && nst == 0)
		bench_emit("stage", method, n, d, k, -1, "n/a (no DEBUG2 stages message)");
	for (int s = 0; s < nst; s++)
		if (strcmp(names[s], "iterations") != 0)
		{
			char		m[192];

			snprintf(m, sizeof(m), "%s:%s", method, names[s]);
			bench_emit("stage", m, n, d, k, bench_median(stages[s], timed) / 1e3,
					   "median of %d, from the DEBUG2 message", timed);
		}
	return sec;
}

/* COPY (SELECT id, x...) TO STDOUT (binary) into path; seconds or -1 */
static double
copy_out(const char *t, int d, const char *path)
{
	char		sql[8192],
			   *buf;
	double		t0 = bench_now();
	FILE	   *f = fopen(path, "wb");
	PGresult   *res;
	int			len;
	bool		ok;

	snprintf(sql, sizeof(sql), "COPY (SELECT id, %s FROM %s) TO STDOUT (FORMAT binary)",
			 columns("x%d", ", ", d), t);
	res = PQexec(conn, sql);
	ok = PQresultStatus(res) == PGRES_COPY_OUT;
	PQclear(res);
	/* all of the data is read, even when the file cannot take it */
	while (ok && (len = PQgetCopyData(conn, &buf, 0)) > 0)
	{
		if (f && fwrite(buf, 1, len, f) != (size_t) len)
		{
			fclose(f);
			f = NULL;
		}
		PQfreemem(buf);
	}
	ok = ok && f != NULL;
	while ((res = PQgetResult(conn)) != NULL)
	{
		ok = ok && PQresultStatus(res) == PGRES_COMMAND_OK;
		PQclear(res);
	}
	if (f && fclose(f) != 0)
		ok = false;
	return ok ? bench_now() - t0 : -1;
}

/*
 * The export route for each k: COPY out (once), python (numpy load,
 * scikit-learn fit: its own rows), COPY the labels back.
 */
static void
export_route(const char *t, int64_t n, int d)
{
	char		data[256],
				labels[256],
				cmd[2048],
				note[256];
	double		sec;

	snprintf(data, sizeof(data), "%s/%s.copy", opt.tmpdir, t);
	snprintf(labels, sizeof(labels), "%s/labels.copy", opt.tmpdir);
	if (bench_skip("export_copy_out", n, 1, note, sizeof(note)))
	{
		bench_emit("e2e", "export_copy_out", n, d, 0, -1, "%s", note);
		return;
	}
	if ((sec = copy_out(t, d, data)) < 0)
	{
		bench_emit("e2e", "export_copy_out", n, d, 0, -1, "failed: %s", PQerrorMessage(conn));
		failures++;
		return;
	}
	bench_done("export_copy_out", n, sec);
	bench_emit("e2e", "export_copy_out", n, d, 0, sec, "1 run; COPY (binary) to a file through libpq");
	for (int i = 0; i < opt.nk; i++)
	{
		int			k = opt.ks[i],
					rc;
		double		t0 = bench_now(),
					limit;
		char		key[32];
		FILE	   *f;
		int64_t		rows;

		snprintf(key, sizeof(key), "export/%d", k);
		if (bench_skip(key, n, 1, note, sizeof(note)))
		{
			bench_emit("e2e", "export_fit", n, d, k, -1, "%s", note);
			continue;
		}
		limit = bench_run_limit() > 1 ? bench_run_limit() : 1;
		snprintf(cmd, sizeof(cmd), "timeout %.0f %s %s %lld %d %d %s",
				 limit, opt.export_cmd, data, (long long) n, d, k, labels);
		rc = system(cmd);
		if (WIFEXITED(rc) && WEXITSTATUS(rc) == 124)
		{
			bench_emit("e2e", "export_fit", n, d, k, -1, "skipped: >%.0fs (killed)", limit);
			continue;
		}
		if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
		{
			bench_emit("e2e", "export_fit", n, d, k, -1, "failed: %s exited with %d", cmd, rc);
			failures++;
			continue;
		}
		must("DROP TABLE IF EXISTS blobs_labels");
		must("CREATE TABLE blobs_labels (id bigint, cluster integer)");
		sec = bench_now();
		f = fopen(labels, "rb");
		rows = f ? copy_in("COPY blobs_labels FROM STDIN (FORMAT binary)", next_from_file, f) : -1;
		sec = bench_now() - sec;
		if (f)
			fclose(f);
		if (rows != n)
		{
			bench_emit("e2e", "export_copy_in", n, d, k, -1, "failed: %lld rows copied back", (long long) rows);
			failures++;
			continue;
		}
		bench_emit("e2e", "export_copy_in", n, d, k, sec, "1 run; COPY (binary) of (id, cluster) into a new table");
		bench_done(key, n, bench_now() - t0);
	}
	must("DROP TABLE IF EXISTS blobs_labels");
	unlink(data);
	unlink(labels);
}

/* one Lloyd step in plain SQL from the first k rows as centroids */
static void
sql_lloyd_step(const char *t, int64_t n, int d, int k)
{
	char		sql[8192];
	size_t		len;
	int			timeout = opt.timeout;

	if (n > opt.lloyd_max)
	{
		bench_emit("e2e", "sql_lloyd_step", n, d, k, -1,
				   "skipped: N > %lld (plain SQL takes minutes there)", (long long) opt.lloyd_max);
		return;
	}
	must("DROP TABLE IF EXISTS pg_temp.centroids");
	must("CREATE TEMP TABLE centroids AS SELECT row_number() OVER (ORDER BY id) AS cid, %s FROM %s ORDER BY id LIMIT %d",
		 columns("x%d", ", ", d), t, k);
	len = snprintf(sql, sizeof(sql), "SELECT n.cid, count(*), %s FROM %s t CROSS JOIN LATERAL (SELECT c.cid FROM centroids c ORDER BY ",
				   columns("avg(t.x%d)", ", ", d), t);
	len += snprintf(sql + len, sizeof(sql) - len, "%s",
					columns("(t.x%d - c.x%d) * (t.x%d - c.x%d)", " + ", d));
	snprintf(sql + len, sizeof(sql) - len, " LIMIT 1) n GROUP BY n.cid");
	set_timeout(opt.lloyd_timeout);
	statement("e2e", "sql_lloyd_step", n, d, k, 0, sql);
	set_timeout(timeout);
}

/*
 * gpu_matmul on a dense table of n rows (the blobs' d values of each row as
 * its row_vec) times a d x d matrix, beside reading the table, and through a
 * view of it (the SPI read).
 */
static void
matmul_dense(const char *t, int64_t n, int d)
{
	char		m[96],
				sql[8192],
				tag[128];
	double		t0 = bench_now();

	snprintf(m, sizeof(m), "%s_rows", t);
	snprintf(tag, sizeof(tag), "pg_gpu bench dense rows of %s", t);
	snprintf(sql, sizeof(sql), "SELECT obj_description(to_regclass('%s'), 'pg_class') = '%s'", m, tag);
	if (strcmp(value(sql), "t") != 0)
	{
		set_timeout(0);
		must("DROP TABLE IF EXISTS %s", m);
		must("CREATE TABLE %s AS SELECT id AS row_id, ARRAY[%s] AS row_vec FROM %s", m,
			 columns("x%d", ", ", d), t);
		must("VACUUM ANALYZE %s", m);
		must("COMMENT ON TABLE %s IS '%s'", m, tag);
		set_timeout(opt.timeout);
		bench_emit("table", "create_rows", n, d, 0, bench_now() - t0,
				   "CREATE TABLE AS (row_id, ARRAY[x1, ...]) from the blobs table");
	}
	must("DROP TABLE IF EXISTS bench_eye");
	must("CREATE TABLE bench_eye AS SELECT i AS row_id, array_agg((i = j)::int::float8 * 2 ORDER BY j) AS row_vec "
		 "FROM generate_series(1, %d) i, generate_series(1, %d) j GROUP BY i", d, d);
	snprintf(sql, sizeof(sql), "SELECT count(*), sum(row_vec[1]), sum(array_length(row_vec, 1)) FROM %s", m);
	statement("e2e", "rows_scan", n, d, 0, opt.reps, sql);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM gpu_matmul('%s'::regclass, 'bench_eye'::regclass)", m);
	statement("e2e", "gpu_matmul_rows", n, d, 0, opt.reps, sql);
	must("CREATE OR REPLACE VIEW %s_v AS SELECT * FROM %s", m, m);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM gpu_matmul('%s_v'::regclass, 'bench_eye'::regclass)", m);
	statement("e2e", "gpu_matmul_rows_spi", n, d, 0, opt.reps, sql);
}

static void
e2e(int64_t n)
{
	char		t[64],
				sql[8192],
				note[256];
	int			d = opt.d;
	double		t0 = bench_now();

	snprintf(t, sizeof(t), "blobs_%lld_%d", (long long) n, d);
	if (bench_skip("table", n, 1, note, sizeof(note)))
	{
		bench_emit("table", "create", n, d, 0, -1, "%s; nothing measured at this N", note);
		return;
	}
	ensure_table(t, n, d);
	bench_done("table", n, bench_now() - t0);
	must("SET pg_gpu.device = %s", opt.device);
	must("SET client_min_messages = debug2");
	snprintf(sql, sizeof(sql), "SELECT count(*), %s FROM %s", columns("avg(x%d)", ", ", d), t);
	statement("e2e", "scan_avg", n, d, 0, opt.reps, sql);
	must("SET max_parallel_workers_per_gather = 0");
	statement("e2e", "scan_avg_serial", n, d, 0, opt.reps, sql);
	must("RESET max_parallel_workers_per_gather");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM generate_series(1, %lld)", (long long) n);
	statement("e2e", "generate_series", n, 0, 0, opt.reps, sql);
	for (int i = 0; i < opt.nk; i++)
	{
		int			k = opt.ks[i];

		snprintf(sql, sizeof(sql), "SELECT * FROM gpu_kmeans_fit('%s', %d)", t, k);
		statement("e2e", "gpu_kmeans_fit", n, d, k, opt.reps, sql);
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM gpu_kmeans('%s', %d)", t, k);
		statement("e2e", "gpu_kmeans", n, d, k, opt.reps, sql);
		if (i == 0)
		{
			/* through a view: the SPI read, which tables took before parallel reading */
			must("CREATE OR REPLACE VIEW %s_v AS SELECT * FROM %s", t, t);
			snprintf(sql, sizeof(sql), "SELECT * FROM gpu_kmeans_fit('%s_v', %d, id_column => 'id')", t, k);
			statement("e2e", "gpu_kmeans_fit_spi", n, d, k, opt.reps, sql);
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM gpu_kmeans('%s_v', %d, id_column => 'id')", t, k);
			statement("e2e", "gpu_kmeans_spi", n, d, k, opt.reps, sql);
		}
		sql_lloyd_step(t, n, d, k);
	}
	if (n <= MATMUL_ROWS_MAX)
		matmul_dense(t, n, d);
	must("RESET client_min_messages");
	if (opt.export_cmd)
		export_route(t, n, d);
}

/* a dense n x n matrix table (row_id, row_vec) of blobs values */
static void
matrix_table(const char *t, int n, uint64_t seed)
{
	char		sql[256];
	size_t		cap = (size_t) n * (n * 26 + 16) + 64,
				len = 0;
	char	   *text = malloc(cap);
	FILE	   *f;

	for (int i = 0; i < n; i++)
	{
		len += snprintf(text + len, cap - len, "%d\t{", i + 1);
		for (int j = 0; j < n; j++)
			len += snprintf(text + len, cap - len, "%.17g%s", blobs_value(seed, i, j),
							j < n - 1 ? "," : "}\n");
	}
	must("DROP TABLE IF EXISTS %s", t);
	must("CREATE TABLE %s (row_id integer, row_vec float8[])", t);
	f = fmemopen(text, len, "r");
	snprintf(sql, sizeof(sql), "COPY %s FROM STDIN", t);
	if (copy_in(sql, next_from_file, f) != n)
		exit(1);
	fclose(f);
	free(text);
}

static void
matmul(int n)
{
	char		sql[1024];
	const char *diff;
	const char *product = "SELECT a.row_id AS i, b.col_id AS j, sum(a.value * b.value) AS v "
		"FROM mm_a a JOIN mm_b b ON a.col_id = b.row_id GROUP BY 1, 2";

	matrix_table("mm_a_dense", n, BLOBS_SEED);
	matrix_table("mm_b_dense", n, BLOBS_SEED + 1);
	must("CREATE TABLE mm_a AS SELECT row_id, j AS col_id, v AS value FROM mm_a_dense, unnest(row_vec) WITH ORDINALITY u(v, j)");
	must("CREATE TABLE mm_b AS SELECT row_id, j AS col_id, v AS value FROM mm_b_dense, unnest(row_vec) WITH ORDINALITY u(v, j)");
	must("VACUUM ANALYZE mm_a_dense, mm_b_dense, mm_a, mm_b");
	must("SET pg_gpu.device = %s", opt.device);
	statement("matmul_sql", "gpu_matmul_dense", n, 0, 0, opt.reps,
			  "SELECT count(*) FROM gpu_matmul('mm_a_dense'::regclass, 'mm_b_dense'::regclass)");
	statement("matmul_sql", "gpu_matmul_entries", n, 0, 0, opt.reps,
			  "SELECT count(*) FROM gpu_matmul('mm_a'::regclass, 'mm_b'::regclass)");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM (%s) s", product);
	statement("matmul_sql", "sql_join_sum", n, 0, 0, opt.reps, sql);
	snprintf(sql, sizeof(sql),
			 "SELECT (max(abs(g.v - s.v)) / max(abs(s.v)))::text || ' over ' || count(*) || ' entries' "
			 "FROM (SELECT r.row_id AS i, u.j, u.v FROM gpu_matmul('mm_a'::regclass, 'mm_b'::regclass) r, "
			 "unnest(r.row_vec) WITH ORDINALITY u(v, j)) g JOIN (%s) s USING (i, j)", product);
	diff = value(sql);
	if (atof(diff) <= 1e-12 && strstr(diff, " over "))
		bench_emit("check", "matmul_agree", n, 0, 0, -1,
				   "gpu_matmul and the SQL product agree: largest difference / largest entry = %s", diff);
	else
	{
		bench_emit("check", "matmul_agree", n, 0, 0, -1,
				   "FAILED: gpu_matmul and the SQL product differ: %s", diff);
		failures++;
	}
	must("DROP TABLE mm_a, mm_b, mm_a_dense, mm_b_dense");
}

static void
info(void)
{
	printf("server_version\t%s\n", value("SHOW server_version"));
	printf("max_parallel_workers_per_gather\t%s\n", value("SHOW max_parallel_workers_per_gather"));
	printf("shared_buffers\t%s\n", value("SHOW shared_buffers"));
	printf("work_mem\t%s\n", value("SHOW work_mem"));
	printf("pg_gpu_version\t%s\n", value("SELECT extversion FROM pg_extension WHERE extname = 'pg_gpu'"));
	printf("pg_gpu_gpu\t%s\n", value("SELECT coalesce((SELECT name FROM gpu_info() LIMIT 1), 'none')"));
}

int
main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";
	double		budget = 1e12,
				cap = 1e12;
	int			c;

	if (strcmp(cmd, "info") && strcmp(cmd, "e2e") && strcmp(cmd, "matmul"))
	{
		fprintf(stderr, "usage: %s info | e2e [options] N ... | matmul [options] N (see sql.c)\n", argv[0]);
		return 2;
	}
	optind = 2;
	while ((c = getopt(argc, argv, "t:b:c:r:D:d:k:l:T:x:W:")) != -1)
	{
		switch (c)
		{
			case 't':
				bench_open_tsv(optarg);
				break;
			case 'b':
				budget = atof(optarg);
				break;
			case 'c':
				cap = atof(optarg);
				break;
			case 'r':
				opt.reps = atoi(optarg) < MAX_REPS ? atoi(optarg) : MAX_REPS - 1;
				break;
			case 'D':
				opt.device = optarg;
				break;
			case 'd':
				opt.d = atoi(optarg);
				break;
			case 'k':
				opt.nk = 0;
				for (char *s = strtok(optarg, ","); s && opt.nk < MAX_K; s = strtok(NULL, ","))
					opt.ks[opt.nk++] = atoi(s);
				break;
			case 'l':
				opt.lloyd_max = (int64_t) atof(optarg);
				break;
			case 'T':
				opt.lloyd_timeout = atoi(optarg);
				break;
			case 'x':
				opt.export_cmd = optarg;
				break;
			case 'W':
				opt.workers = atoi(optarg);
				break;
			default:
				return 2;
		}
	}
	bench_set_budget(budget, cap);
	connect_db();
	/* nothing runs longer than a measurement may */
	set_timeout(cap < 1e6 ? (int) cap : 0);
	if (strcmp(cmd, "info") == 0)
		info();
	else if (strcmp(cmd, "matmul") == 0)
		for (int a = optind; a < argc; a++)
			matmul(atoi(argv[a]));
	else
	{
		snprintf(opt.tmpdir, sizeof(opt.tmpdir), "/tmp/pg_gpu_bench.XXXXXX");
		if (!mkdtemp(opt.tmpdir))
		{
			perror("mkdtemp");
			return 1;
		}
		for (int a = optind; a < argc; a++)
			e2e((int64_t) atof(argv[a]));
		rmdir(opt.tmpdir);
	}
	PQfinish(conn);
	return failures > 0;
}
