/*
 * pg_gpu.h - declarations shared by the PostgreSQL side (src/).  Includes the
 * compute layer's plain-C header, never CUDA's.
 */
#ifndef PG_GPU_H
#define PG_GPU_H

#include "postgres.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "portability/instr_time.h"
#include "tcop/dest.h"
#include "utils/array.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/relcache.h"

#include "compat.h"
#include "pg_gpu_compute.h"

/* ---- settings (pg_gpu.c) ---- */

typedef enum PgGpuDeviceSetting
{
	PG_GPU_DEVICE_AUTO,
	PG_GPU_DEVICE_GPU,
	PG_GPU_DEVICE_CPU
} PgGpuDeviceSetting;

typedef enum PgGpuPrecisionSetting
{
	PG_GPU_PRECISION_AUTO,		/* TF32 products, certified */
	PG_GPU_PRECISION_DOUBLE		/* float64 products */
} PgGpuPrecisionSetting;

extern int	pg_gpu_device;
extern bool pg_gpu_allow_tf32;
extern int	pg_gpu_kmeans_precision;	/* PG_GPU_PRECISION_* */
extern int	pg_gpu_matmul_gpu_memory;	/* MB, 0 = what is free */
extern int	pg_gpu_kmeans_gpu_memory;	/* MB for a k-means call's rows, 0 = what is free */
extern int	pg_gpu_max_memory;	/* kB a call's data may take, -1 = no limit */
extern int	pg_gpu_cpu_threads;	/* 0: 1 + max_parallel_workers_per_gather */
extern int	pg_gpu_threads(void);	/* what a call uses: the above, at most 1 + max_worker_processes */

/* may a call's data take bytes under pg_gpu.max_memory? */
extern bool pg_gpu_memory_allowed(double bytes);
/*
 * The capacity (in items of unit bytes) a growing buffer takes next: want,
 * or less where more would pass pg_gpu.max_memory beside others bytes (half
 * the room left), but never under need.  A guess at the size may so never
 * fail a call that what it reads would not fail.
 */
extern int64 pg_gpu_grow_cap(int64 need, int64 want, double unit, double others);
/* errors (53400) when a call's data would take more than pg_gpu.max_memory */
extern void pg_gpu_check_memory(double bytes, const char *what, const char *detail_fmt,...)
			pg_attribute_printf(3, 4);

/* gpus.c: pg_gpu.gpus and pg_gpu.parts */
extern char *pg_gpu_gpus;
extern int	pg_gpu_parts;
extern bool pg_gpu_check_gpus(char **newval, void **extra, GucSource source);
/*
 * The shares a call's rows are dealt to on backend (at most
 * PGGPU_MAX_THREADS): their number, and each one's GPU in gpus (-1 on the
 * CPU).  ERROR when pg_gpu.gpus names a GPU that cannot be used.
 */
extern int	pg_gpu_shares(pggpu_backend backend, int *gpus);

/*
 * Whether a call's work is worth several GPUs (pg_gpu.parts unset): its
 * estimated time on one GPU, a k-means step or a product, at least
 * PG_GPU_SPLIT_MIN_MS.  Below it, what several GPUs save is less than what
 * they cost once a call (their contexts and libraries in a new session,
 * the threads).  A k-means call must also save more a step than combining
 * its shares costs (pggpu_estimate_step_ms, _combine_ms).  A product's
 * estimate: about 3 x 10^10 float64 multiply-adds a ms (an H200).
 */
#define PG_GPU_SPLIT_MIN_MS 60.0
extern bool pg_gpu_split_kmeans(double rows, int d, int k, int nshares);
extern bool pg_gpu_split_product(double m, double n, double k);

/* the backend pg_gpu.device selects now (may ERROR, may NOTICE once) */
extern pggpu_backend pg_gpu_choose_backend(void);

/* ereport(ERROR) for a failed compute call */
pg_noreturn extern void pg_gpu_raise(const pggpu_error *err);

/* CHECK_FOR_INTERRUPTS for the compute layer's callback */
extern void pg_gpu_check_interrupts(void *arg);
/* InterruptPending, for the compute layer's threads' pollers */
extern bool pg_gpu_interrupt_pending(void);

/*
 * A data set whose device and pinned memory are freed when the memory context
 * it was opened in goes away: on success, ERROR and cancel alike.  Its rows
 * are dealt to shares (pg_gpu_shares: the GPUs of pg_gpu.gpus, or
 * pg_gpu.parts) a batch at a time, in turn; a share's rows beyond
 * pg_gpu.kmeans_gpu_memory (or what its GPU has) go into further parts of
 * it, each parked (in pinned host memory) but its last: the compute layer
 * streams them through the GPU (pggpu_kmeans_parts), the GPUs at once.
 * parts are in the order they were opened; ds is parts[0].
 */
typedef struct PgGpuData
{
	pggpu_data *ds;
	pggpu_data **parts;
	int			nparts;
	int64		part_rows;		/* the most rows a part takes (0: as many as fit) */
	int64		share_rows;		/* the rows a share expects */
	pggpu_backend backend;
	int			d;
	pggpu_metric metric;
	bool		double_only;
	pggpu_dtype dtype;			/* the type the rows are pushed in (every part's) */
	bool		wide;			/* but held as doubles from the first (pg_gpu_data_hold_wide) */
	int			nshares;
	int			share_gpu[PGGPU_MAX_THREADS];	/* a share's GPU (-1: the CPU) */
	int			share_part[PGGPU_MAX_THREADS];	/* the part of it being filled */
	int			next_share;		/* the share the next batch goes to */
	MemoryContextCallback cb;
} PgGpuData;

