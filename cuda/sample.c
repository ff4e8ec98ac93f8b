/*
 * sample.c - a uniform sample of m rows drawn by their content, kept while
 * the rows stream past (a fit's `sample => m`: the rows the iterations run
 * on, without holding the table).
 *
 * Each row gets a priority, a hash of its values and the seed; the sample
 * is the m rows of least priority (ties: by value), which is m rows drawn
 * uniformly without replacement, and the same rows in the same order
 * whatever order they are offered in, by one reader or several: one answer
 * wherever the rows are.  The running m best live in a max-heap, so a row
 * costs its hash and one comparison with the heap's top; only the rows that
 * enter it (about m (1 + ln(n / m)) of n) are copied.
 *
 * Host only, on both backends: the rows pass through the host anyway.
 */
#include "compute_internal.h"

#include <stdlib.h>
#include <string.h>

struct pggpu_sample
{
	int			d;
	int64_t		m;				/* rows wanted */
	uint64_t	salt;			/* from the seed */
	int64_t		offered;
	int64_t		kept;			/* rows in the heap (<= m) */
	int64_t		cap;			/* slots allocated */
	double	   *rows;			/* cap x d, row-major, by slot */
	uint64_t   *prio;			/* by slot */
	int64_t    *heap;			/* heap[pos] = slot; max-heap of (prio, values) */
	uint64_t   *hash;			/* an offer's priorities (scratch) */
	int64_t		hash_cap;
	bool		sorted;			/* heap[] holds the result's order */
};

/*
 * A row's priority: a hash of its values (0 and -0 alike: they are equal)
 * and their places, mixed with the seed.  Summed column by column, so an
 * offer of column-major rows streams through memory.
 */
static inline uint64_t
value_term(double v, int j)
{
	uint64_t	b = 0;

	if (v != 0)
		memcpy(&b, &v, sizeof(b));
	b += 0x9e3779b97f4a7c15ULL * (uint64_t) (j + 1);
	b ^= b >> 31;
	return b * 0xbf58476d1ce4e5b9ULL;
}

/* <0, 0, >0 as slot a comes before, with, after slot b (priority, then values, then bits) */
static int
compare_slots(const pggpu_sample *s, int64_t a, int64_t b)
{
	const double *x = s->rows + a * s->d;
	const double *y = s->rows + b * s->d;

	if (s->prio[a] != s->prio[b])
		return s->prio[a] < s->prio[b] ? -1 : 1;
	for (int j = 0; j < s->d; j++)
		if (x[j] != y[j])
			return x[j] < y[j] ? -1 : 1;
	return memcmp(x, y, sizeof(double) * s->d);
}

/* the same against a row not yet in a slot: value j at x[j * stride] */
static int
compare_row(const pggpu_sample *s, uint64_t prio, const double *x, int64_t stride, int64_t b)
{
	const double *y = s->rows + b * s->d;

	if (prio != s->prio[b])
		return prio < s->prio[b] ? -1 : 1;
	for (int j = 0; j < s->d; j++)
		if (x[j * stride] != y[j])
			return x[j * stride] < y[j] ? -1 : 1;
	for (int j = 0; j < s->d; j++)
	{
		int			c = memcmp(&x[j * stride], &y[j], sizeof(double));

		if (c != 0)
			return c;
	}
	return 0;
}

static void
sift_down(pggpu_sample *s, int64_t pos, int64_t n)
{
	int64_t    *h = s->heap;

	for (;;)
	{
		int64_t		l = 2 * pos + 1;
		int64_t		big = pos;

		if (l < n && compare_slots(s, h[l], h[big]) > 0)
			big = l;
		if (l + 1 < n && compare_slots(s, h[l + 1], h[big]) > 0)
			big = l + 1;
		if (big == pos)
			return;
		{
			int64_t		t = h[pos];

			h[pos] = h[big];
			h[big] = t;
		}
		pos = big;
	}
}

static void
sift_up(pggpu_sample *s, int64_t pos)
{
	int64_t    *h = s->heap;

	while (pos > 0)
	{
		int64_t		up = (pos - 1) / 2;
		int64_t		t;

		if (compare_slots(s, h[pos], h[up]) <= 0)
			return;
		t = h[pos];
		h[pos] = h[up];
		h[up] = t;
		pos = up;
	}
}

