/*
 * gpu_hog.c - holds all but LEAVE_MB of the GPU's free memory until killed,
 * so tests can check that pg_gpu fails cleanly when the GPU runs out of
 * memory (tests/gpu/gpu_resources, step 4).   usage: gpu_hog LEAVE_MB
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

int
main(int argc, char **argv)
{
	size_t		leave = (size_t) (argc > 1 ? atol(argv[1]) : 64) << 20;
	size_t		fr = 0,
				tot = 0;
	void	   *p = NULL;

	if (cudaMemGetInfo(&fr, &tot) != cudaSuccess || fr <= leave)
	{
		fprintf(stderr, "gpu_hog: no GPU memory to take\n");
		return 1;
	}
	if (cudaMalloc(&p, fr - leave) != cudaSuccess)
	{
		fprintf(stderr, "gpu_hog: cudaMalloc of %zu MB failed\n", (fr - leave) >> 20);
		return 1;
	}
	cudaMemGetInfo(&fr, &tot);
	fprintf(stderr, "gpu_hog: holding GPU memory, %zu MB left free\n", fr >> 20);
	for (;;)
		pause();
}
