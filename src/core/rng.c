#include "core/rng.h"

#include <math.h>

/* splitmix64's finaliser: a bijective mixer with good avalanche. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

dt_rng dt_rng_make(uint64_t seed, uint64_t stream) {
    dt_rng r = {seed, stream, 0};
    return r;
}

uint64_t dt_rng_next_u64(dt_rng *rng) {
    uint64_t key = mix64(rng->seed * 0x9e3779b97f4a7c15ULL + mix64(rng->stream + 1));
    return mix64(key ^ (rng->counter++ * 0xd1b54a32d192ed03ULL));
}

float dt_rng_uniform(dt_rng *rng) {
    return (float)(dt_rng_next_u64(rng) >> 40) * (1.0f / 16777216.0f);
}

uint32_t dt_rng_below(dt_rng *rng, uint32_t n) {
    /* Lemire's multiply-shift; the bias (< n / 2^32) is irrelevant at our sizes. */
    return (uint32_t)(((dt_rng_next_u64(rng) >> 32) * (uint64_t)n) >> 32);
}

float dt_rng_normal(dt_rng *rng) {
    double u1 = ((double)(dt_rng_next_u64(rng) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(dt_rng_next_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
