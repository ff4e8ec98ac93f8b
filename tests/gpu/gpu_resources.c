/*
 * gpu_resources.c - resource checks of pg_gpu in a real PostgreSQL on a GPU
 * host (part of tests/gpu/gpu-check.sh; CI has no GPU).  A libpq client, run
 * on the server's machine (it reads the backend's /proc entry and starts
 * tests/gpu/gpu_hog):
 *
 *   1. leaks: GPU memory free (gpu_info()) and the backend's resident memory
 *      before and after 200 calls of every function in one backend, with
 *      the GPU forced, are the same (within the allocator's 2 MB pages);
 *   2. errors: 20 calls failing on bad input, a gpu_kmeans cancelled by
 *      statement_timeout in the middle of its iterations (the delay past
 *      the timeout is measured) and a blocked gpu_matmul cancelled the same
 *      way leave the GPU memory where it was; the backend goes on;
 *   3. concurrency: 16 backends calling at once (k-means, k-means fit,
 *      array and table products) all get the answers the CPU path gives
 *      (memberships identical, numbers within 1e-9);
 *   4. out of GPU memory (tests/gpu/gpu_hog holds all but 64 MB): a clean ERROR
 *      with SQLSTATE 53200, or the rows streamed through what is left and
 *      the sizes the call gives once memory is back, in a backend that had
 *      used the GPU and in a new one; both go on, and the same call works
 *      once memory is back.
 *
 * Connects with the usual PG* environment variables, makes its own database
 * pg_gpu_resources (dropped at the end).  Prints one line a check, then
 * "N passed, M failed"; exit status 0 iff M = 0.
 *
 * With --cpu, only step 3 with the CPU path (no GPU needed; tests/run.sh
 * runs it in CI): concurrent calls scanning a table larger than a quarter of
 * shared_buffers, where synchronized scans would change the row order; then
 * pg_cancel_backend at moments from the read to the iterations (worst delay
 * printed) and pg_terminate_backend, which must not restart the server.
 *
 *   usage: gpu_resources [--cpu] [--hog PATH] [--calls N]
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#define DB "pg_gpu_resources"
#define NCONC 16
#define SLACK_MB 2				/* cudaMalloc hands out 2 MB pages */
#define RSS_SLACK_KB (32 * 1024)

static int	n_passed,
			n_failed;

static bool
check(bool ok, const char *fmt,...)
{
	va_list		ap;

	printf("%s - ", ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (ok)
		n_passed++;
	else
		n_failed++;
	return ok;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static PGconn *
connect_to(const char *db)
{
	const char *keys[] = {"dbname", "application_name", NULL};
	const char *vals[] = {db, "pg_gpu gpu_resources", NULL};
	PGconn	   *c = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(c) != CONNECTION_OK)
	{
		fprintf(stderr, "gpu_resources: cannot connect to %s: %s", db, PQerrorMessage(c));
		exit(2);
	}
	return c;
}

/* a command that must work; the test stops if it does not */
static void
must(PGconn *c, const char *sql)
{
	PGresult   *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "gpu_resources: %s\n  failed: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	PQclear(r);
}

/* first value of a query that must work, malloc'ed */
static char *
value(PGconn *c, const char *sql)
{
	PGresult   *r = PQexec(c, sql);
	char	   *v;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1)
	{
		fprintf(stderr, "gpu_resources: %s\n  failed: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	v = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

static long
value_long(PGconn *c, const char *sql)
{
	char	   *v = value(c, sql);
	long		x = atol(v);

	free(v);
	return x;
}

/*
 * runs sql expecting an error; its SQLSTATE (malloc'ed), or NULL if it
 * worked, and then (answer not NULL) its first value in *answer
 * (malloc'ed; else NULL)
 */
static char *
fails_with_value(PGconn *c, const char *sql, char *msg, size_t msglen, char **answer)
{
	PGresult   *r = PQexec(c, sql);
	char	   *state = NULL;

	if (msg)
		msg[0] = 0;
	if (answer)
		*answer = NULL;
	if (PQresultStatus(r) == PGRES_FATAL_ERROR)
	{
		const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		state = strdup(s ? s : "?????");
		if (msg)
			snprintf(msg, msglen, "%s", PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) ?
					 PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : "");
	}
	else if (answer && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
		*answer = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return state;
}

static char *
fails_with(PGconn *c, const char *sql, char *msg, size_t msglen)
{
	return fails_with_value(c, sql, msg, msglen, NULL);
}

static bool
alive(PGconn *c)
{
	PGresult   *r = PQexec(c, "SELECT 1");
	bool		ok = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "1") == 0;

	PQclear(r);
	return ok;
}

static long
gpu_free_mb(PGconn *c)
{
	return value_long(c, "SELECT memory_free_mb FROM gpu_info() ORDER BY device_id LIMIT 1");
}

/* a field of /proc/PID/status in kB, or -1 (server on another machine) */
static long
proc_kb(int pid, const char *field)
{
	char		path[64],
				line[256];
	FILE	   *f;
	long		kb = -1;
	size_t		fl = strlen(field);

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, fl) == 0 && line[fl] == ':')
		{
			kb = atol(line + fl + 1);
			break;
		}
	fclose(f);
	return kb;
}

