/*
 * scan.c - reading a table with PostgreSQL's parallel workers, in block
 * order.
 *
 * The table is cut into chunks of consecutive blocks.  Parallel workers (in
 * the caller's transaction, snapshot and lock group, as those of a parallel
 * query) take chunks in turn and convert their rows into parts
 * (pg_gpu_row_to_part) in the slots of a ring in dynamic shared memory; the
 * leader hands the parts to its consumer chunk by chunk.  So the rows arrive
 * in exactly the order of a serial sequential scan, whatever the number of
 * workers or their timing, and results (k-means++ seeding depends on the
 * order) are those of a serial read.  The leader scans a chunk itself when no
 * worker has taken it yet: when none could be started, or while they start.
 *
 * Only a table that a plain scan reads as a SELECT would is read this way: a
 * heap table or populated materialized view without row-level security or
 * inheritance children, not another session's temporary table nor a table
 * Citus manages (its heap here is a shell, or one placement of several), or
 * a partitioned table without row-level security whose leaves are such heap
 * tables (read leaf by leaf, in partition-bound order), with the privileges checked
 * as the executor checks them.  The rest goes through SPI (read.c), which
 * honours everything else.
 *
 * A worker loads pg_gpu, as every library its leader has loaded; pg_gpu
 * loads OpenBLAS and cuBLAS only when a product needs them, so that costs a
 * worker little.
 */
#include "postgres.h"

#include <unistd.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/parallel.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/stratnum.h"
#include "access/xact.h"
#include "catalog/pg_namespace.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/cost.h"
#include "optimizer/paths.h"
#include "partitioning/partdesc.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "storage/bufmgr.h"
#include "storage/condition_variable.h"
#include "storage/dsm.h"
#include "storage/predicate.h"
#include "storage/spin.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pg_gpu.h"

PGDLLEXPORT void pg_gpu_scan_worker(dsm_segment *seg, shm_toc *toc);

#define SCAN_KEY			UINT64CONST(0x7067677075000001)
#define CHUNK_BLOCKS		128		/* 1 MB of an 8 kB-block table */
#define SLOTS_PER_WORKER	4
#define MAX_SLOTS			64
#define SLOT_BYTES			(4 * 1024 * 1024)	/* a part from a worker */
#define RING_BYTES			(128 * 1024 * 1024) /* the slots' most */
#define LONG_RING_BYTES		(16 * 1024 * 1024)	/* theirs for rows longer than a slot, but for 2 */
#define LIVENESS_MS			1000	/* how often a waiting leader checks its workers */

/* the scan's own flags: page at a time, a ring of buffers for a big table */
#define SCAN_FLAGS (SO_TYPE_TIDRANGESCAN | SO_ALLOW_PAGEMODE | SO_ALLOW_STRAT)

typedef struct ScanSlot
{
	slock_t		mutex;
	ConditionVariable cv;		/* broadcast when full or free changes */
	int64		chunk;			/* the chunk whose part comes here next */
	bool		full;			/* a part is waiting for the leader */
	bool		last;			/* and it is its chunk's last */
	int64		len;
	int64		nrows;
	int64		nbad;
	Size		keyused;		/* the part's ids' bytes (PgGpuPart.keyused) */
} ScanSlot;

/* a worker's state, and where its time went (the leader's DEBUG2 line) */
typedef struct ScanWorker
{
	int64		claimed;		/* its chunk, -1: none */
	double		busy_ms;		/* scanning and converting */
	double		convert_ms;		/* of which converting rows (pg_gpu_row_to_part) */
	double		detoast_ms;		/* and of that, detoasting values (pg_gpu_detoast_time) */
	double		wait_ms;		/* waiting for a free slot */
} ScanWorker;

typedef struct ScanShared
{
	Oid			relid;
	BlockNumber nblocks;
	int64		nchunks;
	int			nslots;
	int			nworkers;
	BlockNumber per_chunk;		/* blocks a chunk */
	Size		slot_bytes;		/* a part's room */
	Size		prio_bytes;		/* a sample's read: room for its rows' priorities, else 0 */
	Size		slot_stride;	/* a ScanSlot, slot_bytes, prio_bytes (whole pages: pinned) */
	Size		ring_off;		/* the first slot's offset (a page's start: pinned) */
	pg_atomic_uint64 next_chunk;	/* the next chunk nobody has taken */
	bool		timed;			/* the leader logs DEBUG2: the workers time their rows */
	PgGpuRowSpec spec;
	ScanWorker	workers[FLEXIBLE_ARRAY_MEMBER];
	/* then the slots */
} ScanShared;

static Size
shared_header(int nworkers)
{
	return CACHELINEALIGN(offsetof(ScanShared, workers) + sizeof(ScanWorker) * nworkers);
}

