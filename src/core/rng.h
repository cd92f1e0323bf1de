/* Counter-based random numbers: the value at (seed, stream, counter) is a pure hash,
 * so any tensor or sample can be generated independently and in any order, and runs
 * are reproducible whatever the thread count. */
#ifndef DTRAIN_RNG_H
#define DTRAIN_RNG_H

#include <stdint.h>

typedef struct dt_rng {
    uint64_t seed;
    uint64_t stream;
    uint64_t counter;
} dt_rng;

dt_rng dt_rng_make(uint64_t seed, uint64_t stream);
uint64_t dt_rng_next_u64(dt_rng *rng);
/* Uniform in [0, 1) with 24 random bits (exactly representable as float). */
float dt_rng_uniform(dt_rng *rng);
/* Uniform integer in [0, n). */
uint32_t dt_rng_below(dt_rng *rng, uint32_t n);
/* Standard normal (Box-Muller). */
float dt_rng_normal(dt_rng *rng);

#endif