/* ---- comparing answers: numbers within a relative tolerance ------------- */

/*
 * Two answers as text ("{1.5,2}|{3,4}|md5..."): the same but for numbers,
 * which may differ by tol relative to the larger.
 */
static bool
same_answer(const char *a, const char *b, double tol)
{
	while (*a && *b)
	{
		char	   *ea,
				   *eb;
		double		x,
					y;

		if ((*a == '-' || (*a >= '0' && *a <= '9')) && (*b == '-' || (*b >= '0' && *b <= '9')))
		{
			x = strtod(a, &ea);
			y = strtod(b, &eb);
			if (ea == a || eb == b)
				return false;
			if (!(x == y || fabs(x - y) <= tol * fmax(fabs(x), fabs(y))))
				return false;
			a = ea;
			b = eb;
			continue;
		}
		if (*a != *b)
			return false;
		a++, b++;
	}
	return *a == *b;
}

/* ---- the workload ---------------------------------------------------------- */

static void
make_tables(PGconn *c)
{
	must(c, "SET client_min_messages = warning");
	must(c, "CREATE EXTENSION IF NOT EXISTS pg_gpu");
	/* 5 blobs in 4 columns, 100000 rows */
	must(c, "CREATE TABLE res_pts AS SELECT i AS id, "
		 "(i % 5) * 10 + random() AS x1, (i % 5) * -7 + random() AS x2, "
		 "random() AS x3, (i % 5) * 3 + random() AS x4 FROM generate_series(1, 100000) i");
	/* 2 million uniform rows in 8 columns: k = 1024 iterates for long */
	must(c, "CREATE TABLE res_big AS SELECT i AS id, random() x1, random() x2, random() x3, "
		 "random() x4, random() x5, random() x6, random() x7, random() x8 "
		 "FROM generate_series(1, 2000000) i");
	/* dense 512 x 512 matrices (row_id, row_vec) */
	must(c, "CREATE TABLE res_ma AS SELECT i AS row_id, "
		 "array(SELECT random() FROM generate_series(1, 512) WHERE i > 0) AS row_vec "
		 "FROM generate_series(1, 512) i");
	must(c, "CREATE TABLE res_mb AS SELECT * FROM res_ma");
	/* 1536 x 1536, for a product that blocks long enough to be cancelled */
	must(c, "CREATE TABLE res_mc AS SELECT i AS row_id, "
		 "array(SELECT random() FROM generate_series(1, 1536) WHERE i > 0) AS row_vec "
		 "FROM generate_series(1, 1536) i");
	/* arrays for the array form */
	must(c, "CREATE TABLE res_arr AS SELECT "
		 "(SELECT array_agg(row_vec ORDER BY row_id) FROM res_ma WHERE row_id <= 300) AS a, "
		 "(SELECT array_agg(row_vec[1:200] ORDER BY row_id) FROM res_mb) AS b");
	must(c, "VACUUM ANALYZE");
}

