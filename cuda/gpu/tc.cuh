/*
 * tc.cuh - nearest-centroid assignment on tensor cores, exact (tc_scan.cu,
 * tc_resident.cu, tc_assign.cu; how: tc_common.cuh).
 *
 * Labels and squared distances are exactly those of the CPU reference
 * (cpu/kmeans.c): dist(x, c) = sum over j in order of (x_j - c_j)^2, every
 * operation rounded separately in float64, lowest index on ties.  The
 * tensor cores only approximate the distances (3xTF32 products of shifted
 * float32 data); a rigorous error bound certifies the argmin of each row, and
 * the rows it cannot certify are rescanned exactly in float64.
 *
 * Data X: float64, tiled structure-of-arrays (pggpu_at in compute_internal.h),
 * tiles of 2^log_b rows.  Centroids C: k x d row-major float64.  All pointers
 * are device pointers.  CUDA C++ only.
 */
#ifndef PG_GPU_TC_CUH
#define PG_GPU_TC_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "route.h"
#include "xview.cuh"

/* device workspace bytes a call needs (centroid tiles, fallback list, ...) */
size_t		pggpu_tc_workspace_bytes(int64_t n, int k, int d);

/*
 * labels[i], dist2[i] for every row i < n; *changed += number of rows whose
 * label changed, by the route r planned (pggpu_plan_step: tc_scan or
 * tc_resident, its shapes).  Async on stream; no host sync, no allocation.
 * workspace: pggpu_tc_workspace_bytes(n, k, d) bytes of device memory,
 * 256-byte aligned (cudaMalloc's are), not shared with a call running
 * concurrently.
 */
cudaError_t pggpu_tc_assign(const pggpu_route *r, xview X, int64_t n, int d, int log_b,
							const double *C, int k, void *workspace, int32_t *labels, double *dist2,
							unsigned long long *changed, cudaStream_t stream);

/*
 * The same, and where the route sums in the same pass (tc_resident fused,
 * r->sum PGGPU_SUM_IN_PASS) the centroid update's partial sums: CTA b
 * writes row b of part (k d sums, cluster by cluster, then k counts, all
 * doubles) and block_part[b] (the sum of its rows' dist2), each in a fixed
 * order, so the result does not depend on scheduling.  *parts: the rows
 * written (at most max_parts), 0 when it only labelled.  zero (or NULL):
 * zero_bytes of device memory set to zero before any of the call's kernels
 * runs (where that pass fuses, by its preparation kernel rather than a
 * memset: one launch less between steps); changed may lie in it.
 */
cudaError_t pggpu_tc_assign_update(const pggpu_route *r, xview X, int64_t n, int d, int log_b,
								   const double *C, int k, void *workspace, int32_t *labels,
								   double *dist2, unsigned long long *changed, double *part,
								   double *block_part, int max_parts, int *parts, void *zero,
								   size_t zero_bytes, cudaStream_t stream);

/*
 * A launch's configuration (cudaLaunchKernelEx); dependent: a programmatic
 * dependent launch, whose CTAs may start while the stream's last kernel
 * ends (that kernel's griddepcontrol.launch_dependents, or its end): the
 * kernel waits for that one's results with griddepcontrol.wait.  at: the
 * attribute's storage, alive until the launch.  When the fused pass runs,
 * its preparation, the pass and the partial sums' reduction are chained so.
 */
static inline cudaLaunchConfig_t
pggpu_launch_config(cudaLaunchAttribute *at, unsigned grid, unsigned block, size_t smem,
					cudaStream_t stream, bool dependent)
{
	cudaLaunchConfig_t cfg = {};

	at->id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at->val.programmaticStreamSerializationAllowed = 1;
	cfg.gridDim = dim3(grid);
	cfg.blockDim = dim3(block);
	cfg.dynamicSmemBytes = smem;
	cfg.stream = stream;
	cfg.attrs = at;
	cfg.numAttrs = dependent ? 1 : 0;
	return cfg;
}

#endif							/* PG_GPU_TC_CUH */