extern PgGpuData *pg_gpu_data_open(pggpu_backend backend, int d, int64 expected_rows, int k);
/* the same in one share (the first GPU, or the CPU): rows streamed through it a chunk at a time */
extern PgGpuData *pg_gpu_data_open_one(pggpu_backend backend, int d, int64 expected_rows);
extern void pg_gpu_data_close(PgGpuData *data);
/* the metric and precision of the data's k-means (every part's) */
extern void pg_gpu_data_set_kmeans(PgGpuData *data, pggpu_metric metric, bool double_only);
/* the type its rows are pushed in (pg_gpu_source_dtype), before the first */
extern void pg_gpu_data_set_dtype(PgGpuData *data, pggpu_dtype dtype);
/*
 * floats or halves (the type set) held as doubles from the first row, for
 * pg_gpu_data_unit_rows after the read (pggpu_data_hold_wide; the rows
 * come by rows: a GPU's read)
 */
extern void pg_gpu_data_hold_wide(PgGpuData *data);
/* every row of every part scaled to norm 1 (cosine: pggpu_data_unit_rows) */
extern void pg_gpu_data_unit_rows(PgGpuData *data);
/* the part the next batch goes to (the next share's) */
extern pggpu_data *pg_gpu_data_filling(PgGpuData *data);
/* the next share's part full: parked, and a new one opened for the share; returns it */
extern pggpu_data *pg_gpu_data_next_part(PgGpuData *data);
/* a batch went to the next share: the one after it is next */
extern void pg_gpu_data_next_share(PgGpuData *data);
/* its device(s): "cpu", a GPU's name, "NAME (N GPUs)" */
extern const char *pg_gpu_data_device(const PgGpuData *data);
extern int64 pg_gpu_data_rows(const PgGpuData *data);
/* rows (ascending indexes in read order) of every part, m x d doubles into X */
extern void pg_gpu_data_get_rows(PgGpuData *data, const int64 *rows, int m, double *X);

/*
 * A matrix-product workspace freed with the memory context given (callers
 * cache one for a whole query in fn_mcxt).  In auto mode, a GPU that cannot
 * run products (no cuBLAS) falls back to the CPU with a NOTICE.
 */
typedef struct PgGpuMatmul
{
	pggpu_matmul *all[PGGPU_MAX_THREADS];	/* a workspace a share of a's rows (pg_gpu_shares); all[0] holds the buffers */
	int			nall;			/* opened: all[0] at once, the rest when a product is split */
	int			nshares;		/* the shares pg_gpu_shares gave, on these GPUs */
	int			share_gpu[PGGPU_MAX_THREADS];
	pggpu_backend backend;
	MemoryContextCallback cb;
	Size		bytes[3];		/* what each host buffer was asked to hold */
} PgGpuMatmul;

extern PgGpuMatmul *pg_gpu_matmul_open(pggpu_backend backend, MemoryContext cxt);
/* frees all but buffer which of the first workspace (for reading a result out) */
extern void pg_gpu_matmul_keep_only(PgGpuMatmul *w, int which);
extern void *pg_gpu_matmul_buffer(PgGpuMatmul *w, int which, Size bytes, Size keep);
/* counts buffer which as bytes in pg_gpu.max_memory (what was read into it) */
extern void pg_gpu_matmul_count(PgGpuMatmul *w, int which, Size bytes);
/* the bytes the workspace's other two host buffers count */
extern double pg_gpu_matmul_others(const PgGpuMatmul *w, int which);
/* w's workspaces of every share, opened (the GPUs' contexts made at once) */
extern void pg_gpu_matmul_open_shares(PgGpuMatmul *w);
/* C (m x n) = A (m x k) B (k x n), row-major, in w's device (matmul.c) */
extern void pg_gpu_matmul_run(PgGpuMatmul *w, pggpu_dtype dtype, int64 m, int64 n, int64 k,
							  const void *a, const void *b, void *c);

/* ---- reading relations (read.c) ---- */

/* a vector column's type (vector.c) */
typedef enum PgGpuVecKind
{
	PG_GPU_VEC_NONE = 0,		/* scalar columns */
	PG_GPU_VEC_FLOAT4,			/* real[] */
	PG_GPU_VEC_FLOAT8,			/* double precision[] */
	PG_GPU_VEC_PGVECTOR,		/* pgvector's vector (float4 values) */
	PG_GPU_VEC_HALFVEC,			/* pgvector's halfvec (binary16 values) */
	PG_GPU_VEC_GEOMETRY			/* PostGIS geometry points: x, y (and z) */
} PgGpuVecKind;

#define PG_GPU_MAX_VECTOR_DIMS 16000	/* pgvector's vector allows as many */

typedef struct PgGpuSource
{
	Oid			relid;
	char	   *relname;		/* for messages */
	char	   *qualname;		/* quoted, schema-qualified */
	int			ncols;			/* values a row: the columns, or the vectors' length */
	int			natts;			/* columns read: ncols, or 1 for a vector column */
	PgGpuVecKind veckind;		/* the one vector column's type, or NONE */
	bool		normalize;		/* rows scaled to unit length (metric cosine) */
	bool		skip_zero;		/* a zero vector skipped as unusable (cosine's rows scaled after the read) */
	char	  **colnames;		/* natts of them */
	bool		defaulted;		/* columns => NULL: every numeric column */
	Oid		   *coltypes;		/* base types */
	int		   *colatts;		/* attribute indexes in the relation */
	char	   *idname;			/* NULL when no id column */
	Oid			idtype;			/* its base type */
	int			idatt;			/* its attribute index, -1: none */
	Oid			keytype;		/* the ids' type in results (PgGpuKeys.type) */
	Oid			idcoll;			/* the id column's collation (ties by id: gpu_knn) */
	/*
	 * the rows' weights (pg_gpu_resolve_weight): a numeric column (wname,
	 * NULL: none), or the points' M (mweights: a geometry column whose first
	 * point has M, no weight column named)
	 */
	char	   *wname;
	Oid			wtype;
	int			watt;
	bool		mweights;
	bool		first_m;		/* a geometry column's first point has M (pg_gpu_vector_dims) */
	double		expected_rows;	/* planner-style estimate, 0 if unknown */
	/* how its consumer takes a read's parts (PgGpuRowSpec's) */
	bool		pinned;
	bool		rowwise;
} PgGpuSource;

