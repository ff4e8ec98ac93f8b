/*
 * blocks.h - the CPU backend's arithmetic on blocks of RB rows (blocks.c):
 * a row a vector lane, every squared distance rounded as the plain loop
 * over columns rounds it.  Plain C.
 */
#ifndef PG_GPU_CPU_BLOCKS_H
#define PG_GPU_CPU_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * CLONES: a function built for x86-64-v4 (AVX-512), v3 (AVX2) and the
 * baseline, the copy picked when the library loads.  -DPGGPU_NO_CLONES:
 * one copy, for the -march given (tests of each copy).
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PGGPU_NO_CLONES)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

#define RB 32					/* rows in a block; divides every tile */
#define VW 8					/* doubles in a vector */
#define NV (RB / VW)

/*
 * Nearest of the k centroids (lowest index on ties) and its squared distance
 * for each row of a block (column j at x + j * b): best[RB], lab[RB].
 */
void		nearest_block(const double *x, int64_t b, int d, const double *C, int k,
						  double *best_out, int32_t *lab_out);

/*
 * The squared distance d of each row of a block to centroid cc, into the
 * block's w[RB]: w := d (set) or w := min(w, d).
 */
void		point_block(const double *x, int64_t b, int d, const double *cc, double *w, bool set);

/*
 * The content keys (pggpu_row_key) of a block's rows, into keys[RB]; false,
 * with keys untouched, where a value is subnormal (its exponent is frexp's:
 * the caller takes those rows one at a time).
 */
bool		keys_block(const double *x, int64_t b, int d, uint64_t *keys);

#endif							/* PG_GPU_CPU_BLOCKS_H */