/* the answers compared between the CPU and the GPU, one line each */
static const char *const answers[] = {
	"SELECT md5(string_agg(cluster::text, ',' ORDER BY id)) FROM gpu_kmeans('res_pts', 5, id_column => 'id', seed => 1)",
	"SELECT sizes::text || '|' || centroids::text || '|' || inertia || '|' || iterations "
	"FROM gpu_kmeans_fit('res_pts', 8, seed => 2, tol => 0)",
	"SELECT md5(string_agg(cluster::text, ',' ORDER BY id)) || '|' || sum(distance) FROM gpu_kmeans_assign('res_pts', "
	"ARRAY[[0,0,0,0],[10,-7,0.5,3],[20,-14,0.5,6],[30,-21,0.5,9],[40,-28,0.5,12]]::float8[], id_column => 'id')",
	"SELECT sum(x) || '|' || max(array_length(m, 1)) || 'x' || max(array_length(m, 2)) FROM res_arr, gpu_matmul(a, b) m, unnest(m) x",
	"SELECT count(*) || '|' || sum(v) FROM gpu_matmul('res_ma'::regclass, 'res_mb'::regclass), unnest(row_vec) v",
	"SELECT sizes::text || '|' || inertia FROM gpu_kmeans_fit('res_big', 16, max_iter => 5, seed => 3)",
};
#define NANSWERS ((int) (sizeof(answers) / sizeof(answers[0])))

/* calls of every function, for the leak check: the answers above, in turn */
static void
one_call(PGconn *c, int i, int *errors)
{
	PGresult   *r = PQexec(c, answers[i % (NANSWERS - 1)]);	/* res_big: too slow for 200 */

	if (PQresultStatus(r) != PGRES_TUPLES_OK && (*errors)++ == 0)
		fprintf(stderr, "call %d failed: %s", i, PQerrorMessage(c));
	PQclear(r);
}

/* ---- 1. leaks ----------------------------------------------------------------- */

static void
test_leaks(PGconn *c, int calls, long *base_mb)
{
	int			pid = (int) value_long(c, "SELECT pg_backend_pid()");
	long		free0,
				free1,
				rss0,
				rss1;
	int			errors = 0;
	double		t0;

	/* first use: CUDA context, cuBLAS, the pinned cache fill up here */
	for (int i = 0; i < NANSWERS; i++)
		one_call(c, i, &errors);
	free0 = gpu_free_mb(c);
	rss0 = proc_kb(pid, "VmRSS");
	t0 = now_s();
	for (int i = 0; i < calls; i++)
		one_call(c, i, &errors);
	free1 = gpu_free_mb(c);
	rss1 = proc_kb(pid, "VmRSS");
	check(errors == 0, "%d calls of every function (gpu_kmeans, _fit, _assign, gpu_matmul arrays and tables) in one backend, %.1f s: %d failed",
		  calls, now_s() - t0, errors);
	check(labs(free1 - free0) <= SLACK_MB, "GPU memory free before and after %d calls: %ld MB, %ld MB (difference %ld MB, allowed %d)",
		  calls, free0, free1, free1 - free0, SLACK_MB);
	if (rss0 < 0)
		printf("(backend %d not on this machine: resident memory not checked)\n", pid);
	else
		check(rss1 - rss0 <= RSS_SLACK_KB, "backend resident memory before and after %d calls: %ld kB, %ld kB (growth %ld kB, allowed %d)",
			  calls, rss0, rss1, rss1 - rss0, RSS_SLACK_KB);
	*base_mb = free1;
}

/* ---- 2. errors and cancellation leave nothing behind ------------------------- */