/*
 * The type a source's rows are held in: FLOAT32 where every value read is a
 * float32 value (vector, halfvec, real[]; real and smallint columns) and
 * kept as read (not normalised for cosine, nor standardized: rewritten rows
 * are doubles), else FLOAT64
 */
extern pggpu_dtype pg_gpu_source_dtype(const PgGpuSource *src, bool standardized);

/* column helpers */
extern bool pg_gpu_is_numeric_type(Oid t);
extern bool pg_gpu_is_integer_type(Oid t);
extern int	pg_gpu_find_column(TupleDesc td, const char *name);
extern double pg_gpu_datum_to_double(Datum d, Oid type);

/*
 * Opens a relation whose rows can be read (table, view, matview, foreign or
 * partitioned table; else ERROR) with AccessShareLock; returns its name and
 * its quoted schema-qualified name.
 */
extern Relation pg_gpu_open_relation(Oid relid, char **relname, char **qualname);
extern double pg_gpu_estimate_rows(Relation rel);

/* a DestReceiver that does nothing but receive */
extern void pg_gpu_receiver_init(DestReceiver *dest,
								 bool (*receive) (TupleTableSlot *, DestReceiver *));

/*
 * Runs a SELECT through SPI into dest.  read_only: in the caller's snapshot,
 * so that several reads of one call see the same data.
 */
extern void pg_gpu_run_select(const char *sql, DestReceiver *dest, bool read_only);

/*
 * The columns and id of a k-means call (normalize: metric cosine); a vector
 * column's length is read from its first non-NULL row.  keytype: the type
 * the caller returns ids as (its id_type; InvalidOid: bigint, of an integer
 * id column; ANYELEMENTOID: the id column's own, a Citus node's read, which
 * its coordinator checked); the id column, named or the single-column
 * primary key, must be of it (else 42804, the hint naming the id_type to
 * pass).
 */
extern void pg_gpu_resolve_source(Oid relid, ArrayType *columns, text *id_column, Oid keytype,
								  bool id_required, bool normalize, PgGpuSource *src);
/*
 * the same for a fit on a sample of that many rows (its memory checked, not
 * the relation's); sample -1: the rows are streamed (pg_gpu_label_rows),
 * the caller checks what it keeps
 */
extern void pg_gpu_resolve_sample(Oid relid, ArrayType *columns, text *id_column, Oid keytype,
								  bool id_required, bool normalize, int64 sample, PgGpuSource *src);
/* its memory by the table's statistics (ERROR past pg_gpu.max_memory): again once its weights are known */
extern void pg_gpu_check_source_memory(const PgGpuSource *src, int64 sample);
/* pg_gpu.max_memory against a sample of rows rows held as dtype (ERROR past it) */
extern void pg_gpu_check_sample_memory(const PgGpuSource *src, pggpu_dtype dtype, int64 rows);
/*
 * the same for a labelling that streams the rows (pg_gpu_label_rows) and
 * keeps rows ids, labels and distances: 20 bytes a row (pre, post: the
 * detail's words around the count)
 */
extern void pg_gpu_check_label_memory(const PgGpuSource *src, double rows, const char *pre,
									  const char *post);

typedef struct PgGpuRows
{
	int64		nvalid;			/* rows pushed to the data set */
	int64		ninvalid;		/* rows with NULL / NaN / Infinity */
	int64	   *ids;			/* nvalid ids, in data-set order (if wanted) */
	int64	   *invalid_ids;	/* ninvalid ids (if wanted) */
	struct PgGpuKeys *keys;		/* what the ids stand for (if wanted) */
} PgGpuRows;

extern void pg_gpu_read_source(const PgGpuSource *src, PgGpuData *data,
							   bool want_ids, PgGpuRows *rows);
extern void pg_gpu_read_sources(const PgGpuSource *srcs, int nsrcs, PgGpuData *data,
								bool want_ids, PgGpuRows *rows);
/* a NOTICE of the rows left out (NULL, NaN, infinite; zero for cosine), skipped saying what becomes of them */
extern void pg_gpu_notice_skipped(const PgGpuSource *src, const PgGpuRows *rows, const char *skipped);

/* ERROR: no row of src is usable (the detail names the columns at fault: unusable.c) */
pg_noreturn extern void pg_gpu_no_usable_rows(const PgGpuSource *src, const PgGpuRows *rows);
/* "a, b": names quoted as identifiers, as in a query; literals: "'a', 'b'" (read.c) */
extern char *pg_gpu_column_list(char **names, int n, bool literals);
/* "SELECT [id, ]c1, ..., cd FROM rel" (read.c) */
extern char *pg_gpu_source_select(const PgGpuSource *src, bool want_ids);

/* ---- progress, in pg_stat_activity.query (progress.c) ---- */

/* a call named fname begins (its stage shows until the memory context goes) */
/* citus.c: Citus's metadata; citus_kmeans.c: k-means on the nodes of a Citus cluster */
typedef struct PgGpuCluster PgGpuCluster;

extern bool pg_gpu_citus_nodes;
extern char pg_gpu_citus_method(Oid relid);
extern bool pg_gpu_on_nodes(Oid relid, const char *why_not);
extern PgGpuCluster *pg_gpu_cluster_load(const PgGpuSource *src, pggpu_metric metric, bool want_ids,
										 const double *mean, const double *std, PgGpuRows *rows);
