/*
 * route.h - how one Lloyd step (or one assignment) runs on the GPU, decided
 * in one place: pggpu_plan_step() takes (n, k, d, the GPU's shape, the
 * caller's forcing) and returns a plain struct saying which pass labels the
 * rows, which one sums them, with which tile shapes, and why.  The GPU
 * backend (gpu/dataset.cu, gpu/step.cu, gpu/tc_assign.cu) only carries the
 * plan out; the README's "How it works" lists the routes as a table.
 *
 * Plain C, no CUDA: built in every build, so the unit tests check the
 * table on machines without a GPU too.  Adding a route: a row of the
 * planner (route.c) and the kernel file that runs it.
 */
#ifndef PG_GPU_ROUTE_H
#define PG_GPU_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* the pass that labels the rows */
typedef enum pggpu_label_route
{
	PGGPU_LABEL_AUTO = 0,		/* (forcing: none) */
	PGGPU_LABEL_LLOYD,			/* CUDA cores, float64, centroids in shared memory (gpu/lloyd.cu) */
	PGGPU_LABEL_TC_SCAN,		/* tensor cores, centroid tiles through shared memory (gpu/tc_scan.cu) */
	PGGPU_LABEL_TC_RESIDENT,	/* tensor cores, centroids resident in registers (gpu/tc_resident.cu) */
	PGGPU_LABEL_GEMM,			/* float64 product (cuBLAS), near ties measured exactly (gpu/gemm_assign.cu) */
	PGGPU_LABEL_GEMM_F16		/* FP16 product (cuBLAS) of centred copies, uncertain rows measured exactly (same file) */
} pggpu_label_route;

/* the pass that sums the rows into their clusters (an update step) */
typedef enum pggpu_sum_route
{
	PGGPU_SUM_IN_PASS = 1,		/* the labelling pass sums too (lloyd_kernel, or tc_resident's fused kernel) */
	PGGPU_SUM_OWNED,			/* owned_update_kernel from the labels (gpu/owned_update.cu) */
	PGGPU_SUM_LABELS_GIVEN,		/* lloyd_kernel with the labels given, sums as `mode` */
	PGGPU_SUM_SORTED			/* sorted_update_kernel from the labels: chunks sorted by label, a global
								 * atomic a run of a label (gpu/sorted_update.cu; mode UPD_GLOBAL) */
} pggpu_sum_route;

/* how lloyd_kernel adds rows to their clusters' sums (gpu/lloyd.cu) */
enum
{
	UPD_NONE = 0,				/* assignment only */
	UPD_PRIVATE,				/* per-(warp, lane group) sums in shared memory, then per block */
	UPD_SHARED,					/* per-block sums in shared memory, atomics */
	UPD_GLOBAL					/* global atomics (large k x d) */
};

/* sorted_update_kernel's shared memory a block, at most (gpu/sorted_update.cu asserts it) */
#define PGGPU_SORTED_SMEM (153 * 1024)

/* lloyd_kernel's DR for "labels given" (DR > 0: rows in registers, 0: centroid tiles) */
#define PGGPU_LABELS_GIVEN (-1)

/* what the plan needs to know of the GPU */
typedef struct pggpu_gpu_shape
{
	int			sm_count;
	int			smem_optin;		/* shared memory a block may opt in to, bytes */
} pggpu_gpu_shape;

/* a test's forcing (zeros: none); tests pass it, the library never sets it */
typedef struct pggpu_route_force
{
	pggpu_label_route label;	/* the labelling pass, where it can run */
	int			tc_mt;			/* tc_scan's shape (m-tiles a warp, warps a CTA): lab builds only */
	int			tc_nw;
	int			tc_prec;		/* tensor cores: 1 tf32, 2 f16 */
	bool		no_fuse;		/* tc_resident: label only, sum apart */
	bool		pp_warps;		/* k-means++ steps by pp_step_kernel however few the rows */
} pggpu_route_force;

typedef struct pggpu_route
{
	pggpu_label_route label;
	pggpu_sum_route sum;
	bool		ranged;			/* labelled first in ranges of tiles, the interrupt callback between */
	int			part_rows;		/* rows of per-block partial sums the update needs (0: none) */

	/* lloyd_kernel: labelling (label LLOYD, or ranged) and summing (sum IN_PASS or LABELS_GIVEN) */
	int			tk;				/* centroids a tile: 8 or 32 */
	int			dr_label;		/* rows in registers for d <= 32 (4, 8, 16, 32), 0: centroid tiles */
	int			dr;				/* the summing pass's: dr_label, or PGGPU_LABELS_GIVEN */
	int			mode;			/* UPD_* of the summing pass */
	int			lg_lanes;		/* UPD_PRIVATE: log2 of a lane group */
	size_t		smem;			/* the summing pass's dynamic shared memory */
	size_t		label_smem;		/* lloyd_kernel labelling only (assignment, ranged) */

	/* the tensor cores */
	bool		f16;			/* m16n8k16 on halves, else m16n8k8 on tf32 (3xTF32 both) */
	int			ks;				/* k-steps of the mma for d */
	int			mt,				/* tc_scan: m-tiles a warp, warps a CTA */
				nw;
	int			nm,				/* tc_resident: m-tiles of centroids, K segment, warps (label only, fused) */
				dw,
				nw_res,
				nw_fused;

	pggpu_gpu_shape dev;		/* the GPU planned for */
	const char *why;			/* a phrase: the figure or limit that chose the route */
} pggpu_route;

/* threads of lloyd_kernel's and owned_update_kernel's blocks (gpu/common.cuh's BLOCK) */
#define PGGPU_GPU_BLOCK 256

/*
 * The plan of a fit's (or an assignment's) steps on n rows, k centroids, d
 * columns: range_work > 0: passes over more than that many squared
 * differences (n k d; a sixteenth on the tensor cores) label in ranges of
 * tiles (0: never); max_grid: most blocks a Lloyd pass launches; f16_ok:
 * the product for d > 32 may be the one on halves (the user's setting;
 * false: the float64 one).
 */
void		pggpu_plan_step(int64_t n, int k, int d, const pggpu_gpu_shape *dev, double range_work,
							int max_grid, bool f16_ok, const pggpu_route_force *force, pggpu_route *out);

/*
 * A weighted set's plan (the rows' weights, km_weights): the planned
 * labelling, its labels given (the CUDA cores' in ranges), then the sums
 * sorted by label, each value times its row's weight
 * (gpu/sorted_update.cu); sum 0 where the GPU's blocks cannot take that
 * kernel's shared memory (the step then fails)
 */
void		pggpu_plan_weighted(pggpu_route *r);

/* a product labels (gemm, gemm_f16) */
#define PGGPU_LABEL_IS_GEMM(l) ((l) == PGGPU_LABEL_GEMM || (l) == PGGPU_LABEL_GEMM_F16)

/* owned_update_kernel's chunk (2^lg rows) and dynamic shared memory */
int			pggpu_owned_lg_r(int d);
size_t		pggpu_owned_smem(int k, int d);

/* the plan in one line (for DEBUG2 and the tests): buf, of size len */
const char *pggpu_route_describe(const pggpu_route *r, char *buf, size_t len);

/* the route's name (lloyd, tc_scan, tc_resident) */
const char *pggpu_label_route_name(pggpu_label_route label);

#ifdef __cplusplus
}
#endif

#endif							/* PG_GPU_ROUTE_H */
