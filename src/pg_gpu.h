/*
 * pg_gpu.h - declarations shared by the PostgreSQL side (src/).  Includes the
 * compute layer's plain-C header, never CUDA's.
 */
#ifndef PG_GPU_H
#define PG_GPU_H

#include "postgres.h"

#include "tcop/dest.h"
#include "utils/array.h"
#include "utils/relcache.h"

#include "pg_gpu_compute.h"

/* ---- settings (pg_gpu.c) ---- */

typedef enum PgGpuDeviceSetting
{
	PG_GPU_DEVICE_AUTO,
	PG_GPU_DEVICE_GPU,
	PG_GPU_DEVICE_CPU
} PgGpuDeviceSetting;

extern int	pg_gpu_device;
extern bool pg_gpu_allow_tf32;
extern int	pg_gpu_matmul_gpu_memory;	/* MB, 0 = what is free */
extern int	pg_gpu_max_memory;	/* MB a call's data may take, 0 = no limit */

/* errors (53400) when a call's data would take more than pg_gpu.max_memory */
extern void pg_gpu_check_memory(double bytes, const char *what, const char *detail_fmt,...)
			pg_attribute_printf(3, 4);

/* the backend pg_gpu.device selects now (may ERROR, may NOTICE once) */
extern pggpu_backend pg_gpu_choose_backend(void);

/* ereport(ERROR) for a failed compute call */
extern void pg_gpu_raise(const pggpu_error *err) pg_attribute_noreturn();

/* CHECK_FOR_INTERRUPTS for the compute layer's callback */
extern void pg_gpu_check_interrupts(void *arg);

/*
 * A data set whose device and pinned memory are freed when the memory context
 * it was opened in goes away: on success, ERROR and cancel alike.
 */
typedef struct PgGpuData
{
	pggpu_data *ds;
	MemoryContextCallback cb;
} PgGpuData;

extern PgGpuData *pg_gpu_data_open(pggpu_backend backend, int d, int64 expected_rows);
extern void pg_gpu_data_close(PgGpuData *data);

/*
 * A matrix-product workspace freed with the memory context given (callers
 * cache one for a whole query in fn_mcxt).  In auto mode, a GPU that cannot
 * run products (no cuBLAS) falls back to the CPU with a NOTICE.
 */
typedef struct PgGpuMatmul
{
	pggpu_matmul *mm;
	MemoryContextCallback cb;
	Size		bytes[3];		/* what each host buffer was asked to hold */
} PgGpuMatmul;

extern PgGpuMatmul *pg_gpu_matmul_open(pggpu_backend backend, MemoryContext cxt);
extern void *pg_gpu_matmul_buffer(PgGpuMatmul *w, int which, Size bytes, Size keep);

/* ---- reading relations (read.c) ---- */

typedef struct PgGpuSource
{
	Oid			relid;
	char	   *relname;		/* for messages */
	char	   *qualname;		/* quoted, schema-qualified */
	int			ncols;
	char	  **colnames;
	Oid		   *coltypes;		/* base types */
	char	   *idname;			/* NULL when no id column */
	Oid			idtype;
	double		expected_rows;	/* planner-style estimate, 0 if unknown */
} PgGpuSource;

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

extern void pg_gpu_resolve_source(Oid relid, ArrayType *columns, text *id_column,
								  bool id_required, PgGpuSource *src);

typedef struct PgGpuRows
{
	int64		nvalid;			/* rows pushed to the data set */
	int64		ninvalid;		/* rows with NULL / NaN / Infinity */
	int64	   *ids;			/* nvalid ids, in data-set order (if wanted) */
	int64	   *invalid_ids;	/* ninvalid ids (if wanted) */
} PgGpuRows;

extern void pg_gpu_read_source(const PgGpuSource *src, pggpu_data *ds,
							   bool want_ids, PgGpuRows *rows);

#endif							/* PG_GPU_H */