extern const char *pg_gpu_cluster_device(const PgGpuCluster *cl);
extern void pg_gpu_cluster_fit(PgGpuCluster *cl, const pggpu_kmeans_params *p,
							   pggpu_kmeans_result *r);
extern void pg_gpu_cluster_labels(PgGpuCluster *cl, const double *C, int k, PgGpuRows *rows,
								  int32 **labels, double **distances);
extern void pg_gpu_cluster_close(PgGpuCluster *cl);
/* citus_node.c: doubles as they travel between nodes (big-endian, 8 bytes each) */
extern void pg_gpu_doubles_to_wire(const double *v, int64 n, char *out);
extern void pg_gpu_doubles_from_wire(const char *in, int64 n, double *v);


extern void pg_gpu_progress_begin(const char *fname);
/* its stage now (at most every 100 ms unless force) */
extern void pg_gpu_progress(bool force, const char *fmt,...) pg_attribute_printf(2, 3);
/* the statement's own text again */
extern void pg_gpu_progress_end(void);

/* ---- k-means models (model.c) ---- */

/*
 * A model: what applies it, and its fit's figures (written, not read
 * back: only relation is).  veckind: NONE for numeric columns (ncols = d),
 * FLOAT8 for any vector column, GEOMETRY for points (ncols = 1).
 */
typedef struct PgGpuModel
{
	int			k;
	int			d;
	int			ncols;
	char	  **columns;
	char	  **types;			/* as format_type writes them */
	PgGpuVecKind veckind;
	pggpu_metric metric;
	bool		standard;		/* scale 'standard': rows compared as (x - mean) / std */
	double	   *mean;			/* d each, standard only */
	double	   *std;
	double	   *centroids;		/* k x d, in the columns' units */
	double	   *scaled;			/* k x d, what rows are compared with (standard: scaled units) */
	int64	   *sizes;
	double		inertia;
	int			iterations;
	bool		converged;
	int64		rows;			/* the relation's usable rows */
	int64		sample;			/* the rows it was fit on, where a sample (else 0) */
	bool		hierarchical;	/* algorithm 'hierarchical': */
	int			groups;			/* its groups */
	int64		trained;		/* the rows its fits ran on */
	const char *weights;		/* the rows' weights: weight_column's name, "M" (the points'), or NULL */
	char	   *relation;
	const char *init;
	int64		seed;
	int			n_init;
	int			max_iter;
	double		tol;
	const char *device;
} PgGpuModel;

/*
 * The model as jsonb; *toolarge (and (Datum) 0) where it would pass jsonb's
 * limit of 256 MB (about 13 million values), which only an exact count
 * while it is built can tell.  pg_gpu_model_fits: whether a model of k x d
 * centroids is expected to fit (about 20 bytes a value), for a fit to say so
 * before it runs; pg_gpu_model_estimate: that estimate, in bytes.
 */
extern Datum pg_gpu_model_to_jsonb(const PgGpuModel *m, bool *toolarge);
extern bool pg_gpu_model_fits(int64 k, int d, bool standard);
extern int64 pg_gpu_model_estimate(int64 k, int d, bool standard);
/* a NOTICE (fname's) where a model of k x d would not fit: true then */
extern bool pg_gpu_model_too_large(const char *fname, int k, int d, bool standard, bool before);
/* ERRORs (22023) on a value that is not a model of this version */
extern PgGpuModel *pg_gpu_model_from_jsonb(Jsonb *jb);
/* "numeric columns", "geometry points" or "a vector column": what m was fit on, for messages */
extern const char *pg_gpu_model_fit_on(const PgGpuModel *m);
/*
 * src for applying m to relid (pg_gpu_resolve_sample, streamed): the
 * model's columns found by name, normalised for cosine; ERRORs when they
 * are not of the kinds the model was fit on
 */
extern void pg_gpu_model_source(const PgGpuModel *m, Oid relid, text *id_column, Oid keytype,
								PgGpuSource *src);

/* ---- rows into parts (rows.c), read in parallel (scan.c) ---- */

typedef enum PgGpuRowKind
{
	PG_GPU_ROWS_NUMERIC,		/* k-means: numeric columns, and maybe an id */
	PG_GPU_ROWS_DENSE,			/* gpu_matmul: (row id, float8[] or real[]) */
	PG_GPU_ROWS_VECTOR			/* k-means: one vector column, and maybe an id */
} PgGpuRowKind;

/*
 * What to take from each tuple.  Plain data: parallel workers get a copy.
 * Positions are attribute indexes of the tuples given (the table's, or those
 * of a generated SELECT's target list).
 */
typedef struct PgGpuRowSpec
{
	PgGpuRowKind kind;
	int			ncols;
	int			idpos;			/* the id's position, -1: none */
	Oid			idtype;
	int16		keylen;			/* its type's length where passed by reference
								 * (its bytes in the parts' key areas), 0 where
								 * by value (the id is the Datum) */
	NameData	relname;		/* for messages */
	NameData	idname;
	/* DENSE: the first row's length and id, when known (else -1) */
	int64		first_len;
	int64		first_id;
	/* VECTOR: its type and length, the column's name; NUMERIC, VECTOR: unit rows */
	PgGpuVecKind veckind;
	int64		veclen;
	NameData	colname;
	bool		normalize;
	bool		skip_zero;		/* VECTOR: a zero vector skipped, as normalize skips it */
	/* a sample's read: the parts' priorities (pggpu_sample_priorities) by this seed */
	bool		sampled;
	uint64		sample_seed;
	/*
	 * NUMERIC, VECTOR: the values' type in the parts, the data set's:
	 * FLOAT64, FLOAT32 (float32 values read for a FLOAT32 data set: half the
	 * bytes through the workers' slots and the copies) or FLOAT16 (a
	 * halfvec column's halves as they are stored: a quarter); never but
	 * FLOAT64 with normalize or sampled
	 */
	pggpu_dtype dtype;
	/*
	 * the consumer copies the parts to a GPU: a parallel read's slots are
	 * pinned for the GPUs (pggpu_host_register), and a device copies a
	 * part out of its slot itself (PgGpuPart.pinned)
	 */
	bool		pinned;
	/*
	 * VECTOR: the parts row-major (PgGpuPart.rowwise), for a consumer that
	 * turns them itself (a GPU: the workers write a row as they read it)
	 */
	bool		rowwise;
	/*
	 * NUMERIC, VECTOR: the rows weigh (the parts hold a weight a row): the
	 * weight column at wpos (of type wtype, named wname), else (mweights) a
	 * point's M, 1 where it has none
	 */
	bool		weighted;
	bool		mweights;
	int			wpos;
	Oid			wtype;
	NameData	wname;
	int16		pos[MaxHeapAttributeNumber];	/* the columns' positions */
	Oid			types[MaxHeapAttributeNumber];	/* and base types (DENSE: the
												 * element type) */
} PgGpuRowSpec;

