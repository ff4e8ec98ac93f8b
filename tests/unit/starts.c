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

/*
 * A data set used again: rows near 1e-300 (held scaled by a power of two),
 * a fit twice, then an assignment to the fit's centroids, then a fit from
 * given centroids near 1e300 times smaller still: each as on a fresh set.
 */
void
test_reuse(void)
{
	dataset		D;
	pggpu_kmeans_params p = {0};
	km_out		a,
				b;
	int			k = 4;
	pggpu_backend be[2] = {PGGPU_BACKEND_CPU, PGGPU_BACKEND_GPU};

	gen_blobs(&D, 3000, 3, k, 20.0, 91);
	for (int64_t e = 0; e < D.n * D.d; e++)
		D.X[e] *= 1e-300;
	km_alloc(&a, D.n, k, D.d);
	km_alloc(&b, D.n, k, D.d);
	p.k = k;
	p.max_iter = 50;
	p.tol = 0;
	p.init = PGGPU_INIT_KMEANSPP;
	p.seed = 3;
	for (int bi = 0; bi < 2; bi++)
	{
		pggpu_data *ds;
		pggpu_error err = {0};
		int32_t    *lab = (int32_t *) xmalloc(sizeof(int32_t) * D.n);
		double	   *dist = (double *) xmalloc(sizeof(double) * D.n);
		double		s = 0;
		bool		same = true;

		set_case("reuse %s", be_name(be[bi]));
		if (be[bi] == PGGPU_BACKEND_GPU && !have_gpu)
		{
			gpu_skipped++;
			free(lab), free(dist);
			continue;
		}
		if (!km_run(be[bi], &D, 0, &p, &a) || (ds = load(be[bi], &D, 0)) == NULL)
		{
			free(lab), free(dist);
			continue;
		}
		fit_set(ds, &p, &b, &err);
		CHECK(b.st == PGGPU_OK, "first fit: %s", err.msg);
		fit_set(ds, &p, &b, &err);
		CHECK(b.st == PGGPU_OK, "second fit on the same set: %s", err.msg);
		cmp_exact("a second fit on the same set vs a fresh one", &a, &b, D.n, k, D.d);
		CHECK(pggpu_assign(ds, b.C, k, lab, dist, &err) == PGGPU_OK, "assign: %s", err.msg);
		for (int64_t i = 0; i < D.n; i++)
		{
			same &= lab[i] == b.labels[i];
			s += dist[i] * dist[i];
		}
		CHECK(same, "assign after two fits: labels differ from the fit's");
		CHECK(fabs(s - b.inertia) <= 1e-9 * b.inertia, "assign after two fits: sum of squared distances %.17g, inertia %.17g",
			  s, b.inertia);
		pggpu_data_close(ds);
		free(lab), free(dist);
	}
	km_free(&a);
	km_free(&b);
	data_free(&D);
}