static ScanSlot *
scan_slot(ScanShared *sh, int64 chunk)
{
	return (ScanSlot *) ((char *) sh + sh->ring_off + sh->slot_stride * (chunk % sh->nslots));
}

static char *
slot_buf(ScanSlot *slot)
{
	return (char *) slot + CACHELINEALIGN(sizeof(ScanSlot));
}

/* a sample's read: the slot's rows' priorities */
static uint64 *
slot_prio(ScanShared *sh, ScanSlot *slot)
{
	return (uint64 *) (slot_buf(slot) + CACHELINEALIGN(sh->slot_bytes));
}

/* ---- scanning one chunk ----------------------------------------------------- */

typedef struct Scanner
{
	ScanShared *sh;				/* NULL: no workers, no shared memory */
	const PgGpuRowSpec *spec;
	TableScanDesc scan;
	TupleTableSlot *tslot;
	MemoryContext rowcxt;		/* reset with each part */
	double	   *turned;			/* a sample's read: a worker's part turned row-major */
	/* the leader's own parts go straight to its consumer */
	bool		leader;
	bool		pinned;			/* the ring is pinned for the GPUs (PgGpuRowSpec.pinned) */
	double		pin_ms;			/* pinning it took */
	char	   *own;
	Size		own_bytes;
	/*
	 * A chunk the leader scanned ahead while the one it waited for was not
	 * ready (-1: none): its parts, each in a buffer of its own, kept for
	 * their turn (deferring: while it scans them)
	 */
	int64		ahead;
	List	   *ahead_parts;
	bool		deferring;
	int64		aheads;			/* how many it scanned so (DEBUG2) */
	PgGpuPartConsumer consume;
	void	   *arg;
	int64		len;			/* DENSE: the row length met first, -1: none yet */
	/* where the time went: a worker's waits for a slot; the leader's */
	instr_time	waited;
	instr_time	converted;		/* in pg_gpu_row_to_part */
	instr_time	consumed;		/* in its consumer */
	instr_time	scanned;		/* in chunks it scanned itself, but its consumer */
} Scanner;

