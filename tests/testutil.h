/* Helpers shared by the C tests: random fills and error norms. */
#ifndef DTRAIN_TESTUTIL_H
#define DTRAIN_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

void fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi);
/* ||a - b|| / max(||b||, tiny): the norm-wise relative error of a against b. */
double rel_error(const float *a, const float *b, size_t n);
/* Calloc that fails the running test on out-of-memory. */
void *test_alloc(size_t bytes);

#endif
