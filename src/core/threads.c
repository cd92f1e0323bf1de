#include "core/threads.h"

#include <cblas.h>
#include <omp.h>

void dt_threads_set(int n) {
    if (n < 1) n = 1;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int dt_threads_get(void) {
    return omp_get_max_threads();
}