/* waits for chunk's slot to be free and starts a part there */
static void
part_begin(Scanner *s, int64 chunk, PgGpuPart *part)
{
	ScanSlot   *slot;
	int64		len = s->spec->kind != PG_GPU_ROWS_DENSE ? PG_GPU_SPEC_LEN(s->spec) : s->len;
	instr_time	t0,
				t1;

	MemoryContextReset(s->rowcxt);
	if (s->leader)
	{
		if (s->deferring)
			pg_gpu_part_init(part, MemoryContextAllocHuge(CurrentMemoryContext, PG_GPU_PART_BYTES),
							 PG_GPU_PART_BYTES, len, true, s->spec->dtype, s->spec->keylen, s->spec->rowwise,
							 s->spec->weighted);
		else
			pg_gpu_part_init(part, s->own, s->own_bytes, len, true, s->spec->dtype, s->spec->keylen,
							 s->spec->rowwise, s->spec->weighted);
		return;
	}
	slot = scan_slot(s->sh, chunk);
	INSTR_TIME_SET_CURRENT(t0);
	ConditionVariablePrepareToSleep(&slot->cv);
	for (;;)
	{
		bool		free;

		SpinLockAcquire(&slot->mutex);
		free = slot->chunk == chunk && !slot->full;
		SpinLockRelease(&slot->mutex);
		if (free)
			break;
		ConditionVariableSleep(&slot->cv, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_ACCUM_DIFF(s->waited, t1, t0);
	pg_gpu_part_init(part, slot_buf(slot), s->sh->slot_bytes, len, false, s->spec->dtype,
					 s->spec->keylen, s->spec->rowwise, s->spec->weighted);
}

/*
 * A sample's part (a worker's): the rows' priorities, and the rows turned
 * row-major, so that the leader, which takes the rows one by one, copies a
 * row that enters the sample whole (gathered from column-major rows it
 * touches a page a value)
 */
static void
sample_part(Scanner *s, ScanSlot *slot, PgGpuPart *part)
{
	int64		n = part->nrows;
	int64		len = part->len;
	int64		cap = part->cap;

	pggpu_sample_priorities(slot_prio(s->sh, slot), part->values, cap, n, (int) len,
							s->spec->sample_seed);
	pggpu_sample_weigh_priorities(slot_prio(s->sh, slot), part->weights, n);
	if (s->turned == NULL)
		s->turned = MemoryContextAllocHuge(TopTransactionContext, s->sh->slot_bytes);
	for (int64 i0 = 0; i0 < n; i0 += 16)
	{
		int64		i1 = Min(i0 + 16, n);

		for (int64 j = 0; j < len; j++)
			for (int64 i = i0; i < i1; i++)
				s->turned[i * len + j] = part->values[j * cap + i];
	}
	memcpy(part->values, s->turned, sizeof(double) * n * len);
}

/* the leader hands a part to its consumer */
static void
consume_part(Scanner *s, const PgGpuPart *part)
{
	instr_time	t0,
				t1;

	INSTR_TIME_SET_CURRENT(t0);
	s->consume(s->arg, part);
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_ACCUM_DIFF(s->consumed, t1, t0);
}

/* hands the part over: to the consumer (leader) or to the slot (worker) */
static void
part_end(Scanner *s, int64 chunk, PgGpuPart *part, bool last)
{
	ScanSlot   *slot;

	pg_gpu_part_flush(part);
	if (part->len >= 0)
		s->len = part->len;
	if (s->leader && s->deferring)
	{
		PgGpuPart  *kept = palloc(sizeof(PgGpuPart));

		*kept = *part;
		s->ahead_parts = lappend(s->ahead_parts, kept);
		return;
	}
	if (s->leader)
	{
		s->own = part->buf;		/* maybe enlarged */
		s->own_bytes = part->bytes;
		consume_part(s, part);
		return;
	}
	slot = scan_slot(s->sh, chunk);
	if (s->spec->sampled && part->nrows > 0)
		sample_part(s, slot, part);
	SpinLockAcquire(&slot->mutex);
	slot->len = part->len;
	slot->nrows = part->nrows;
	slot->nbad = part->nbad;
	slot->keyused = part->keyused;
	slot->last = last;
	slot->full = true;
	SpinLockRelease(&slot->mutex);
	ConditionVariableBroadcast(&slot->cv);
}

static void
scan_chunk(Scanner *s, int64 chunk, BlockNumber nblocks, BlockNumber per_chunk)
{
	BlockNumber start = (BlockNumber) (chunk * per_chunk);
	PgGpuPart	part;

	heap_rescan(s->scan, NULL, false, false, false, false);
	heap_setscanlimits(s->scan, start, Min(per_chunk, nblocks - start));
	part_begin(s, chunk, &part);
	while (heap_getnextslot(s->scan, ForwardScanDirection, s->tslot))
	{
		MemoryContext old;
		bool		timed = s->sh && s->sh->timed;	/* (two clock reads a row otherwise saved) */
		instr_time	t0,
					t1;

		CHECK_FOR_INTERRUPTS();
		if (pg_gpu_part_full(&part))
		{
			part_end(s, chunk, &part, false);
			part_begin(s, chunk, &part);
		}
		if (timed)
			INSTR_TIME_SET_CURRENT(t0);
		old = MemoryContextSwitchTo(s->rowcxt);
		if (!pg_gpu_row_to_part(s->spec, s->tslot, &part))
		{
			/* its id's bytes did not fit: into the next part */
			MemoryContextSwitchTo(old);
			part_end(s, chunk, &part, false);
			part_begin(s, chunk, &part);
			old = MemoryContextSwitchTo(s->rowcxt);
			if (!pg_gpu_row_to_part(s->spec, s->tslot, &part))
				elog(ERROR, "pg_gpu: a row does not fit an empty part");
		}
		MemoryContextSwitchTo(old);
		if (timed)
		{
			INSTR_TIME_SET_CURRENT(t1);
			INSTR_TIME_ACCUM_DIFF(s->converted, t1, t0);
		}
	}
	part_end(s, chunk, &part, true);
}

static void
scanner_begin(Scanner *s, Relation rel)
{
	s->scan = heap_beginscan(rel, GetActiveSnapshot(), 0, NULL, NULL, SCAN_FLAGS);
	s->tslot = table_slot_create(rel, NULL);
	s->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "pg_gpu scan rows",
									  ALLOCSET_DEFAULT_SIZES);
	s->len = -1;
}

static void
scanner_end(Scanner *s)
{
	heap_endscan(s->scan);
	ExecDropSingleTupleTableSlot(s->tslot);
	MemoryContextDelete(s->rowcxt);
}

/* ---- the workers ------------------------------------------------------------ */

void
pg_gpu_scan_worker(dsm_segment *seg, shm_toc *toc)
{
	ScanShared *sh = shm_toc_lookup(toc, SCAN_KEY, false);
	BlockNumber per_chunk = sh->per_chunk;
	Relation	rel = table_open(sh->relid, AccessShareLock);
	Scanner		s;
	instr_time	start,
				end;

	INSTR_TIME_SET_CURRENT(start);
	memset(&s, 0, sizeof(s));
	s.sh = sh;
	s.spec = &sh->spec;
	pg_gpu_detoast_timed = sh->timed;
	scanner_begin(&s, rel);
	for (;;)
	{
		int64		chunk = (int64) pg_atomic_fetch_add_u64(&sh->next_chunk, 1);

		if (chunk >= sh->nchunks)
			break;
		sh->workers[ParallelWorkerNumber].claimed = chunk;
		scan_chunk(&s, chunk, sh->nblocks, per_chunk);
	}
	scanner_end(&s);
	table_close(rel, AccessShareLock);
	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_SUBTRACT(end, start);
	sh->workers[ParallelWorkerNumber].wait_ms = INSTR_TIME_GET_MILLISEC(s.waited);
	sh->workers[ParallelWorkerNumber].convert_ms = INSTR_TIME_GET_MILLISEC(s.converted);
	sh->workers[ParallelWorkerNumber].detoast_ms = INSTR_TIME_GET_MILLISEC(pg_gpu_detoast_time);
	sh->workers[ParallelWorkerNumber].busy_ms =
		INSTR_TIME_GET_MILLISEC(end) - INSTR_TIME_GET_MILLISEC(s.waited);
	sh->workers[ParallelWorkerNumber].claimed = -1;
}

/* ---- the leader ------------------------------------------------------------- */

/*
 * The blocks a read of rel goes through: its own and its TOAST table's (a
 * vector of 768 floats is out of line, so the heap of such a table is a
 * small part of what the workers read)
 */
static double
blocks_read(Relation rel, BlockNumber nblocks)
{
	double		blocks = nblocks;

	if (OidIsValid(rel->rd_rel->reltoastrelid))
	{
		Relation	toast = table_open(rel->rd_rel->reltoastrelid, AccessShareLock);

		blocks += RelationGetNumberOfBlocks(toast);
		table_close(toast, AccessShareLock);
	}
	return blocks;
}

/*
 * What a parallel sequential scan of rel would get, counting the TOAST
 * table's blocks with the heap's (as a user expects of
 * max_parallel_workers_per_gather when the rows are mostly out of line): the
 * table's parallel_workers, else one worker from min_parallel_table_scan_size
 * and one more each time the blocks read are three times more; at most
 * max_parallel_workers_per_gather.
 */
static int
planned_workers(Relation rel, BlockNumber nblocks)
{
	int			workers = RelationGetParallelWorkers(rel, -1);

	if (!IsUnderPostmaster || IsInParallelMode() || max_parallel_workers_per_gather <= 0 ||
		RelationUsesLocalBuffers(rel) || nblocks == 0)
		return 0;
	if (workers < 0)
	{
		double		threshold = Max(min_parallel_table_scan_size, 1);
		double		blocks = blocks_read(rel, nblocks);

		if (blocks < min_parallel_table_scan_size)
			return 0;
		workers = 1;
		while (blocks >= threshold * 3)
		{
			workers++;
			threshold *= 3;
		}
	}
	return Min(workers, max_parallel_workers_per_gather);
}

/*
 * Blocks per chunk: CHUNK_BLOCKS, fewer when the table is small for the
 * workers, and so few that a chunk's rows (block_rows a block on average)
 * fit one slot (slot_rows), with a tenth to spare for blocks fuller than
 * the average.  The leader takes the chunks in order and a chunk's parts
 * through its one slot, so a chunk of two parts has its worker wait for the
 * leader to take the first while the others wait with their slots full (at
 * 136 rows of 768 floats a block and 1344 a slot, chunks of 10 blocks were:
 * the workers waited a third of the read for slots).
 */
static BlockNumber
chunk_blocks(BlockNumber nblocks, int nworkers, double block_rows, int64 slot_rows)
{
	BlockNumber per = nblocks / (4 * (BlockNumber) Max(nworkers, 1));

	per = Min(per, CHUNK_BLOCKS);
	if (block_rows * 1.1 * per > slot_rows)
		per = (BlockNumber) (slot_rows / Max(block_rows * 1.1, 1.0));
	return Max(per, 1);
}

/*
 * Is relid a table that Citus manages (distributed, reference or Citus local
 * table)?  Its heap on this node is then a shell, or one placement among
 * others: what a SELECT of it reads comes through Citus's planner.
 */
static bool
citus_table(Oid relid)
{
	return pg_gpu_citus_method(relid) != 0;
}

/*
 * May the table be read by a plain scan, as a SELECT of it would read it?
 * Only a heap table that is all there is of it: not another access method
 * (columnar, for one), not a table Citus spreads over its nodes.
 */
static bool
plain_scan_reads_as_select(Relation rel)
{
	char		kind = rel->rd_rel->relkind;

	if (kind != RELKIND_RELATION && kind != RELKIND_MATVIEW)
		return false;
	return rel->rd_tableam == GetHeapamTableAmRoutine() &&
		!citus_table(RelationGetRelid(rel)) &&
		!rel->rd_rel->relrowsecurity &&
		!rel->rd_rel->relhassubclass &&
		!RELATION_IS_OTHER_TEMP(rel) &&
		RelationIsPopulated(rel);
}

/* ERROR when a worker that stopped still holds a chunk */
static void
check_workers(ParallelContext *pcxt, ScanShared *sh)
{
	for (int i = 0; i < pcxt->nworkers_launched; i++)
	{
		pid_t		pid;

		if (sh->workers[i].claimed >= 0 &&
			GetBackgroundWorkerPid(pcxt->worker[i].bgwhandle, &pid) == BGWH_STOPPED)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("a parallel worker of pg_gpu stopped before reading its share of \"%s\"",
							NameStr(sh->spec.relname))));
	}
}


