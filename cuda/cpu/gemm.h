/*
 * gemm.h - the CPU backend's labelling through OpenBLAS's GEMM (gemm.c):
 * |x - c|^2 = |x|^2 - 2 x.c + |c|^2 over panels of rows, each row's label
 * certified by a rigorous bound or its near-tied centroids measured by the
 * plain loop, so that labels and distances are the plain loop's exactly.
 */
#ifndef PG_GPU_CPU_GEMM_H
#define PG_GPU_CPU_GEMM_H

#include "compute_internal.h"

#define GEMM_PANEL 256			/* rows of a product at most */

typedef struct cpu_gemm
{
	const pggpu_openblas *ob;	/* NULL: the route is off */
	int			panel;			/* rows of a product (a power of 2, 32 .. GEMM_PANEL) */
	int			threads;		/* workspaces */
	double	   *mu;				/* d: the rows' column means */
	double	   *Cc;				/* k x d: the centroids less mu (f32: floats) */
	double	   *cn;				/* k: |Cc|^2 */
	float	   *cnf;			/* k: the same rounded to floats (f32), in cn's room */
	const double *C;			/* k x d: the caller's centroids, kept through the pass (exact distances) */
	double		cmax;			/* max |Cc| */
	double	   *ws;				/* per thread, ws_doubles each: see gemm.c */
	int64_t		ws_doubles;
	bool		f32;			/* the rows are floats: sgemm, on Cc and mu as floats */
} cpu_gemm;

/*
 * Whether the GEMM route should label a pass of k centroids over d columns
 * of doubles or (f32) floats (force: route.h's label forced by the tests,
 * 0: none), and its panel rows
 * given the most work between two polls (squared differences).
 */
bool		cpu_gemm_wanted(int d, int k, bool f32, int force);
int			cpu_gemm_panel_rows(int d, int k, double poll_budget);

/*
 * Workspaces for `threads` threads, panels of `panel` rows, and mu from the
 * rows of ds (the CPU backend's); false when out of memory or OpenBLAS is
 * missing (g->ob NULL: the plain loop labels instead).
 */
bool		cpu_gemm_open(cpu_gemm *g, pggpu_data *ds, int k, int threads, int panel);
void		cpu_gemm_close(cpu_gemm *g);

/* before a pass: the centroids C (k x d) less mu, their norms */
void		cpu_gemm_centroids(cpu_gemm *g, const double *C, int k, int d);

/*
 * Labels `rows` rows (rows <= panel; column j at src + j * b, or src32 +
 * j * b where the rows are floats, the other NULL; whole vectors of 8 rows
 * readable) by the k centroids of the last cpu_gemm_centroids, on thread
 * t's workspace: best[q] (best NULL: not measured) and lab[q] as
 * nearest_block gives them.
 */
void		cpu_gemm_label(const cpu_gemm *g, int t, const double *src, const float *src32, int64_t b,
						   int d, int rows, int k, double *best, int32_t *lab);

/*
 * best[q] := the plain loop's |x_q - C[lab[q]]|^2, q < rows (rows as
 * cpu_gemm_label takes them): what cpu_gemm_label gives in best, apart
 * (best NULL there: a Lloyd step that wants no distances leaves them to
 * this when they are read).  own and out: room for rows rounded up to 8.
 */
void		cpu_gemm_dists(const double *src, const float *src32, int64_t b, int d, int rows,
						   const int32_t *lab, const double *C, double *best, int32_t *own, double *out);

#endif							/* PG_GPU_CPU_GEMM_H */
