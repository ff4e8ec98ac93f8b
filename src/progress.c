/*
 * progress.c - how far a long call is, for other sessions, by standard
 * means: while a k-means call runs, pg_stat_activity.query shows its
 * statement behind a comment saying the stage,
 *
 *   / * pg_gpu gpu_kmeans: iteration 12 of at most 300, 1000000 rows * / SELECT ...
 *
 * (reading: rows so far; seeding; iterating: start and iteration), updated
 * at most every PROGRESS_MS; the statement alone comes back when the call
 * ends, or fails (a callback of the call's memory context).  Nothing is
 * shared beyond what pgstat_report_activity already shares, so it needs no
 * shared_preload_libraries; with track_activities off nothing shows.
 */
#include "postgres.h"

#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/timestamp.h"

#include "pg_gpu.h"

#define PROGRESS_MS 100

typedef struct Progress
{
	const char *fname;
	char	   *query;			/* the statement (after an error debug_query_string is gone) */
	uint64		query_id;		/* pgstat_report_activity resets it: put back */
	TimestampTz last;
	bool		active;
	MemoryContextCallback cb;
} Progress;

static Progress *current;

static void
report(const char *text)
{
	uint64		id = current ? current->query_id : 0;

	pgstat_report_activity(STATE_RUNNING, text);
	if (id != 0)
		pgstat_report_query_id(id, true);
}

/* the statement's own text again */
static void
restore(void *arg)
{
	Progress   *p = (Progress *) arg;

	if (!p->active)
		return;
	p->active = false;
	report(p->query);
	if (current == p)
		current = NULL;
}

void
pg_gpu_progress_begin(const char *fname)
{
	Progress   *p;

	if (debug_query_string == NULL)
		return;
	p = palloc0(sizeof(Progress));
	p->fname = fname;
	p->query = pstrdup(debug_query_string);
	p->query_id = pgstat_get_my_query_id();
	p->active = true;
	p->cb.func = restore;
	p->cb.arg = p;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &p->cb);
	current = p;
	pg_gpu_progress(true, "reading");
}

void
pg_gpu_progress(bool force, const char *fmt,...)
{
	char		stage[256];
	va_list		ap;
	TimestampTz now;

	if (current == NULL || !current->active || !pgstat_track_activities)
		return;
	now = GetCurrentTimestamp();
	if (!force && !TimestampDifferenceExceeds(current->last, now, PROGRESS_MS))
		return;
	current->last = now;
	va_start(ap, fmt);
	vsnprintf(stage, sizeof(stage), fmt, ap);
	va_end(ap);
	report(psprintf("/* pg_gpu %s: %s */ %s", current->fname, stage, current->query));
}

void
pg_gpu_progress_end(void)
{
	if (current)
		restore(current);
}