/* hands chunk's parts to the consumer, scanning the chunk if nobody took it */
static void
consume_chunk(Scanner *s, ParallelContext *pcxt, int64 chunk, BlockNumber per_chunk)
{
	ScanShared *sh = s->sh;
	ScanSlot   *slot = scan_slot(sh, chunk);

	if (chunk == s->ahead)
	{
		/* the leader's own, scanned ahead: its parts in order; its slot was never used */
		ListCell   *lc;

		foreach(lc, s->ahead_parts)
		{
			PgGpuPart  *part = (PgGpuPart *) lfirst(lc);

			consume_part(s, part);
			pfree(part->buf);
		}
		list_free_deep(s->ahead_parts);
		s->ahead_parts = NIL;
		s->ahead = -1;
		SpinLockAcquire(&slot->mutex);
		slot->chunk += sh->nslots;
		SpinLockRelease(&slot->mutex);
		ConditionVariableBroadcast(&slot->cv);
		return;
	}
	ConditionVariablePrepareToSleep(&slot->cv);
	for (;;)
	{
		uint64		next = pg_atomic_read_u64(&sh->next_chunk);
		bool		full,
					last = false;

		SpinLockAcquire(&slot->mutex);
		full = slot->chunk == chunk && slot->full;
		SpinLockRelease(&slot->mutex);
		if (full)
		{
			PgGpuPart	part;

			pg_gpu_part_init(&part, slot_buf(slot), sh->slot_bytes, slot->len, false, sh->spec.dtype,
							 sh->spec.keylen, sh->spec.rowwise, sh->spec.weighted);
			part.nrows = slot->nrows;
			part.nbad = slot->nbad;
			part.keyused = slot->keyused;
			part.pinned = s->pinned;
			if (sh->spec.sampled)
			{
				part.prio = slot_prio(sh, slot);
				part.rowwise = true;
			}
			consume_part(s, &part);
			SpinLockAcquire(&slot->mutex);
			last = slot->last;
			slot->full = false;
			if (last)
				slot->chunk += sh->nslots;
			SpinLockRelease(&slot->mutex);
			ConditionVariableBroadcast(&slot->cv);
			if (last)
				break;
			continue;
		}
		if (next == (uint64) chunk &&
			pg_atomic_compare_exchange_u64(&sh->next_chunk, &next, next + 1))
		{
			instr_time	t0,
						t1,
						c0 = s->consumed;

			/* the slot's previous chunk is consumed: the slot stays free */
			INSTR_TIME_SET_CURRENT(t0);
			scan_chunk(s, chunk, sh->nblocks, per_chunk);
			INSTR_TIME_SET_CURRENT(t1);
			INSTR_TIME_ACCUM_DIFF(s->scanned, t1, t0);
			/* (its consuming counted as such) */
			INSTR_TIME_SUBTRACT(s->scanned, s->consumed);
			INSTR_TIME_ADD(s->scanned, c0);
			SpinLockAcquire(&slot->mutex);
			slot->chunk += sh->nslots;
			SpinLockRelease(&slot->mutex);
			ConditionVariableBroadcast(&slot->cv);
			break;
		}

		/*
		 * Nothing to consume yet: a later chunk nobody has taken is scanned
		 * ahead, its parts kept in the leader's memory for their turn (a
		 * leader that only waited left one process of the plan's idle: with
		 * one worker, half the scanning).  One such chunk at a time, so that
		 * the workers' slots are not left full for long.  (On the CI
		 * machine's 2 cores, with one worker, 0.72-0.80 s against 0.89-1.09
		 * s.  Beside 7 workers on the GPU machine, 10^6 vectors of 768
		 * values in TOAST, the leader scanned 61-88 chunks of 820 ahead and
		 * the workers were busy 1.06-1.19 s each where they were 1.11-1.29
		 * s without; before a chunk fitted a slot, a worker waited for the
		 * leader at every chunk, and scanning ahead beside more than two
		 * workers lost.)
		 */
		if (s->ahead < 0 && next > (uint64) chunk &&
			next < (uint64) sh->nchunks &&
			pg_atomic_compare_exchange_u64(&sh->next_chunk, &next, next + 1))
		{
			instr_time	t0,
						t1;

			INSTR_TIME_SET_CURRENT(t0);
			s->ahead = (int64) next;
			s->aheads++;
			s->deferring = true;
			scan_chunk(s, s->ahead, sh->nblocks, per_chunk);
			s->deferring = false;
			INSTR_TIME_SET_CURRENT(t1);
			INSTR_TIME_ACCUM_DIFF(s->scanned, t1, t0);
			continue;
		}
		if (ConditionVariableTimedSleep(&slot->cv, LIVENESS_MS, PG_WAIT_EXTENSION))
			check_workers(pcxt, sh);
	}
	ConditionVariableCancelSleep();
}