static const char *const bad_calls[] = {
	"SELECT * FROM gpu_kmeans_fit('res_pts', 0)",
	"SELECT * FROM gpu_kmeans_fit('res_pts', 200000)",
	"SELECT * FROM gpu_kmeans_fit('res_pts', 3, columns => ARRAY['nope'])",
	"SELECT * FROM gpu_kmeans_fit('res_pts', 3, max_iter => 0)",
	"SELECT * FROM gpu_kmeans_fit('res_pts', 3, tol => -1)",
	"SELECT * FROM gpu_kmeans_fit('res_pts', 3, init => 'bogus')",
	"SELECT * FROM gpu_kmeans_fit('res_pts', 2, init_centroids => ARRAY[[1,2,3,4]]::float8[])",
	"SELECT * FROM gpu_kmeans_fit('res_pts', 1, init_centroids => ARRAY[[1,2,3,'NaN']]::float8[])",
	"SELECT * FROM gpu_kmeans_fit('res_pts', 1, init_centroids => ARRAY[[1,2,3,NULL]]::float8[])",
	"SELECT count(*) FROM gpu_kmeans('res_pts', 3, id_column => 'x1')",
	"SELECT count(*) FROM gpu_kmeans('res_pts', 3, id_column => 'nope')",
	"SELECT count(*) FROM gpu_kmeans_assign('res_pts', ARRAY[[1,2]]::float8[])",
	"SELECT * FROM gpu_kmeans_fit('res_ma', 2, columns => ARRAY['row_id', 'row_vec'])",
	"SELECT gpu_matmul(ARRAY[[1,2]]::float8[], ARRAY[[1,2]]::float8[])",
	"SELECT gpu_matmul(ARRAY[1,2]::float8[], ARRAY[[1],[2]]::float8[])",
	"SELECT gpu_matmul(ARRAY[[1,NULL]]::float8[], ARRAY[[1],[2]]::float8[])",
	"SELECT count(*) FROM gpu_matmul('res_ma'::regclass, 'res_mc'::regclass)",
	"SELECT count(*) FROM gpu_matmul('res_pts'::regclass, 'res_mb'::regclass)",
	"SELECT count(*) FROM gpu_matmul('res_ma'::regclass, 'res_mb'::regclass, ARRAY['row_id'])",
	"SELECT * FROM gpu_kmeans_fit('no_such_table', 2)",
};

static void
check_gpu_back(PGconn *c, long base_mb, const char *after)
{
	long		mb = gpu_free_mb(c);

	/* a backend that just ended may still be tearing down its CUDA context */
	for (int i = 0; i < 30 && labs(mb - base_mb) > SLACK_MB; i++)
	{
		usleep(100000);
		mb = gpu_free_mb(c);
	}
	check(labs(mb - base_mb) <= SLACK_MB, "GPU memory free after %s: %ld MB (before: %ld MB)", after, mb, base_mb);
}

static void
test_errors(PGconn *c, long base_mb)
{
	int			nbad = (int) (sizeof(bad_calls) / sizeof(bad_calls[0]));
	int			clean = 0;
	char		msg[512];
	char		first[700] = "";

	for (int i = 0; i < nbad; i++)
	{
		char	   *st = fails_with(c, bad_calls[i], msg, sizeof(msg));

		/* a clean error: not internal (XX), not a crash (alive afterwards) */
		if (st && strncmp(st, "XX", 2) != 0 && alive(c))
			clean++;
		else if (!first[0])
			snprintf(first, sizeof(first), "%s -> %s %s", bad_calls[i], st ? st : "no error", msg);
		free(st);
	}
	check(clean == nbad, "%d calls with bad input: %d clean errors%s%s", nbad, clean,
		  first[0] ? "; first other: " : "", first);
	check_gpu_back(c, base_mb, "the bad calls");
}

static double
timed_call(PGconn *c, const char *sql, char **state, char *msg, size_t msglen)
{
	double		t0 = now_s();

	*state = fails_with(c, sql, msg, msglen);
	return now_s() - t0;
}

/* the result of a call that must work, and how long it took */
static double
timed_value(PGconn *c, const char *sql, long *out)
{
	double		t0 = now_s();

	*out = value_long(c, sql);
	return now_s() - t0;
}

