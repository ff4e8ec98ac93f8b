/*
 * bench.h - what the suite's C programs share: the clock, one TSV row a
 * measurement, and the time budget.
 *
 * TSV row: section, method, N, d, k, seconds, note (d, k and seconds empty
 * where they do not apply; a row without seconds says why in its note:
 * "skipped: ...", "failed: ...", "n/a ...").
 *
 * Budget: a program gets BUDGET seconds in all and CAP seconds a run.  A
 * run's time is predicted from the last one of the same key (method and
 * shape but N) at a smaller N, scaled by N; when the prediction (times the
 * runs wanted) exceeds the cap or what is left of the budget, the
 * measurement is skipped and its row says so.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

double		bench_now(void);

/* appends rows to path from now on (exits when it cannot be opened) */
void		bench_open_tsv(const char *path);

/* one row, to the TSV and to stdout; d, k = 0 and sec < 0: empty fields */
void		bench_emit(const char *section, const char *method, int64_t n, int d,
					   int k, double sec, const char *fmt,...)
			__attribute__((format(printf, 7, 8)));

void		bench_set_budget(double budget_s, double cap_s);
double		bench_left(void);

/* the seconds one run may take now: the cap, or what is left if less */
double		bench_run_limit(void);

/*
 * true (note set to "skipped: ...") when key at n is predicted too slow:
 * one run over the cap, or runs of them over what is left
 */
bool		bench_skip(const char *key, int64_t n, int runs, char *note,
					   size_t len);

/* records that one run of key at n took cost seconds */
void		bench_done(const char *key, int64_t n, double cost);

/* the median of t[0..n-1] (sorts t) */
double		bench_median(double *t, int n);

#endif							/* BENCH_H */