/*
 * DENSE: every good row has the first one's length, so slots that hold one
 * of those hold any good row; the workers check the rest against it.  False
 * when the first row is bad (the serial read reports it).
 */
static bool
peek_dense(Scanner *s, BlockNumber nblocks, PgGpuRowSpec *wspec)
{
	MemoryContext old;

	heap_setscanlimits(s->scan, 0, nblocks);
	if (!heap_getnextslot(s->scan, ForwardScanDirection, s->tslot))
		return false;
	old = MemoryContextSwitchTo(s->rowcxt);
	wspec->first_len = pg_gpu_dense_row_len(wspec, s->tslot, &wspec->first_id);
	MemoryContextSwitchTo(old);
	MemoryContextReset(s->rowcxt);
	return wspec->first_len >= 0;
}

/*
 * Where a parallel read's time went (DEBUG2): the leader's, and the
 * workers' busy (converting rows, detoasting) and waiting for the leader
 * to free their slots, at most and on average
 */
static void
report_times(Scanner *s, ParallelContext *pcxt, double total_ms)
{
	ScanShared *sh = s->sh;
	int			n = pcxt->nworkers_launched;
	double		busy = 0,
				wait = 0,
				busy_max = 0,
				convert = 0,
				detoast = 0;
	double		consumed = INSTR_TIME_GET_MILLISEC(s->consumed);
	double		scanned = INSTR_TIME_GET_MILLISEC(s->scanned);

	if (message_level_is_interesting(DEBUG2))
	{
		for (int i = 0; i < n; i++)
		{
			busy += sh->workers[i].busy_ms;
			convert += sh->workers[i].convert_ms;
			detoast += sh->workers[i].detoast_ms;
			wait += sh->workers[i].wait_ms;
			busy_max = Max(busy_max, sh->workers[i].busy_ms);
		}
		elog(DEBUG2, "pg_gpu: read of \"%s\" (ms): %.1f in all, %lld chunks of %u blocks; leader: consuming %.1f, scanning %.1f (%lld chunks ahead of its turn), waiting %.1f%s; %d workers: busy %.1f on average (at most %.1f; converting rows %.1f, of which detoasting %.1f), waiting for a slot %.1f on average",
			 NameStr(sh->spec.relname), total_ms, (long long) sh->nchunks, sh->per_chunk,
			 consumed, scanned, (long long) s->aheads, total_ms - scanned - consumed,
			 s->pinned ? psprintf(", %.1f before it pinning the slots for the GPUs", s->pin_ms) : "", n,
			 n > 0 ? busy / n : 0, busy_max, n > 0 ? convert / n : 0, n > 0 ? detoast / n : 0,
			 n > 0 ? wait / n : 0);
	}
}