static void
test_cancel(PGconn *c, long base_mb)
{
	const char *fit = "SELECT iterations FROM gpu_kmeans_fit('res_big', 1024, max_iter => %d, tol => 0, seed => 5)";
	char		sql[400],
				msg[512];
	char	   *st;
	double		t1,
				tn,
				per_iter,
				timeout_s,
				took;
	long		it1,
				itn;

	/*
	 * Read + seeding + 1 iteration, then up to 300: the timeout goes half way
	 * through the iterations of the second.
	 */
	snprintf(sql, sizeof(sql), fit, 1);
	t1 = fmin(timed_value(c, sql, &it1), timed_value(c, sql, &it1));
	snprintf(sql, sizeof(sql), fit, 300);
	tn = timed_value(c, sql, &itn);
	per_iter = (tn - t1) / (itn > 1 ? itn - 1 : 1);
	if (!check(itn >= 20 && tn > t1,
			   "k-means of 2e6 x 8 rows, k = 1024: %.3f s to the first iteration, then %ld iterations of %.2f ms",
			   t1, itn, per_iter * 1e3))
		return;
	timeout_s = t1 + (tn - t1) / 2;
	snprintf(sql, sizeof(sql), "SET statement_timeout = %d", (int) (timeout_s * 1e3 + 0.5));
	must(c, sql);
	snprintf(sql, sizeof(sql), fit, 300);
	took = timed_call(c, sql, &st, msg, sizeof(msg));
	must(c, "RESET statement_timeout");
	check(st && strcmp(st, "57014") == 0 && alive(c),
		  "statement_timeout %.0f ms (half way through the iterations) cancels gpu_kmeans_fit: %s %s, after %.0f ms: %.1f ms past the timeout (%.2f iterations)",
		  timeout_s * 1e3, st ? st : "no error", msg, took * 1e3, (took - timeout_s) * 1e3,
		  (took - timeout_s) / per_iter);
	free(st);
	check_gpu_back(c, base_mb, "the cancelled k-means");

	/* a product cut into many blocks by a 1 MB cap, cancelled while it runs */
	must(c, "SET pg_gpu.matmul_gpu_memory = 1");
	/* timed warm: the first call also pins the buffers the cache keeps */
	for (int i = 0; i < 2; i++)
	{
		t1 = timed_call(c, "SELECT count(*) FROM gpu_matmul('res_mc'::regclass, 'res_mc'::regclass)", &st, msg, sizeof(msg));
		free(st);
	}
	snprintf(sql, sizeof(sql), "SET statement_timeout = %d", (int) (t1 * 0.6e3 + 0.5));
	must(c, sql);
	took = timed_call(c, "SELECT count(*) FROM gpu_matmul('res_mc'::regclass, 'res_mc'::regclass)", &st, msg, sizeof(msg));
	must(c, "RESET statement_timeout");
	must(c, "RESET pg_gpu.matmul_gpu_memory");
	check(st && strcmp(st, "57014") == 0 && alive(c),
		  "statement_timeout at 60%% of a %.0f ms blocked gpu_matmul cancels it: %s %s, after %.0f ms",
		  t1 * 1e3, st ? st : "no error", msg, took * 1e3);
	free(st);
	check_gpu_back(c, base_mb, "the cancelled product");
}

/* ---- cancel and terminate from another session --------------------------- */

/*
 * pg_cancel_backend at several moments of a long gpu_kmeans_fit (during the
 * read and during the iterations): each ends with 57014; the worst delay
 * from the cancel to the error is printed and must stay under a second.
 * pg_terminate_backend ends the session without taking the server down
 * (any crash restart would end the watching session too).
 */
static void
test_interrupts(const char *db, const char *device)
{
	static const double at[] = {0.05, 0.3, 1.0, 2.0, 3.0};
	PGconn	   *watch = connect_to(db);
	char		sql[300],
				set[64];
	double		worst = 0;
	int			clean = 0;
	char	   *started = value(watch, "SELECT pg_postmaster_start_time()::text");
	char	   *after;
	const char *call = strcmp(device, "gpu") == 0
		? "SELECT iterations FROM gpu_kmeans_fit('res_big', 1024, max_iter => 1000000, tol => 0, seed => 9)"
		: "SELECT iterations FROM gpu_kmeans_fit('res_big', 16, max_iter => 1000000, tol => 0, seed => 9)";
	int			n = (int) (sizeof(at) / sizeof(at[0]));

	snprintf(set, sizeof(set), "SET pg_gpu.device = %s", device);
	for (int i = 0; i < n; i++)
	{
		PGconn	   *victim = connect_to(db);
		long		pid = value_long(victim, "SELECT pg_backend_pid()");
		PGresult   *r;
		double		t_cancel,
					delay;
		bool		got57014 = false;

		must(victim, set);
		PQsendQuery(victim, call);
		usleep((useconds_t) (at[i] * 1e6));
		snprintf(sql, sizeof(sql), "SELECT pg_cancel_backend(%ld)", pid);
		t_cancel = now_s();
		free(value(watch, sql));
		while ((r = PQgetResult(victim)) != NULL)
		{
			const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);

			got57014 |= st && strcmp(st, "57014") == 0;
			PQclear(r);
		}
		delay = now_s() - t_cancel;
		if (got57014 && alive(victim))
			clean++;
		if (delay > worst)
			worst = delay;
		PQfinish(victim);
	}
	check(clean == n && worst < 1.0,
		  "pg_cancel_backend %d times, %.2f to %.2f s into gpu_kmeans_fit (device %s): %d clean 57014 errors, worst delay %.0f ms",
		  n, at[0], at[n - 1], device, clean, worst * 1e3);

	{
		PGconn	   *victim = connect_to(db);
		long		pid = value_long(victim, "SELECT pg_backend_pid()");
		PGconn	   *fresh;

		must(victim, set);
		PQsendQuery(victim, call);
		usleep(1500000);
		snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%ld, 5000)", pid);
		free(value(watch, sql));
		PQfinish(victim);
		fresh = connect_to(db);
		after = value(watch, "SELECT pg_postmaster_start_time()::text");
		check(alive(watch) && alive(fresh) && strcmp(started, after) == 0,
			  "pg_terminate_backend during gpu_kmeans_fit: the server goes on (started %s, still %s), other sessions alive",
			  started, after);
		free(after);
		PQfinish(fresh);
	}
	free(started);
	PQfinish(watch);
}

