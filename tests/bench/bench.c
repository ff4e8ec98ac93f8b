/*
 * bench.c - the clock, TSV rows and time budget of the suite's C programs
 * (see bench.h).
 */
#include "bench.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_KEYS 512

static FILE *tsv;
static double start,
			budget = 1e12,
			cap = 1e12;
static struct
{
	char		key[96];
	int64_t		n;
	double		cost;
}			done[MAX_KEYS];
static int	ndone;

double
bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void
bench_open_tsv(const char *path)
{
	if (!(tsv = fopen(path, "a")))
	{
		perror(path);
		exit(2);
	}
}

void
bench_emit(const char *section, const char *method, int64_t n, int d, int k,
		   double sec, const char *fmt,...)
{
	char		note[1024],
				ds[16] = "",
				ks[16] = "",
				secs[32] = "";
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	/* one line a row: no tabs or newlines inside a field */
	for (char *c = note; *c; c++)
		if (*c == '\t' || *c == '\n' || *c == '\r')
			*c = ' ';
	if (d > 0)
		snprintf(ds, sizeof(ds), "%d", d);
	if (k > 0)
		snprintf(ks, sizeof(ks), "%d", k);
	if (sec >= 0)
		snprintf(secs, sizeof(secs), "%.6g", sec);
	printf("%-10s %-24s N=%-10lld d=%-3s k=%-5s %11s s  %s\n", section, method,
		   (long long) n, ds, ks, secs, note);
	fflush(stdout);
	if (tsv)
	{
		fprintf(tsv, "%s\t%s\t%lld\t%s\t%s\t%s\t%s\n", section, method,
				(long long) n, ds, ks, secs, note);
		fflush(tsv);
	}
}

void
bench_set_budget(double budget_s, double cap_s)
{
	start = bench_now();
	budget = budget_s;
	cap = cap_s;
}

double
bench_left(void)
{
	return budget - (bench_now() - start);
}

double
bench_run_limit(void)
{
	return bench_left() < cap ? bench_left() : cap;
}

bool
bench_skip(const char *key, int64_t n, int runs, char *note, size_t len)
{
	double		pred = 0,
				left = bench_left();

	for (int i = ndone - 1; i >= 0; i--)
		if (strcmp(done[i].key, key) == 0 && done[i].n < n)
		{
			pred = done[i].cost * n / done[i].n;
			break;
		}
	if (left <= 0)
		snprintf(note, len, "skipped: budget spent");
	else if (pred > cap)
		snprintf(note, len, "skipped: >%.0fs (predicted %.0f s)", cap, pred);
	else if (pred * runs > left)
		snprintf(note, len, "skipped: budget (predicted %d x %.0f s, %.0f s left)",
				 runs, pred, left);
	else
		return false;
	return true;
}

void
bench_done(const char *key, int64_t n, double cost)
{
	if (ndone == MAX_KEYS)
		return;
	snprintf(done[ndone].key, sizeof(done[ndone].key), "%s", key);
	done[ndone].n = n;
	done[ndone].cost = cost;
	ndone++;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

double
bench_median(double *t, int n)
{
	qsort(t, n, sizeof(double), cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}