/* on the segment's detach (the read's end, an error): unpinned before it is unmapped */
static void
ring_unpin(dsm_segment *seg, Datum arg)
{
	pggpu_host_unregister(DatumGetPointer(arg));
}

/* the ring pinned for the GPUs, which copy parts out of their slots (the leader copying 3 GB took 1.2 s) */
static void
ring_pin(Scanner *s, ParallelContext *pcxt, ScanShared *sh)
{
	char	   *ring = (char *) sh + sh->ring_off;
	instr_time	t0,
				t1;

	if (pcxt->seg == NULL)
		return;
	INSTR_TIME_SET_CURRENT(t0);
	s->pinned = pggpu_host_register(ring, sh->slot_stride * sh->nslots);
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	s->pin_ms = INSTR_TIME_GET_MILLISEC(t1);
	if (s->pinned)
		on_dsm_detach(pcxt->seg, ring_unpin, PointerGetDatum(ring));
	else
		elog(DEBUG1, "pg_gpu: the slots of the read of \"%s\" could not be pinned for the GPUs; the leader copies their parts",
			 NameStr(sh->spec.relname));
}

/* the leader's part of a read with workers: launches them, consumes in order */
static void
read_parallel(Scanner *s, Oid relid, BlockNumber nblocks, const PgGpuRowSpec *wspec,
			  Size slot_bytes, Size prio_bytes, int workers, int nslots, BlockNumber per_chunk)
{
	ParallelContext *pcxt;
	/* (slots of whole cache lines, pg_gpu_part_flush streams lines; pinned, of whole pages) */
	Size		page = wspec->pinned ? (Size) sysconf(_SC_PAGESIZE) : 0;
	Size		stride = CACHELINEALIGN(sizeof(ScanSlot)) + CACHELINEALIGN(slot_bytes) +
		CACHELINEALIGN(prio_bytes);
	Size		bytes;
	ScanShared *sh;
	instr_time	start,
				end;

	if (page > 0)
		stride = TYPEALIGN(page, stride);
	bytes = shared_header(workers) + page + stride * nslots;

	EnterParallelMode();
	pcxt = CreateParallelContext("pg_gpu", "pg_gpu_scan_worker", workers);
	shm_toc_estimate_chunk(&pcxt->estimator, bytes);
	shm_toc_estimate_keys(&pcxt->estimator, 1);
	InitializeParallelDSM(pcxt);
	sh = shm_toc_allocate(pcxt->toc, bytes);
	sh->relid = relid;
	sh->nblocks = nblocks;
	sh->nchunks = (nblocks + per_chunk - 1) / per_chunk;
	sh->nslots = nslots;
	sh->nworkers = workers;
	sh->per_chunk = per_chunk;
	sh->slot_bytes = slot_bytes;
	sh->prio_bytes = prio_bytes;
	sh->slot_stride = stride;
	sh->ring_off = shared_header(workers);
	if (page > 0)
		sh->ring_off = TYPEALIGN(page, (uintptr_t) sh + sh->ring_off) - (uintptr_t) sh;
	pg_atomic_init_u64(&sh->next_chunk, 0);
	sh->timed = message_level_is_interesting(DEBUG2);
	memcpy(&sh->spec, wspec, sizeof(PgGpuRowSpec));
	for (int i = 0; i < workers; i++)
	{
		sh->workers[i].claimed = -1;
		sh->workers[i].busy_ms = sh->workers[i].wait_ms = 0;
		sh->workers[i].convert_ms = sh->workers[i].detoast_ms = 0;
	}
	for (int i = 0; i < nslots; i++)
	{
		ScanSlot   *slot = scan_slot(sh, i);

		SpinLockInit(&slot->mutex);
		ConditionVariableInit(&slot->cv);
		slot->chunk = i;
		slot->full = false;
	}
	shm_toc_insert(pcxt->toc, SCAN_KEY, sh);
	if (wspec->pinned)
		ring_pin(s, pcxt, sh);
	s->sh = sh;
	s->spec = &sh->spec;
	LaunchParallelWorkers(pcxt);
	{
		char	   *name = get_rel_name(relid);

		if (strcmp(name, NameStr(wspec->relname)) == 0)
			elog(DEBUG1, "pg_gpu: reading \"%s\" with parallel workers: %d launched of %d planned",
				 name, pcxt->nworkers_launched, workers);
		else
			elog(DEBUG1, "pg_gpu: reading \"%s\" (of \"%s\") with parallel workers: %d launched of %d planned",
				 name, NameStr(wspec->relname), pcxt->nworkers_launched, workers);
	}
	INSTR_TIME_SET_CURRENT(start);
	for (int64 chunk = 0; chunk < sh->nchunks; chunk++)
		consume_chunk(s, pcxt, chunk, per_chunk);
	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_SUBTRACT(end, start);
	WaitForParallelWorkersToFinish(pcxt);
	report_times(s, pcxt, INSTR_TIME_GET_MILLISEC(end));
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	s->sh = NULL;
	s->pinned = false;
}