/*
 * A part: rows converted from tuples, in a buffer of room for cap rows of len
 * values and an id each.  NUMERIC (len = ncols): value j of kept row i at
 * values[j * cap + i], its id at ids[i]; the ids of skipped rows (NULL, NaN
 * or an infinity in a used column) fill ids from the back, ids[cap - 1 - b].
 * DENSE: the len values of row i at values[i * len], its id at ids[i]; len
 * is -1 until the first row sets it.  dtype (the spec's): FLOAT64 values at
 * values, FLOAT32 at values32, FLOAT16 (binary16 bits) at values16, the
 * others NULL.
 */
typedef struct PgGpuPart
{
	char	   *buf;
	Size		bytes;
	bool		growable;		/* buf is palloc'd: enlarged for one long row */
	int64		len;
	int64		cap;
	int64		nrows;
	int64		nbad;
	double	   *values;
	float	   *values32;
	uint16	   *values16;
	pggpu_dtype dtype;
	int64	   *ids;
	double	   *weights;		/* the kept rows' weights (a weighted spec's), after the ids; else NULL */
	/*
	 * keylen (the spec's): ids passed by reference are offsets into keys,
	 * where each id's bytes (detoasted, at a MAXALIGN'd offset) fill
	 * keyused of keybytes
	 */
	int16		keylen;
	char	   *keys;
	Size		keybytes;
	Size		keyused;
	const uint64 *prio;			/* a sample's read: its rows' priorities where a worker
								 * computed them, else NULL */
	bool		rowwise;		/* and then row-major: row i at values[i * len] */
	bool		pinned;			/* buf is pinned for the GPUs' copies (PgGpuRowSpec.pinned) */
	/*
	 * A vector row is converted into pend (the process's own buffer,
	 * row-major), and every PG_GPU_PART_PEND rows (and before the part is
	 * read: pg_gpu_part_flush) the pending rows, the last npend of nrows,
	 * go to values a run of cache lines a column: written there one by one,
	 * a row of 768 values touches 768 pages, a page-table walk each (on the
	 * GPU machine's virtual machine, 4.6 us a row of a read of 12 us a row).
	 * pends: the part may (long rows, many of them); pend is taken at its
	 * first vector row (pg_gpu_part_pend), NULL until then.
	 */
	bool		pends;
	char	   *pend;
	int			npend;
} PgGpuPart;

#define PG_GPU_PART_PEND 128

typedef void (*PgGpuPartConsumer) (void *arg, const PgGpuPart *part);

/* the part's values, of its dtype */
static inline const void *
pg_gpu_part_values(const PgGpuPart *part)
{
	return part->dtype == PGGPU_FLOAT16 ? (const void *) part->values16 :
		part->dtype == PGGPU_FLOAT32 ? (const void *) part->values32 : (const void *) part->values;
}

/* an empty part over buf (len -1: not known yet), of values of dtype */
extern void pg_gpu_part_init(PgGpuPart *part, char *buf, Size bytes, int64 len,
							 bool growable, pggpu_dtype dtype, int16 keylen, bool rowwise, bool weighted);
static inline bool
pg_gpu_part_full(const PgGpuPart *part)
{
	return part->len >= 0 && part->nrows + part->nbad >= part->cap;
}

/* the rows of len values (at least 1) that a part of bytes holds */
extern int64 pg_gpu_part_rows(Size bytes, int64 len, pggpu_dtype dtype, int16 keylen, bool rowwise,
							  bool weighted);

/* the part's room for pending rows, taken now (part->pends) */
extern char *pg_gpu_part_pend(PgGpuPart *part);

/* the part's pending rows to values: before anything reads it */
extern void pg_gpu_part_flush(PgGpuPart *part);

/*
 * converts one tuple into part, which has room for a row (ERROR on a bad
 * row); false, writing nothing, where its id's bytes do not fit the part's
 * key area: the part is full
 */
extern bool pg_gpu_row_to_part(const PgGpuRowSpec *spec, TupleTableSlot *slot,
							   PgGpuPart *part);
/* the executor's privilege check of SELECT <spec's columns (id and weight included)> FROM rel */
extern void pg_gpu_spec_check_select(Relation rel, const PgGpuRowSpec *spec);
/* spec with its positions moved from parent's attributes to child's (a partition's leaf), by name */
extern PgGpuRowSpec *pg_gpu_leaf_spec(Relation parent, Relation child, const PgGpuRowSpec *spec);
/* the process's time detoasting vectors there (a parallel read's DEBUG2 line) */
extern PGDLLIMPORT instr_time pg_gpu_detoast_time;
extern PGDLLIMPORT bool pg_gpu_detoast_timed;	/* timed at all (a worker of a read logged at DEBUG2) */
/* the DENSE row of pg_gpu_row_to_part */
extern void pg_gpu_dense_row(const PgGpuRowSpec *spec, TupleTableSlot *slot,
							 PgGpuPart *part);