/* ---- 3. 16 backends at once -------------------------------------------------- */

static void
test_concurrent(const char *db, const char *device)
{
	PGconn	   *cpu = connect_to(db);
	PGconn	   *conn[NCONC];
	char	   *expect[NANSWERS];
	int			right = 0,
				failed = 0;
	char		first[900] = "";
	double		t0;

	must(cpu, "SET pg_gpu.device = cpu");
	/*
	 * On a host with several GPUs, a call's rows are dealt to one share a
	 * GPU: the CPU splits them the same way with pg_gpu.parts (a seeded fit
	 * over shares seeds from their union's sample, not as one set)
	 */
	if (strcmp(device, "cpu") != 0)
	{
		long		ngpus = value_long(cpu, "SELECT count(*) FROM gpu_info()");
		char		set[64];

		if (ngpus > 1)
		{
			snprintf(set, sizeof(set), "SET pg_gpu.parts = %ld", ngpus);
			must(cpu, set);
		}
	}
	for (int q = 0; q < NANSWERS; q++)
		expect[q] = value(cpu, answers[q]);
	PQfinish(cpu);

	for (int i = 0; i < NCONC; i++)
	{
		char		set[64];

		conn[i] = connect_to(db);
		snprintf(set, sizeof(set), "SET pg_gpu.device = %s", device);
		must(conn[i], set);
	}
	t0 = now_s();
	for (int i = 0; i < NCONC; i++)
		if (!PQsendQuery(conn[i], answers[i % NANSWERS]))
			fprintf(stderr, "send %d: %s", i, PQerrorMessage(conn[i]));
	for (int i = 0; i < NCONC; i++)
	{
		PGresult   *r;
		bool		got = false;

		while ((r = PQgetResult(conn[i])) != NULL)
		{
			if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
			{
				got = true;
				if (same_answer(expect[i % NANSWERS], PQgetvalue(r, 0, 0), 1e-9))
					right++;
				else if (!first[0])
					snprintf(first, sizeof(first), "backend %d: %.300s, the CPU: %.300s", i,
							 PQgetvalue(r, 0, 0), expect[i % NANSWERS]);
			}
			else if (PQresultStatus(r) == PGRES_FATAL_ERROR && !first[0])
				snprintf(first, sizeof(first), "backend %d: %s", i, PQresultErrorMessage(r));
			PQclear(r);
		}
		failed += !got;
	}
	check(right == NCONC, "%d backends at once, %d different calls, pg_gpu.device = %s, %.2f s: %d answers as from one backend on the CPU, %d errors%s%s",
		  NCONC, NANSWERS, device, now_s() - t0, right, failed, first[0] ? "; " : "", first);
	right = 0;
	for (int i = 0; i < NCONC; i++)
	{
		right += alive(conn[i]);
		PQfinish(conn[i]);
	}
	check(right == NCONC, "all %d backends answer afterwards: %d", NCONC, right);
	for (int q = 0; q < NANSWERS; q++)
		free(expect[q]);
}

/* ---- 4. out of GPU memory ----------------------------------------------------- */

