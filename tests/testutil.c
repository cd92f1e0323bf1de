#include "testutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "dtrain/rng.h"

void fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi) {
    dt_rng rng = dt_rng_make(seed, 77);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * dt_rng_uniform(&rng);
}

double rel_error(const float *a, const float *b, size_t n) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        diff += d * d;
        ref += (double)b[i] * b[i];
    }
    return sqrt(diff) / fmax(sqrt(ref), 1e-30);
}

void *test_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}
