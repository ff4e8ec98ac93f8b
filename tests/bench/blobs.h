/*
 * blobs.h - the benchmark suite's data: seeded Gaussian blobs, a pure
 * function of (seed, row, column), so every program and every language
 * makes the same numbers (tests/bench/blobs.py is the same formula in
 * numpy and torch; the suite checks that they agree).
 *
 *   base        = mix(seed + row * G)
 *   cluster     = mix(base) & (BLOBS_CLUSTERS - 1)
 *   u(col, s)   = ((mix(base + (2 col + 1 + s) G) >> 11) + 0.5) / 2^53   (s = 0, 1)
 *   value       = BLOBS_SPACING * digit(cluster, col)
 *                 + sqrt(-2 log u(col, 0)) cos(2 pi u(col, 1))
 *   digit(c, j) = (c >> (2 (j % 2))) & 3
 *
 * mix is splitmix64's finaliser, G its increment, all arithmetic modulo
 * 2^64.  The 16 centres lie on a 4 x 4 grid in every pair of columns, at
 * BLOBS_SPACING standard deviations apart: the blobs touch, so Lloyd's
 * algorithm does not converge in a couple of iterations.
 */
#ifndef BLOBS_H
#define BLOBS_H

#include <stdint.h>

#define BLOBS_SEED 20261123
#define BLOBS_CLUSTERS 16
#define BLOBS_SPACING 3.0

/* column col of row row */
double		blobs_value(uint64_t seed, int64_t row, int col);

/*
 * Rows row0 .. row0 + nrows - 1, d columns, structure-of-arrays: column j of
 * row row0 + r at out[j * ld + r].  Uses every core (OpenMP).
 */
void		blobs_fill(uint64_t seed, int64_t row0, int64_t nrows, int d,
					   double *out, int64_t ld);

#endif							/* BLOBS_H */
