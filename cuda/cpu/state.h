/*
 * cpu/state.h - the CPU backend's state of a data set (kmeans.c's passes,
 * rows.c's storage): its rows, the k-means state, the parts a pass is cut
 * into.  Plain C, for the files of cuda/cpu/ only.
 */
#ifndef PG_GPU_CPU_STATE_H
#define PG_GPU_CPU_STATE_H

#include "compute_internal.h"
#include "gemm.h"

typedef struct __attribute__((aligned(64))) part
{
	int64_t		start;			/* rows start .. end - 1 */
	int64_t		end;
	int64_t		pos;			/* the next row of this pass */
	int64_t		changed;		/* Lloyd pass */
	double		inertia;
	double	   *sums;			/* k x d, or NULL: the state's own */
	int64_t    *cnt;			/* k, or NULL: the state's own */
	double	   *mass;			/* k (weighted sets), or NULL: the state's own */
	double		best;			/* k-means++ draw: best key, its block */
	int64_t		row;
} part;

typedef struct cpu_state
{
	double	   *X;				/* tiled SoA, cap_tiles tiles (NULL while Xf or Xh holds them) */
	float	   *Xf;				/* the same as floats, while held so (narrow_held, not f16_held), else NULL */
	uint16_t   *Xh;				/* the same as halves, while ds->f16_held, else NULL */
	int64_t		cap_tiles;
	bool		finished;		/* a partial batch was pushed */
	/* k-means state */
	double	   *C;
	int32_t    *labels;
	double	   *dist2;
	/*
	 * a step that wanted no distances left them (stale): dist2 is measured
	 * from labels and C_lab (k x d, that step's centroids) when next read
	 */
	bool		stale;
	double	   *C_lab;
	double	   *sums;
	int64_t    *cnt;
	double	   *mass;			/* the clusters' weights (k): the counts where the set has none */
	double	   *xb;				/* a block of rows a thread, column j at
								 * xb + t * RB * d + j * RB */
	float	   *xw;				/* halves held: a panel of rows widened a thread (GEMM_PANEL x d floats,
								 * column j at xw + t * GEMM_PANEL * d + j * GEMM_PANEL), else NULL */
	int			nthreads;		/* threads xb has room for */
	int			nparts;
	part	   *parts;
	double	   *part_sums;		/* nparts x (k x d, padded to a cache line) */
	int64_t    *part_cnt;		/* nparts x (k, padded to a cache line) */
	double	   *part_mass;		/* likewise, where the set has weights */
	/* the PGGPU_PICK_SAMPLE draw km_point made in its pass (see next_key) */
	bool		drawn;
	uint64_t	drawn_key;
	int64_t		drawn_row;
	double	   *rw;				/* km_weights (the rows' weights), or NULL */
	cpu_gemm	gemm;			/* the GEMM route (gemm.ob NULL: off) */
	bool		gemm_tried;		/* since km_begin */
	bool		summed;			/* sums and cnt are the last step's (it updated) */
} cpu_state;

#define ST(ds) ((cpu_state *) (ds)->impl)
#define TILE(ds) ((int64_t) 1 << (ds)->log_b)

/* the error of a failed allocation */
static inline pggpu_status
oom(pggpu_error *err, int64_t bytes)
{
	return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY,
					  "out of host memory allocating %.1f MB", bytes / 1048576.0);
}

/* cpu/rows.c: the rows' storage, the ops of pggpu_cpu_ops that hold them */
pggpu_status pggpu_cpu_open(pggpu_data *ds, int gpu_index, int64_t expected_rows, pggpu_error *err);
pggpu_status pggpu_cpu_dtype(pggpu_data *ds, pggpu_error *err);
pggpu_status pggpu_cpu_widen(pggpu_data *ds, pggpu_error *err);
void	   *pggpu_cpu_batch(pggpu_data *ds);
pggpu_status pggpu_cpu_push(pggpu_data *ds, int64_t nrows, bool by_rows, pggpu_error *err);

#endif							/* PG_GPU_CPU_STATE_H */
