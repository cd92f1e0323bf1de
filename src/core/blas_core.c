#include "dtrain/blas_core.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define REEXEC_GUARD "DTRAIN_BLAS_CORE_REEXEC"

const char *dt_blas_core_loaded(void) {
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

const char *dt_blas_core_better(void) {
    const char *chosen = getenv("OPENBLAS_CORETYPE");
    if (chosen && *chosen) return NULL;
    /* Only the generic fallbacks: a core OpenBLAS recognised is its own best choice. */
    const char *loaded = dt_blas_core_loaded();
    if (strcasecmp(loaded, "Prescott") && strcasecmp(loaded, "Core2") &&
        strcasecmp(loaded, "Nehalem") && strcasecmp(loaded, "unknown"))
        return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

void dt_blas_core_fix(char **argv) {
    if (getenv(REEXEC_GUARD)) return;
    const char *core = dt_blas_core_better();
    if (!core) return;
    if (setenv("OPENBLAS_CORETYPE", core, 1) || setenv(REEXEC_GUARD, "1", 1)) {
        fprintf(stderr,
                "dtrain: warning: cannot set OPENBLAS_CORETYPE (%s); OpenBLAS keeps "
                "its generic %s kernels\n",
                strerror(errno), dt_blas_core_loaded());
        return;
    }
    /* The resolved path, not /proc/self/exe itself: the process keeps its name ("dtrain"
     * rather than "exe") in ps, top and pkill. */
    char path[4096];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n > 0 && (size_t)n < sizeof path - 1) {
        path[n] = '\0';
        execv(path, argv);
    } else {
        execv("/proc/self/exe", argv);
    }
    fprintf(stderr,
            "dtrain: warning: cannot restart with OPENBLAS_CORETYPE=%s (%s); OpenBLAS "
            "keeps its generic %s kernels\n",
            core, strerror(errno), dt_blas_core_loaded());
    unsetenv("OPENBLAS_CORETYPE");
}