pggpu_status
pggpu_sample_open(pggpu_sample **out, int d, int64_t m, uint64_t seed, pggpu_error *err)
{
	pggpu_sample *s;

	*out = NULL;
	if (d < 1 || m < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a sample needs at least one column and one row");
	s = (pggpu_sample *) calloc(1, sizeof(pggpu_sample));
	if (s == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	s->d = d;
	s->m = m;
	s->salt = pggpu_mix64(seed ^ 0x3c6ef372fe94f82bULL);
	*out = s;
	return PGGPU_OK;
}

/* room for at least want slots (doubling, up to m) */
static pggpu_status
grow(pggpu_sample *s, int64_t want, pggpu_error *err)
{
	int64_t		cap = s->cap ? s->cap : 1024;
	double	   *rows;
	uint64_t   *prio;
	int64_t    *heap;

	while (cap < want)
		cap *= 2;
	if (cap > s->m)
		cap = s->m;
	if (cap <= s->cap)
		return PGGPU_OK;
	if ((uint64_t) cap > SIZE_MAX / sizeof(double) / (uint64_t) s->d)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "a sample of %lld rows of %d values is too large",
						  (long long) s->m, s->d);
	rows = (double *) realloc(s->rows, sizeof(double) * (size_t) cap * s->d);
	if (rows)
		s->rows = rows;
	prio = (uint64_t *) realloc(s->prio, sizeof(uint64_t) * cap);
	if (prio)
		s->prio = prio;
	heap = (int64_t *) realloc(s->heap, sizeof(int64_t) * cap);
	if (heap)
		s->heap = heap;
	if (!rows || !prio || !heap)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a sample of %lld rows",
						  (long long) cap);
	s->cap = cap;
	return PGGPU_OK;
}

pggpu_status
pggpu_sample_offer(pggpu_sample *s, const double *x, int64_t stride, int64_t n, pggpu_error *err)
{
	int			d = s->d;

	if (s->sorted)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "rows offered to a sample already taken");
	if (n <= 0)
		return PGGPU_OK;
	if (n > s->hash_cap)
	{
		uint64_t   *h = (uint64_t *) realloc(s->hash, sizeof(uint64_t) * n);

		if (h == NULL)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		s->hash = h;
		s->hash_cap = n;
	}
	memset(s->hash, 0, sizeof(uint64_t) * n);
	for (int j = 0; j < d; j++)
	{
		const double *col = x + (int64_t) j * stride;

		for (int64_t r = 0; r < n; r++)
			s->hash[r] += value_term(col[r], j);
	}
	for (int64_t r = 0; r < n; r++)
	{
		uint64_t	p = pggpu_mix64(s->hash[r] ^ s->salt);
		const double *row = x + r;
		int64_t		slot;

		if (s->kept == s->m)
		{
			/* the heap's top is the worst kept: a row must come before it */
			slot = s->heap[0];
			if (p > s->prio[slot] ||
				(p == s->prio[slot] && compare_row(s, p, row, stride, slot) >= 0))
				continue;
		}
		else
		{
			if (s->kept == s->cap && grow(s, s->kept + 1, err) != PGGPU_OK)
				return err ? err->code : PGGPU_ERR_HOST_MEMORY;
			slot = s->kept;
		}
		s->prio[slot] = p;
		for (int j = 0; j < d; j++)
			s->rows[slot * d + j] = row[(int64_t) j * stride];
		if (s->kept == s->m)
			sift_down(s, 0, s->kept);
		else
		{
			s->heap[s->kept] = slot;
			sift_up(s, s->kept++);
		}
	}
	s->offered += n;
	return PGGPU_OK;
}

int64_t
pggpu_sample_offered(const pggpu_sample *s)
{
	return s->offered;
}

int64_t
pggpu_sample_result(pggpu_sample *s, const double **rows, const int64_t **order)
{
	/* heapsort: the largest to the end, so heap[] ends ascending */
	if (!s->sorted)
	{
		for (int64_t end = s->kept - 1; end > 0; end--)
		{
			int64_t		t = s->heap[0];

			s->heap[0] = s->heap[end];
			s->heap[end] = t;
			sift_down(s, 0, end);
		}
		s->sorted = true;
	}
	*rows = s->rows;
	*order = s->heap;
	return s->kept;
}

void
pggpu_sample_close(pggpu_sample *s)
{
	if (s == NULL)
		return;
	free(s->rows);
	free(s->prio);
	free(s->heap);
	free(s->hash);
	free(s);
}