/* reads one table (a leaf of a partitioned one) in the pushed snapshot */
static void
read_table(Relation rel, const PgGpuRowSpec *spec, PgGpuPartConsumer consume, void *arg)
{
	Scanner		s;
	BlockNumber nblocks;
	int			workers;
	PgGpuRowSpec *wspec;
	Size		slot_bytes = SLOT_BYTES;
	int64		len = PG_GPU_SPEC_LEN(spec);

	/* in a serializable transaction, what a sequential scan locks */
	PredicateLockRelation(rel, GetActiveSnapshot());
	nblocks = RelationGetNumberOfBlocks(rel);
	workers = planned_workers(rel, nblocks);

	memset(&s, 0, sizeof(s));
	s.spec = spec;
	s.leader = true;
	s.ahead = -1;
	s.own_bytes = PG_GPU_PART_BYTES;
	s.own = palloc(s.own_bytes);
	s.consume = consume;
	s.arg = arg;
	scanner_begin(&s, rel);
	wspec = palloc(sizeof(PgGpuRowSpec));
	memcpy(wspec, spec, sizeof(PgGpuRowSpec));
	if (workers > 0 && spec->kind == PG_GPU_ROWS_DENSE)
	{
		if (peek_dense(&s, nblocks, wspec))
			slot_bytes = Max(slot_bytes, sizeof(double) * (wspec->first_len + 1));
		else
			workers = 0;
		len = wspec->first_len;
	}
	if (workers > 0)
	{
		/*
		 * The ring of slots in dynamic shared memory: SLOTS_PER_WORKER a
		 * worker, but at most RING_BYTES (of rows longer than a slot,
		 * LONG_RING_BYTES, at least 2 slots) and
		 * within pg_gpu.max_memory, else no workers: a serial read needs no
		 * ring.
		 */
		Size		budget = slot_bytes > SLOT_BYTES ? LONG_RING_BYTES : RING_BYTES;
		int			nslots = Min(Min(SLOTS_PER_WORKER * workers, MAX_SLOTS),
								 Max(budget / slot_bytes, 2));
		/* a sample's read: a priority a row the slot can hold */
		Size		prio_bytes = wspec->sampled ?
			sizeof(uint64) * (slot_bytes / (sizeof(double) * (Max(len, 1) + 1)) + 1) : 0;
		double		ring = (double) nslots * (CACHELINEALIGN(sizeof(ScanSlot)) +
											 CACHELINEALIGN(slot_bytes) + CACHELINEALIGN(prio_bytes));

		workers = Min(workers, nslots);
		if (!pg_gpu_memory_allowed(ring))
		{
			elog(DEBUG1, "pg_gpu: reading \"%s\" without parallel workers: their %.0f bytes of shared memory exceed pg_gpu.max_memory",
				 NameStr(spec->relname), ring);
			workers = 0;
		}
		else
		{
			double		block_rows = pg_gpu_estimate_rows(rel) / nblocks;
			int64		slot_rows = pg_gpu_part_rows(slot_bytes, len, spec->dtype, spec->keylen, spec->rowwise,
													 spec->weighted);

			read_parallel(&s, RelationGetRelid(rel), nblocks, wspec, slot_bytes, prio_bytes, workers,
						  nslots, chunk_blocks(nblocks, workers, block_rows, slot_rows));
		}
	}
	if (workers == 0 && nblocks > 0)
		scan_chunk(&s, 0, nblocks, nblocks);
	scanner_end(&s);
	pfree(s.own);
	pfree(wspec);
}