static void
test_oom(PGconn *c, const char *db, const char *hog)
{
	pid_t		pid;
	char		msg[512],
				msg2[512],
				msg3[512];
	char	   *st,
			   *st2,
			   *st3,
			   *got[2] = {NULL, NULL},
			   *ref = NULL;
	long		mb = 0;
	PGconn	   *fresh;
	const char *call = "SELECT sizes FROM gpu_kmeans_fit('res_big', 8, max_iter => 3)";

	if (access(hog, X_OK) != 0)
	{
		check(false, "out of GPU memory: no %s (make tests/gpu/gpu_hog)", hog);
		return;
	}
	if ((pid = fork()) == 0)
	{
		execl(hog, hog, "64", (char *) NULL);
		_exit(127);
	}
	for (int i = 0; i < 100; i++)	/* up to 20 s for it to take the memory */
	{
		usleep(200000);
		if ((mb = gpu_free_mb(c)) < 400 || waitpid(pid, NULL, WNOHANG) == pid)
			break;
	}
	if (!check(mb < 400, "gpu_hog holds the GPU's memory: %ld MB left free", mb))
	{
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		return;
	}
	/*
	 * 2e6 x 8 doubles = 128 MB do not fit in what is left, on GPU 0 alone
	 * (which gpu_hog fills: shares over several GPUs could fit beside it).
	 * A backend whose first part fits streams the rest through it (parts
	 * parked in turn, read.c's flush_batch): then the answer must be the
	 * one the same call gives once the memory is back; else a clean 53200.
	 */
	must(c, "SET pg_gpu.gpus = '0'");
	st = fails_with_value(c, call, msg, sizeof(msg), &got[0]);
	fresh = connect_to(db);
	must(fresh, "SET pg_gpu.device = gpu");
	must(fresh, "SET pg_gpu.gpus = '0'");
	st2 = fails_with_value(fresh, call, msg2, sizeof(msg2), &got[1]);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < 50 && gpu_free_mb(c) < 1000; i++)
		usleep(100000);
	st3 = fails_with_value(c, call, msg3, sizeof(msg3), &ref);
	for (int b = 0; b < 2; b++)
	{
		char	   *s = b == 0 ? st : st2;

		check(((s && strcmp(s, "53200") == 0) || (!s && ref && strcmp(got[b], ref) == 0)) &&
			  alive(b == 0 ? c : fresh), "%s: %s %s", b == 0 ? "a backend that had used the GPU" :
			  "a new backend (its CUDA context made with the memory gone)",
			  s ? s : "no error: streamed, the answer", s ? (b == 0 ? msg : msg2) :
			  ref && strcmp(got[b], ref) == 0 ? "as with the memory back" : "NOT as with the memory back");
	}
	check(st3 == NULL, "once the memory is back the same call works%s%s", st3 ? ": " : "", st3 ? msg3 : "");
	free(st);
	free(st2);
	free(st3);
	st = fails_with(fresh, call, msg, sizeof(msg));
	check(st == NULL, "in the new backend too%s%s", st ? ": " : "", st ? msg : "");
	free(st);
	free(got[0]);
	free(got[1]);
	free(ref);
	PQfinish(fresh);
	must(c, "RESET pg_gpu.gpus");
}

/* ---- several GPUs (pg_gpu.gpus, pg_gpu.parts) ----------------------------------- */

/*
 * A GPU pg_gpu.gpus names that the host lacks: 22023 naming it.  The rows
 * dealt to 4 shares on this GPU (the threads of parts.c and together.c at
 * work): the same fit as whole, and a product split in 4 as whole; a
 * statement_timeout mid-fit answered in time (the caller polls while the
 * threads run).  The first round loads kernels for the shares' shapes (the
 * context keeps them: *base_mb is taken again after it); the second must
 * give the GPU's memory back.
 */
