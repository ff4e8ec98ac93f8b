/*
 * half.h - binary16 values (a FLOAT16 set's halves) on the host: exact
 * conversions for the driver and the CPU backend (the GPU converts with
 * CUDA's own).  Plain C; compute_internal.h includes it.
 */
#ifndef PG_GPU_HALF_H
#define PG_GPU_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * binary16 values (a FLOAT16 set's halves, as their bits): a half as a float
 * (exact: every half is a float), and a double rounded to the nearest half
 * (ties to even; exact for a half's own value), for the rows a FLOAT16 set
 * is pushed from as doubles (pggpu_data_push_rows)
 */
static inline float
pggpu_half_to_float(uint16_t h)
{
	uint32_t	sign = (uint32_t) (h & 0x8000) << 16,
				e = (h >> 10) & 0x1f,
				m = h & 0x3ff,
				bits;
	float		f;

	if (e == 0)
	{
		f = ldexpf((float) m, -24);	/* zero or subnormal: m 2^-24 */
		return sign ? -f : f;
	}
	bits = sign | (e == 31 ? 0x7f800000u : (e + 112) << 23) | (m << 13);
	memcpy(&f, &bits, sizeof(f));
	return f;
}

static inline uint16_t
pggpu_half_from_double(double v)
{
	uint16_t	sign = signbit(v) ? 0x8000 : 0;
	double		a = fabs(v),
				m,
				f;
	int			e;

	if (isnan(v))
		return sign | 0x7e00;
	if (a >= 65520.0)			/* past 65504, the largest half, by half a unit or more */
		return sign | 0x7c00;
	if (a < 0x1p-14)			/* subnormal (1024 units: the least normal, whose bits these are) */
		return sign | (uint16_t) nearbyint(a * 0x1p24);
	m = frexp(a, &e);			/* a = m 2^e, m in [1/2, 1) */
	f = nearbyint((2 * m - 1) * 1024);
	if (f == 1024)
		f = 0, e++;
	return sign | (uint16_t) ((e + 14) << 10) | (uint16_t) f;
}

/*
 * halves widened (exact) on the CPU: one by one by a table of every half
 * (filled once a FLOAT16 set is made), or n at a time (F16C where the CPU
 * has it)
 */
extern float pggpu_cpu_half_table[65536];

static inline float
pggpu_cpu_half(uint16_t h)
{
	return pggpu_cpu_half_table[h];
}

void		pggpu_cpu_halves(const uint16_t *h, float *dst, int64_t n);

#ifdef __cplusplus
}
#endif

#endif							/* PG_GPU_HALF_H */