/* a DENSE tuple's length and id, or -1 when it is not a good row */
extern int64 pg_gpu_dense_row_len(const PgGpuRowSpec *spec, TupleTableSlot *slot,
								  int64 *id);
/* ERROR: rows of a dense matrix table differ in length */
pg_noreturn extern void pg_gpu_differ_in_length(const PgGpuRowSpec *spec, int64 id, int64 len,
									int64 first_id, int64 first_len);
/* the values a part holds for each row (-1: DENSE, not known before the first) */
#define PG_GPU_SPEC_LEN(spec) \
	((spec)->kind == PG_GPU_ROWS_NUMERIC ? (spec)->ncols : \
	 (spec)->kind == PG_GPU_ROWS_VECTOR ? (spec)->veclen : -1)

/* vector columns (vector.c) */
extern PgGpuVecKind pg_gpu_vector_kind(Oid basetype);
/* a vector column's length, by its first usable row; *has_m: that row is a point with M */
extern int	pg_gpu_vector_dims(const PgGpuSource *src, bool *has_m);
extern bool pg_gpu_vector_row(const PgGpuRowSpec *spec, TupleTableSlot *slot, PgGpuPart *part);
/* one vector value as d doubles (ERROR on another length; -1: a NULL element) */
extern int64 pg_gpu_vector_values(PgGpuVecKind kind, Datum value, int64 d, double *out,
								  const char *what);

/* the row's id (spec->idpos) as a part keeps it; ERROR when it is NULL; false: no room */
extern bool pg_gpu_slot_key(const PgGpuRowSpec *spec, TupleTableSlot *slot, PgGpuPart *part,
							int64 *id);
/* the row's id in messages */
extern char *pg_gpu_slot_key_text(const PgGpuRowSpec *spec, TupleTableSlot *slot);

/* the value of an integer (smallint, integer, bigint) attribute */
extern int64 pg_gpu_slot_int(TupleTableSlot *slot, int att, Oid type);

/*
 * Reads every row of relid into parts handed to consume, in the order of a
 * serial sequential scan, using parallel workers as a parallel sequential
 * scan of the table would (max_parallel_workers_per_gather,
 * min_parallel_table_scan_size, the table's parallel_workers).  Checks the
 * SELECT privilege on the columns of spec.  Returns false, reading nothing,
 * for what a plain scan would not read as a SELECT does (views, foreign
 * tables or partitions, inheritance parents, row-level security, other
 * sessions' temporary tables, unpopulated materialized views): read those
 * through SPI.  A partitioned table is read leaf by leaf, in partition-bound
 * order.  read_only: in the caller's snapshot, as pg_gpu_run_select.
 * DEBUG1 names the workers launched.
 */
extern bool pg_gpu_scan_table(Oid relid, const PgGpuRowSpec *spec, bool read_only,
							  PgGpuPartConsumer consume, void *arg);

/* a DestReceiver that converts the rows of a SELECT into parts */
/*
 * A sink: parts into data's staging buffers as the read puts them (ids
 * kept where wanted), batches pushed as they fill; end: the last batch
 * pushed, the counts and ids into rows.  rows: the rows it holds so far.
 */
typedef struct PgGpuSink PgGpuSink;
extern PgGpuSink *pg_gpu_sink_begin(const PgGpuSource *src, PgGpuData *data, bool want_ids);
extern void pg_gpu_sink_consume(void *sink, const PgGpuPart *part);	/* a PgGpuPartConsumer */
extern int64 pg_gpu_sink_rows(const PgGpuSink *sink);
extern void pg_gpu_sink_end(PgGpuSink *sink, PgGpuRows *rows);
/*
 * every row of src as parts to consume (the table's scan, else a SELECT
 * through SPI); sample_seed (may be NULL): the parts' priorities by it, where
 * the scan's workers can compute them; dtype: the values' type in the parts
 * (FLOAT32 only where pg_gpu_source_dtype says so, and not with a sample)
 */
extern void pg_gpu_read_parts(const PgGpuSource *src, bool want_ids, const uint64 *sample_seed,
							  pggpu_dtype dtype, PgGpuPartConsumer consume, void *arg);
/*
 * src as a read into a data set on backend takes it: a GPU's vectors by
 * rows (the device turns them into columns), else by columns
 */
extern PgGpuSource pg_gpu_source_for(const PgGpuSource *src, pggpu_backend backend);
/*
 * m rows (row-major, src->ncols each, doubles or, into a FLOAT32 set,
 * floats as dtype says; row order[t] the t-th, order NULL: in turn) into
 * data, row i weighing w[i] (w NULL: unweighted)
 */
extern void pg_gpu_push_rows(const PgGpuSource *src, PgGpuData *data, const void *x, pggpu_dtype dtype,
							 const int64 *order, int64 m, const double *w);

/* ---- row keys: the ids of any type (keys.c) ---- */

/*
 * The ids of a call's rows, of the type it returns them as.  An id travels
 * as an int64: of a type passed by value (the integers, date, timestamp...)
 * its Datum; of one passed by reference (uuid, text, numeric, a composite)
 * the offset of its bytes in bytes, where the leader copies them from the
 * parts.  The store grows (repalloc): hold offsets, not pointers, while it
 * may.
 */
typedef struct PgGpuKeys
{
	Oid			type;			/* INT8OID for the bigint ids of an integer column */
	int16		typlen;
	bool		typbyval;
	char		typalign;
	char	   *bytes;			/* in cxt, the context current at init */
	Size		used;
	Size		cap;
	MemoryContext cxt;
} PgGpuKeys;

