/*
 * pg_gpu.h - declarations shared by the PostgreSQL side (src/).  Includes the
 * compute layer's plain-C header, never CUDA's.
 */
#ifndef PG_GPU_H
#define PG_GPU_H

#include "postgres.h"

#include "utils/array.h"

#include "pg_gpu_compute.h"

/* ---- settings (pg_gpu.c) ---- */

typedef enum PgGpuDeviceSetting
{
	PG_GPU_DEVICE_AUTO,
	PG_GPU_DEVICE_GPU,
	PG_GPU_DEVICE_CPU
} PgGpuDeviceSetting;

extern int	pg_gpu_device;

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
