/*
 * sample.c - the reads of a fit on a sample (`sample => m`): the sample
 * drawn while the relation streams past, and afterwards every row labelled
 * by the fit's centroids a chunk at a time.  Neither holds the relation:
 * the first holds the sample (m rows), the second one chunk of rows and
 * the rows' labels go out as they are made.  gpu_kmeans_transform's
 * stream is the second, each row's n nearest centroids out.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/memutils.h"

#include "pg_gpu.h"

/* ---- the sample ------------------------------------------------------------- */

typedef struct SampleSink
{
	const PgGpuSource *src;
	pggpu_sample *sample;
	pggpu_dtype dtype;			/* what it keeps its rows as: the data set's type */
	int64		m;
	int64		ninvalid;
	instr_time	busy;			/* in the offers: the leader's own share of the read */
} SampleSink;

static void
sample_consume(void *arg, const PgGpuPart *p)
{
	SampleSink *s = (SampleSink *) arg;
	pggpu_error err = {0};
	instr_time	start,
				end;

	CHECK_FOR_INTERRUPTS();
	INSTR_TIME_SET_CURRENT(start);
	/* (a weighted read's parts: the rows' weights, each kept with its row) */
	if (p->weights && pggpu_sample_weigh(s->sample, p->weights, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	if ((p->rowwise ? pggpu_sample_offer_rows(s->sample, p->values, p->nrows, p->prio, &err) :
		 pggpu_sample_offer_prio(s->sample, p->values, p->cap, p->nrows, p->prio, &err)) != PGGPU_OK)
		pg_gpu_raise(&err);
	s->ninvalid += p->nbad;
	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_ACCUM_DIFF(s->busy, end, start);
	pg_gpu_check_sample_memory(s->src, s->dtype, Min(pggpu_sample_offered(s->sample), s->m));
	pg_gpu_progress(false, "reading, %lld rows", (long long) pggpu_sample_offered(s->sample));
}

/* the sample's memory, freed however the call ends */
static void
sample_release(void *arg)
{
	SampleSink *s = (SampleSink *) arg;

	pggpu_sample_close(s->sample);
	s->sample = NULL;
}

int64
pg_gpu_read_sample(const PgGpuSource *src, PgGpuData *data, int64 m, uint64 seed, PgGpuRows *rows)
{
	SampleSink *s = palloc0(sizeof(SampleSink));
	MemoryContextCallback *cb = palloc0(sizeof(MemoryContextCallback));
	pggpu_error err = {0};
	const void *x;
	const int64_t *order;
	int64		got;
	int64		usable;
	instr_time	t0,
				t1,
				t2,
				t3;

	s->src = src;
	s->m = m;
	/* float32 values kept as floats (half the memory): the same sample */
	s->dtype = data->dtype;
	if (pggpu_sample_open(&s->sample, src->ncols, m, seed, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	cb->func = sample_release;
	cb->arg = s;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, cb);
	if (pggpu_sample_set_dtype(s->sample, s->dtype, &err) != PGGPU_OK)
		pg_gpu_raise(&err);
	pggpu_sample_set_interrupts(s->sample, pg_gpu_check_interrupts, NULL);
	INSTR_TIME_SET_CURRENT(t0);
	pg_gpu_read_parts(src, false, &seed, PGGPU_FLOAT64, sample_consume, s);
	INSTR_TIME_SET_CURRENT(t1);
	usable = pggpu_sample_offered(s->sample);
	got = pggpu_sample_result(s->sample, &x, &order);
	if (got < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of host memory for the order of a sample of %lld rows", (long long) m)));
	INSTR_TIME_SET_CURRENT(t2);
	pg_gpu_push_rows(src, data, x, s->dtype, (const int64 *) order, got, pggpu_sample_weights(s->sample));
	INSTR_TIME_SET_CURRENT(t3);
	INSTR_TIME_SUBTRACT(t3, t2);
	INSTR_TIME_SUBTRACT(t2, t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	elog(DEBUG2, "pg_gpu: the sample's read %.1f ms (in its offers %.1f ms), its order %.1f ms, into the data set %.1f ms",
		 INSTR_TIME_GET_MILLISEC(t1), INSTR_TIME_GET_MILLISEC(s->busy), INSTR_TIME_GET_MILLISEC(t2),
		 INSTR_TIME_GET_MILLISEC(t3));
	memset(rows, 0, sizeof(*rows));
	rows->nvalid = got;
	rows->ninvalid = s->ninvalid;
	sample_release(s);
	return usable;
}

/* ---- every row labelled, a chunk at a time ---------------------------------- */

/* the rows of data labelled by the k centroids (scaled first where mean is given), part by part */
static void
assign_data(PgGpuData *data, const double *mean, const double *std, const double *centroids,
			int k, int32 *labels, double *distances)
{
	pggpu_error err = {0};
	int64		off = 0;

	/* part by part (a parked one parked again after: one at a time on its GPU) */
	for (int i = 0; i < data->nparts; i++)
	{
		pggpu_data *ds = data->parts[i];
		bool		parked = pggpu_data_parked(ds);

		if ((mean && pggpu_data_shift_scale(ds, mean, std, &err) != PGGPU_OK) ||
			pggpu_assign(ds, centroids, k, labels + off, distances + off, &err) != PGGPU_OK ||
			(parked && pggpu_data_park(ds, &err) != PGGPU_OK))
			pg_gpu_raise(&err);
		off += pggpu_data_rows(ds);
	}
}

typedef struct LabelStream
{
	const PgGpuSource *src;
	pggpu_backend backend;
	pggpu_metric metric;
	pggpu_dtype dtype;			/* the rows' type in the parts and the chunks' sets */
	const double *mean;
	const double *std;
	const double *centroids;
	int			k;
	int			n;				/* the transform's n nearest, 0: labels */
	int64		chunk_rows;
	int64		slice_rows;		/* the transform's rows measured at a time */
	PgGpuLabelFn emit;
	PgGpuNearestFn emit_nearest;	/* (the transform's) */
	void	   *arg;
	MemoryContext cxt;			/* a chunk's, reset after it */
	PgGpuData  *data;			/* the chunk being read, or NULL */
	PgGpuSink  *sink;
	int32	   *labels;			/* the chunk's (its context's) */
	double	   *distances;
	double		inertia;
	int64		done;
	int64		emitted;		/* a transform's results so far */
} LabelStream;

/*
 * A transform of the chunk's usable rows: part by part (scaled first where
 * mean is given), slice_rows at a time, a slice's results handed out before
 * the next is measured, so that they never take more than a slice's room
 * (a chunk holds whole parts of the read, past chunk_rows)
 */
static void
transform_chunk(LabelStream *ls, const PgGpuRows *rows)
{
	PgGpuData  *data = ls->data;
	pggpu_error err = {0};
	int64		off = 0;
	int			n = ls->n;
	int32	   *cl = MemoryContextAllocHuge(ls->cxt, sizeof(int32) * ls->slice_rows * n);
	double	   *dist = MemoryContextAllocHuge(ls->cxt, sizeof(double) * ls->slice_rows * n);

	for (int i = 0; i < data->nparts; i++)
	{
		pggpu_data *ds = data->parts[i];
		bool		parked = pggpu_data_parked(ds);
		int64		m = pggpu_data_rows(ds);

		if (ls->mean && pggpu_data_shift_scale(ds, ls->mean, ls->std, &err) != PGGPU_OK)
			pg_gpu_raise(&err);
		for (int64 s0 = 0; s0 < m; s0 += ls->slice_rows)
		{
			int64		cnt = Min(ls->slice_rows, m - s0);

			if (pggpu_transform(ds, ls->centroids, ls->k, n, s0, cnt, cl, dist, &err) != PGGPU_OK)
				pg_gpu_raise(&err);
			for (int64 r = 0; r < cnt; r++)
			{
				Datum		key = pg_gpu_keys_datum(rows->keys, rows->ids[off + s0 + r]);

				for (int j = 0; j < n; j++)
				{
					if ((++ls->emitted & 65535) == 0)
						CHECK_FOR_INTERRUPTS();
					ls->emit_nearest(ls->arg, key, j + 1, cl[r * n + j] + 1, dist[r * n + j]);
				}
			}
		}
		if (parked && pggpu_data_park(ds, &err) != PGGPU_OK)
			pg_gpu_raise(&err);
		off += m;
	}
}

/* the chunk read so far labelled (or transformed), its rows handed out, its data closed */
static void
label_chunk(LabelStream *ls)
{
	PgGpuRows	rows;
	MemoryContext old = MemoryContextSwitchTo(ls->cxt);

	pg_gpu_sink_end(ls->sink, &rows);
	if (ls->n == 0)
	{
		ls->labels = palloc(sizeof(int32) * Max(rows.nvalid, 1));
		ls->distances = palloc(sizeof(double) * Max(rows.nvalid, 1));
		assign_data(ls->data, ls->mean, ls->std, ls->centroids, ls->k, ls->labels, ls->distances);
	}
	MemoryContextSwitchTo(old);
	if (ls->n > 0)
		transform_chunk(ls, &rows);
	pg_gpu_data_close(ls->data);
	for (int64 r = 0; r < rows.nvalid && ls->n == 0; r++)
	{
		Datum		key = pg_gpu_keys_datum(rows.keys, rows.ids[r]);

		if ((r & 65535) == 65535)
			CHECK_FOR_INTERRUPTS();
		ls->emit(ls->arg, key, ls->labels[r] + 1, ls->distances[r]);
		/* (as a fit's: squared distances; cosine: 1 - cos itself) */
		ls->inertia += ls->metric == PGGPU_METRIC_COSINE ? ls->distances[r] :
			ls->distances[r] * ls->distances[r];
	}
	for (int64 r = 0; r < rows.ninvalid; r++)
	{
		Datum		key = pg_gpu_keys_datum(rows.keys, rows.invalid_ids[r]);

		if (ls->n > 0)
			ls->emit_nearest(ls->arg, key, 0, 0, 0);
		else
			ls->emit(ls->arg, key, 0, 0);
	}
	ls->done += rows.nvalid + rows.ninvalid;
	ls->data = NULL;
	ls->sink = NULL;
	MemoryContextReset(ls->cxt);
	pg_gpu_progress(false, "labelling, %lld rows", (long long) ls->done);
}

static void
label_consume(void *arg, const PgGpuPart *p)
{
	LabelStream *ls = (LabelStream *) arg;

	if (ls->data == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(ls->cxt);

		ls->data = pg_gpu_data_open_one(ls->backend, ls->src->ncols, ls->chunk_rows);
		pg_gpu_data_set_kmeans(ls->data, ls->metric,
							   pg_gpu_kmeans_precision == PG_GPU_PRECISION_DOUBLE);
		pg_gpu_data_set_dtype(ls->data, ls->dtype);
		ls->sink = pg_gpu_sink_begin(ls->src, ls->data, true);
		MemoryContextSwitchTo(old);
	}
	pg_gpu_sink_consume(ls->sink, p);
	if (pg_gpu_sink_rows(ls->sink) >= ls->chunk_rows)
		label_chunk(ls);
}

/* the stream of every row of src a chunk at a time: ls's centroids, emits and n set */
static void
label_stream(LabelStream *ls, const PgGpuSource *src, pggpu_metric metric, const double *mean,
			 const double *std, const double *centroids, int k)
{
	PgGpuSource by;

	ls->backend = pg_gpu_choose_backend();
	by = pg_gpu_source_for(src, ls->backend);
	ls->src = &by;
	ls->metric = metric;
	ls->mean = mean;
	ls->std = std;
	ls->centroids = centroids;
	ls->k = k;
	ls->dtype = pg_gpu_source_dtype(src, mean != NULL);
	/*
	 * About 256 MB of values a chunk (at least 2^14 rows, at most 2^20; and
	 * the rest of the part that crosses the end): large enough that a
	 * chunk's set-up is lost in its labelling, small beside any GPU.  A
	 * transform's slice as much again, or a quarter of
	 * pg_gpu.kmeans_gpu_memory where less: its rows twice as doubles (the
	 * search's queries, and their copy) and n clusters and distances each.
	 */
	ls->chunk_rows = Max((int64) 1 << 14, Min((int64) 1 << 20, ((int64) 256 << 20) / (8 * src->ncols)));
	if (ls->n > 0)
	{
		int64		room = (int64) 256 << 20;

		if (pg_gpu_kmeans_gpu_memory > 0)
			room = Min(room, (int64) pg_gpu_kmeans_gpu_memory * (1048576 / 4));
		ls->slice_rows = Max(1, Min(ls->chunk_rows, room / (16 * (int64) src->ncols + 20 * (int64) ls->n)));
		elog(DEBUG2, "pg_gpu: the transform's rows in chunks of %lld, measured %lld at a time",
			 (long long) ls->chunk_rows, (long long) ls->slice_rows);
	}
	ls->cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_gpu labelling", ALLOCSET_DEFAULT_SIZES);
	pg_gpu_progress(true, ls->n > 0 ? "measuring every row" : "labelling every row");
	pg_gpu_read_parts(&by, true, NULL, ls->dtype, label_consume, ls);
	if (ls->data)
		label_chunk(ls);
	MemoryContextDelete(ls->cxt);
}

void
pg_gpu_label_rows(const PgGpuSource *src, pggpu_metric metric, const double *mean,
				  const double *std, const double *centroids, int k, PgGpuLabelFn emit,
				  void *arg, double *inertia)
{
	LabelStream ls;

	memset(&ls, 0, sizeof(ls));
	ls.emit = emit;
	ls.arg = arg;
	label_stream(&ls, src, metric, mean, std, centroids, k);
	*inertia = ls.inertia;
}

void
pg_gpu_transform_rows(const PgGpuSource *src, pggpu_metric metric, const double *mean,
					  const double *std, const double *centroids, int k, int n,
					  PgGpuNearestFn emit, void *arg)
{
	LabelStream ls;

	memset(&ls, 0, sizeof(ls));
	ls.n = n;
	ls.emit_nearest = emit;
	ls.arg = arg;
	label_stream(&ls, src, metric, mean, std, centroids, k);
}