/* an empty store of ids of type (a base type) */
extern void pg_gpu_keys_init(PgGpuKeys *keys, Oid type);
/* the int64 that stands for key in keys (its bytes copied in where by reference) */
extern int64 pg_gpu_keys_add(PgGpuKeys *keys, Datum key);
/* the id as the result's value (pointing into keys where by reference) */
static inline Datum
pg_gpu_keys_datum(const PgGpuKeys *keys, int64 id)
{
	return keys == NULL || keys->typbyval ? (Datum) id : PointerGetDatum(keys->bytes + id);
}
/* a part's id as a Datum (pointing into the part where by reference) */
static inline Datum
pg_gpu_part_key(const PgGpuPart *part, int64 id)
{
	return part->keylen == 0 ? (Datum) id : PointerGetDatum(part->keys + id);
}
/* a part's n ids from ids into out, as keys' */
extern void pg_gpu_keys_take(PgGpuKeys *keys, const PgGpuPart *part, const int64 *ids, int64 n,
							 int64 *out);
/* the bytes a row's id costs in memory where it is held (8, and its bytes: an estimate) */
extern double pg_gpu_key_bytes(const PgGpuSource *src);
/* whether an id column of (base) type suits ids returned as keytype (see pg_gpu_resolve_source) */
extern bool pg_gpu_key_fits(Oid type, Oid keytype);
/* ERROR (42804): id column idcol of src (named, or its primary key) is not of keytype */
pg_noreturn extern void pg_gpu_key_mismatch(const PgGpuSource *src, TupleDesc td, int idcol, Oid keytype,
											bool named);
/* the id_type of a keyed call (its argument n): its base type, checked */
extern Oid	pg_gpu_key_type_arg(FunctionCallInfo fcinfo, int n);
/*
 * fn called with count (1 or 2) arguments from at (a keyed overload's id
 * types) left out, so that the keyed functions share the others' argument
 * positions, and the id types' base types (InvalidOid past count)
 */
typedef Datum (*PgGpuKeyedFn) (FunctionCallInfo fcinfo, const Oid *keytypes);
extern Datum pg_gpu_call_keyed(FunctionCallInfo fcinfo, int at, int count, PgGpuKeyedFn fn);

/* ---- the k-means functions' arguments (kmeans_args.c) ---- */

/* a fit's settings, from the arguments */
typedef struct FitSettings
{
	pggpu_kmeans_params p;		/* k is set per fit */
	pggpu_metric metric;
	bool		standard;		/* scale => 'standard' */
	const char *init;			/* its name, for the model */
	int64		sample;			/* sample => m: the rows fit on (0: every row) */
} FitSettings;

/* ERROR (22004) where argument n is NULL */
extern void pg_gpu_require_arg(FunctionCallInfo fcinfo, int n, const char *name);
/* a two-dimensional float8 array of rows x cols (-1: any), finite, row-major */
extern double *pg_gpu_matrix_arg(ArrayType *a, const char *name, int rows, int cols, int *rows_out);
/* metric => 'euclidean' or 'cosine', or with inner_product 'inner_product' (argument n) */
extern pggpu_metric pg_gpu_metric_arg(FunctionCallInfo fcinfo, int n, bool inner_product);
/* ERROR where a row of m (k x d) is zero (cosine) */
extern void pg_gpu_no_zero_rows(const double *m, int k, int d, const char *name);
/* sample => m (argument n, where the function has it); 0 when NULL */
extern int64 pg_gpu_sample_arg(FunctionCallInfo fcinfo, int n);
/* ERROR where a sample (> 0) holds fewer than k rows */
extern void pg_gpu_check_sample(int64 sample, int k);
/* a fit's settings from the arguments at these positions (n_init, scale: where the function has them) */
extern void pg_gpu_parse_settings(FunctionCallInfo fcinfo, int a_max_iter, int a_tol, int a_init,
								  int a_seed, int a_metric, int a_n_init, int a_scale,
								  FitSettings *fs);
/* algorithm => 'lloyd' or 'hierarchical' (argument n, where the function has it), into fs->p */
extern void pg_gpu_algorithm_arg(FunctionCallInfo fcinfo, int n, FitSettings *fs);
/* k between 1 and the usable rows (rows NULL: k alone) */
extern void pg_gpu_check_k(int k, const PgGpuRows *rows);

/* ---- the rows' weights (weights.c) ---- */

/*
 * weight_column (argument n, where the function has it; n < 0: none) into
 * src (resolved already, for a fit on sample rows: pg_gpu_resolve_sample's):
 * the rows' weights, else a geometry column's M (pg_gpu_resolve_weight);
 * where the rows weigh, their memory checked again, a weight a row more
 */
extern void pg_gpu_weight_arg(FunctionCallInfo fcinfo, int n, int64 sample, PgGpuSource *src);
/* whether src's rows weigh (a weight column, or points' M) */
#define PG_GPU_WEIGHTED(src) ((src)->wname != NULL || (src)->mweights)
/*
 * The rows' weights of src (resolved already): weight_column's (a numeric
 * column; ERROR where it is none, 42703 or 42804), else, for a column of
 * points whose first has M, the points' M
 */
extern void pg_gpu_resolve_weight(PgGpuSource *src, text *weight_column);
/*
 * a weighted spec's weight of the row in slot into *w: false where the row
 * cannot be used (NULL, NaN, infinite); a negative weight is an ERROR
 * (22023); a point's M where the spec weighs by M (m: NaN where the point
 * has none: 1)
 */
extern bool pg_gpu_slot_weight(const PgGpuRowSpec *spec, TupleTableSlot *slot, double m, double *w);

/* ---- sample => m, and every row labelled a chunk at a time (sample.c) ---- */

/*
 * The rows of a fit on a sample: m of src's usable rows drawn by seed
 * (pggpu_sample: by content, the same rows whatever order they are read
 * in) into data in the sample's order; rows: the sample's count and the
 * unusable rows; returns the usable rows read.
 */
