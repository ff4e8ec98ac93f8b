/*
 * blobs.c - the benchmark data generator (the formula is in blobs.h).
 */
#include "blobs.h"

#include <math.h>

#define GOLDEN 0x9E3779B97F4A7C15ULL

static inline uint64_t
mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static inline double
uniform(uint64_t base, int counter)
{
	return ((mix(base + (uint64_t) counter * GOLDEN) >> 11) + 0.5) * 0x1p-53;
}

double
blobs_value(uint64_t seed, int64_t row, int col)
{
	uint64_t	base = mix(seed + (uint64_t) row * GOLDEN);
	unsigned	cluster = mix(base) & (BLOBS_CLUSTERS - 1);
	unsigned	digit = (cluster >> (2 * (col % 2))) & 3;
	double		u1 = uniform(base, 2 * col + 1),
				u2 = uniform(base, 2 * col + 2);

	return BLOBS_SPACING * digit + sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void
blobs_fill(uint64_t seed, int64_t row0, int64_t nrows, int d,
		   double *out, int64_t ld)
{
#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < nrows; r++)
		for (int j = 0; j < d; j++)
			out[j * ld + r] = blobs_value(seed, row0 + r, j);
}