static void
test_shares(PGconn *c, long *base_mb)
{
	char		sql[400],
				msg[512];
	char	   *st;
	long		ngpus = value_long(c, "SELECT count(*) FROM gpu_info()");
	const char *calls[2] = {
		"SELECT sizes::text || '|' || centroids::text || '|' || iterations FROM gpu_kmeans_fit('res_pts', 5, "
		"columns => ARRAY['x1','x2','x3','x4'], init_centroids => "
		"ARRAY[[0,0,0.5,0],[10,-7,0.5,3],[20,-14,0.5,6],[30,-21,0.5,9],[40,-28,0.5,12]]::float8[], tol => 0)",
		"SELECT count(*) || '|' || sum(v) FROM gpu_matmul('res_mc'::regclass, 'res_mc'::regclass), unnest(row_vec) v"
	};
	const char *what[2] = {"a fit", "a product"};
	double		t0;

	snprintf(sql, sizeof(sql), "SET pg_gpu.gpus = '%ld'", ngpus);
	must(c, sql);
	st = fails_with(c, "SELECT * FROM gpu_kmeans_fit('res_pts', 3)", msg, sizeof(msg));
	snprintf(sql, sizeof(sql), "pg_gpu.gpus names GPU %ld, which this host does not have", ngpus);
	check(st && strcmp(st, "22023") == 0 && strstr(msg, sql) != NULL,
		  "pg_gpu.gpus = '%ld' (no such GPU): %s %s", ngpus, st ? st : "no error", msg);
	free(st);
	must(c, "RESET pg_gpu.gpus");

	for (int round = 0; round < 2; round++)
	{
		if (round == 1)
			*base_mb = gpu_free_mb(c);
		for (int i = 0; i < 2; i++)
		{
			char	   *whole,
					   *shared;

			must(c, "RESET pg_gpu.parts");
			whole = value(c, calls[i]);
			must(c, "SET pg_gpu.parts = 4");
			shared = value(c, calls[i]);
			if (round == 0)
				check(same_answer(whole, shared, 1e-12), "%s over 4 shares on one GPU: %s, whole: %s",
					  what[i], shared, whole);
			free(shared);
			free(whole);
		}
		must(c, "SET statement_timeout = '1s'");
		t0 = now_s();
		st = fails_with(c, "SELECT iterations FROM gpu_kmeans_fit('res_big', 1024, max_iter => 100000, tol => 0, seed => 5)",
						msg, sizeof(msg));
		if (round == 0)
			check(st && strcmp(st, "57014") == 0 && now_s() - t0 < 2.5,
				  "statement_timeout 1 s on a fit over 4 shares: %s after %.2f s", st ? st : "no error", now_s() - t0);
		free(st);
		must(c, "RESET statement_timeout");
		must(c, "RESET pg_gpu.parts");
	}
	check(alive(c), "the backend alive after the shares' timeouts");
	check_gpu_back(c, *base_mb, "a second round of the shares' calls");
}

int
main(int argc, char **argv)
{
	char		hog[1024];
	int			calls = 200;
	bool		cpu_only = false;
	PGconn	   *admin,
			   *c;
	long		base_mb;
	char	   *dir = strdup(argv[0]);
	char	   *slash = strrchr(dir, '/');

	snprintf(hog, sizeof(hog), "%s/gpu_hog", slash ? (*slash = 0, dir) : ".");
	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--hog") == 0 && i + 1 < argc)
			snprintf(hog, sizeof(hog), "%s", argv[++i]);
		else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
			calls = atoi(argv[++i]);
		else if (strcmp(argv[i], "--cpu") == 0)
			cpu_only = true;
		else
		{
			fprintf(stderr, "usage: %s [--cpu] [--hog PATH] [--calls N]\n", argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	admin = connect_to(getenv("PGDATABASE") ? getenv("PGDATABASE") : "postgres");
	must(admin, "SET client_min_messages = warning");
	must(admin, "DROP DATABASE IF EXISTS " DB);
	must(admin, "CREATE DATABASE " DB);
	c = connect_to(DB);
	make_tables(c);
	if (cpu_only)
	{
		test_concurrent(DB, "cpu");
		test_interrupts(DB, "cpu");
	}
	else if (value_long(c, "SELECT count(*) FROM gpu_info()") < 1)
	{
		check(false, "no GPU visible to the server");
		return 1;
	}
	else
	{
		must(c, "SET pg_gpu.device = gpu");
		/* pinned buffers are cached for reuse by default; none here, so a leak shows */
		must(c, "SET pg_gpu.pinned_memory_cache = 0");
		test_leaks(c, calls, &base_mb);
		test_errors(c, base_mb);
		test_cancel(c, base_mb);
		test_shares(c, &base_mb);
		test_interrupts(DB, "gpu");
		check_gpu_back(c, base_mb, "the cancelled and terminated backends");
		test_concurrent(DB, "gpu");
		test_oom(c, DB, hog);
	}
	check(alive(c), "the first backend is still connected (no backend crashed: a crash ends every session)");

	PQfinish(c);
	must(admin, "DROP DATABASE IF EXISTS " DB);
	PQfinish(admin);
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
