#include "unit.h"

/* ---- several starts (n_init) ---------------------------------------------------- */

/*
 * n_init starts keep the one of least inertia: never worse than the first
 * start alone (which is n_init = 1's fit, seed for seed), strictly better
 * somewhere on data with local minima, the same on every thread count and
 * (with a GPU) on the GPU; given centroids with n_init > 1 are refused.
 */
void
test_n_init(void)
{
	dataset		D;
	pggpu_kmeans_params p = {0};
	km_out		one,
				many,
				o;
	int			k = 10,
				better = 0;

	gen_blobs(&D, 20000, 4, 13, 2.0, 77);
	km_alloc(&one, D.n, k, D.d);
	km_alloc(&many, D.n, k, D.d);
	km_alloc(&o, D.n, k, D.d);
	p.k = k;
	p.max_iter = 100;
	p.tol = 0;
	for (int init = PGGPU_INIT_KMEANSPP; init <= PGGPU_INIT_PARALLEL; init++)
	{
		if (init == PGGPU_INIT_GIVEN)
			continue;
		p.init = (pggpu_init) init;
		for (uint64_t seed = 1; seed <= 4; seed++)
		{
			set_case("n_init %s seed %llu", init_name(p.init), (unsigned long long) seed);
			p.seed = seed;
			p.n_init = 1;
			if (!km_run(PGGPU_BACKEND_CPU, &D, 0, &p, &one))
				continue;
			p.n_init = 5;
			if (!km_run(PGGPU_BACKEND_CPU, &D, 0, &p, &many))
				continue;
			check_sane("n_init 5", &D, k, p.init, &many, D.n);
			CHECK(many.inertia <= one.inertia, "5 starts: inertia %.17g above the first start's %.17g",
				  many.inertia, one.inertia);
			better += many.inertia < one.inertia;
			if (have_gpu && km_run(PGGPU_BACKEND_GPU, &D, 0, &p, &o))
				cmp_km("n_init 5, cpu vs gpu", &many, &o, D.n, k, D.d, 1e-9);
		}
	}
	set_case("n_init");
	CHECK(better > 0, "5 starts never found a lower inertia than one, in 12 fits with local minima");
	if (!have_gpu)
		gpu_skipped++;

	/* given centroids: nothing to start again from */
	{
		pggpu_data *ds = load(PGGPU_BACKEND_CPU, &D, 0);
		pggpu_kmeans_result r = {0};
		pggpu_error err = {0};

		p.init = PGGPU_INIT_GIVEN;
		p.init_centroids = D.X;
		p.n_init = 2;
		r.centroids = one.C;
		r.sizes = one.sizes;
		CHECK(ds && pggpu_kmeans(ds, &p, &r, &err) == PGGPU_ERR_INVALID,
			  "n_init 2 with given centroids: not refused (%s)", err.msg);
		pggpu_data_close(ds);
	}
	km_free(&one);
	km_free(&many);
	km_free(&o);
	data_free(&D);
}