/*
 * The leaves of a partitioned table in partition-bound order, depth first,
 * as a SELECT of it appends them; false when one of them cannot be read by a
 * plain scan (a foreign table).  Locks them as a SELECT does.
 */
static bool
collect_leaves(Relation rel, List **leaves)
{
	PartitionDesc pd = RelationGetPartitionDesc(rel, true);

	for (int i = 0; i < pd->nparts; i++)
	{
		Relation	child = table_open(pd->oids[i], AccessShareLock);
		char		kind = child->rd_rel->relkind;
		bool		ok;

		if (kind == RELKIND_PARTITIONED_TABLE)
			ok = collect_leaves(child, leaves);
		else
		{
			ok = kind == RELKIND_RELATION && child->rd_tableam == GetHeapamTableAmRoutine() &&
				!RELATION_IS_OTHER_TEMP(child) && !citus_table(pd->oids[i]);
			if (ok)
				*leaves = lappend_oid(*leaves, pd->oids[i]);
		}
		table_close(child, NoLock);
		if (!ok)
			return false;
	}
	return true;
}

bool
pg_gpu_scan_table(Oid relid, const PgGpuRowSpec *spec, bool read_only,
				  PgGpuPartConsumer consume, void *arg)
{
	Relation	rel = table_open(relid, AccessShareLock);
	List	   *leaves = NIL;
	ListCell   *lc;

	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE ?
		rel->rd_rel->relrowsecurity || citus_table(relid) || !collect_leaves(rel, &leaves) :
		!plain_scan_reads_as_select(rel))
	{
		table_close(rel, NoLock);
		return false;
	}
	/* a partitioned table: its own privileges, as in a SELECT of it */
	pg_gpu_spec_check_select(rel, spec);

	/* the snapshot SPI would use (pg_gpu_run_select, _SPI_execute_plan) */
	if (read_only)
		PushActiveSnapshot(GetActiveSnapshot());
	else
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		CommandCounterIncrement();
		UpdateActiveSnapshotCommandId();
	}
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		read_table(rel, spec, consume, arg);
	foreach(lc, leaves)
	{
		Relation	leaf = table_open(lfirst_oid(lc), AccessShareLock);
		PgGpuRowSpec *ls = pg_gpu_leaf_spec(rel, leaf, spec);

		read_table(leaf, ls, consume, arg);
		pfree(ls);
		table_close(leaf, NoLock);
	}
	PopActiveSnapshot();
	table_close(rel, NoLock);
	return true;
}