extern int64 pg_gpu_read_sample(const PgGpuSource *src, PgGpuData *data, int64 m, uint64 seed,
								PgGpuRows *rows);

/*
 * each row's id (as the result's value: pg_gpu_keys_datum, valid during the
 * call), cluster (1..k; 0: an unusable row, NULL cluster) and distance to it
 */
typedef void (*PgGpuLabelFn) (void *arg, Datum key, int32 cluster, double distance);

/*
 * Every row of src (with ids) labelled by the k centroids (the rows scaled
 * by mean and std first where given), a chunk of rows at a time through a
 * data set of one share, never all held; *inertia: the sum of the rows'
 * squared distances (as compared).
 */
extern void pg_gpu_label_rows(const PgGpuSource *src, pggpu_metric metric, const double *mean,
							  const double *std, const double *centroids, int k,
							  PgGpuLabelFn emit, void *arg, double *inertia);

/*
 * each row's id (as PgGpuLabelFn's), then the rank (1..n) of one of its n
 * nearest clusters, the cluster (1..k) and the distance to it; rank 0: an
 * unusable row (one call, cluster and distance NULL)
 */
typedef void (*PgGpuNearestFn) (void *arg, Datum key, int rank, int32 cluster, double distance);

/* as pg_gpu_label_rows, each row's n nearest of the k centroids out (gpu_kmeans_transform) */
extern void pg_gpu_transform_rows(const PgGpuSource *src, pggpu_metric metric, const double *mean,
								  const double *std, const double *centroids, int k, int n,
								  PgGpuNearestFn emit, void *arg);

typedef struct PgGpuPartReceiver
{
	DestReceiver pub;
	const PgGpuRowSpec *spec;
	PgGpuPart	part;
	PgGpuPartConsumer consume;
	void	   *arg;
	MemoryContext rowcxt;		/* reset with each part */
} PgGpuPartReceiver;

extern void pg_gpu_part_receiver_init(PgGpuPartReceiver *r, const PgGpuRowSpec *spec,
									  PgGpuPartConsumer consume, void *arg);
/* hands over the last part and frees what the receiver holds */
extern void pg_gpu_part_receiver_finish(PgGpuPartReceiver *r);

/* bytes of a part buffer */
#define PG_GPU_PART_BYTES (256 * 1024)

/* ---- gpu_matmul's matrix tables (matrix_table.c) ---- */

typedef struct PgGpuMatTable
{
	const char *arg;			/* the argument naming its columns: "a_columns", "b_columns", "columns" */
	Oid			relid;
	char	   *relname;
	char	   *qualname;
	bool		sparse;
	int			ncols;			/* 2 (dense) or 3 (sparse) */
	char	   *names[3];		/* dense: id, vector; sparse: row, col, value */
	int			att[3];			/* their attribute indexes */
	Oid			types[3];		/* base types; for the vector, its element */
	double		expected_rows;
	/* after reading: the shape (sparse: largest indices, maybe widened) */
	int64		rows;
	int64		cols;
	double	   *data;			/* dense: rows x cols, in a workspace buffer */
	/* sparse entries */
	int64		nnz;
	int64	   *ri;
	int64	   *ci;
	double	   *v;
} PgGpuMatTable;

/* checks relid as operand arg ("a", "b"), its columns named by names or found */
extern void pg_gpu_mat_resolve(Oid relid, ArrayType *names, const char *arg, PgGpuMatTable *t);
/* reads a dense table into workspace buffer which, in row id order (ids 1..m) */
extern void pg_gpu_mat_read_dense(PgGpuMatTable *t, PgGpuMatmul *w, int which);
extern void pg_gpu_mat_read_sparse(PgGpuMatTable *t);
/* a sparse table's entries into a zeroed rows x cols workspace buffer */
extern void pg_gpu_mat_densify(PgGpuMatTable *t, PgGpuMatmul *w, int which);

/* dense rows as read, with their ids (of one table, or of a node's shards) */
typedef struct PgGpuDenseRows
{
	PgGpuMatmul *w;
	int			which;			/* the workspace buffer they are read into */
	MemoryContext cxt;			/* where ids live */
	double		expected_rows;
	int64		len;			/* elements per row, -1 before the first */
	int64		first_id;
	int64		rows;
	int64		cap;
	int64	   *ids;
	double	   *data;			/* rows x len */
	const PgGpuRowSpec *spec;	/* of the table being read */
} PgGpuDenseRows;

extern void pg_gpu_mat_rows_init(PgGpuDenseRows *r, PgGpuMatmul *w, int which, double expected_rows);
extern void pg_gpu_mat_rows_read(PgGpuDenseRows *r, const PgGpuMatTable *t);

/* citus_matmul.c: a (dense, distributed by Citus) multiplied on its nodes */
typedef struct PgGpuMatNodes PgGpuMatNodes;

extern PgGpuMatNodes *pg_gpu_matmul_nodes_load(const PgGpuMatTable *a);
extern void pg_gpu_matmul_nodes_shape(PgGpuMatNodes *mn, PgGpuMatTable *a);
extern void pg_gpu_matmul_nodes_product(PgGpuMatNodes *mn, const PgGpuMatTable *a, const double *b,
										int64 k, int64 n, double *c);

/* a zeroed bitmap of nbits bits, in CurrentMemoryContext */
static inline bits8 *
pg_gpu_bits_alloc(int64 nbits)
{
	return MemoryContextAllocExtended(CurrentMemoryContext, (Size) (nbits + 7) / 8,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

static inline bool
pg_gpu_bit_get(const bits8 *bits, int64 i)
{
	return (bits[i >> 3] >> (i & 7)) & 1;
}

static inline void
pg_gpu_bit_set(bits8 *bits, int64 i)
{
	bits[i >> 3] |= 1 << (i & 7);
}

#endif							/* PG_GPU_H */
