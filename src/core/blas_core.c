#include "core/blas_core.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/cpu_isa.h"

#define REEXEC_GUARD "DTRAIN_BLAS_CORE_REEXEC"

const char *dt_blas_core_loaded(void) {
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

/* Whether OpenBLAS's core `name` has AVX-512 kernels. */
static int core_has_avx512(const char *name) {
    return !strcasecmp(name, "SkylakeX") || !strcasecmp(name, "Cooperlake") ||
           !strcasecmp(name, "SapphireRapids");
}

/* Whether OpenBLAS's core `name` has AVX2 kernels (Zen's are Haswell's). */
static int core_has_avx2(const char *name) {
    return core_has_avx512(name) || !strcasecmp(name, "Haswell") || !strcasecmp(name, "Zen");
}

const char *dt_blas_core_better(void) {
    const char *chosen = getenv("OPENBLAS_CORETYPE");
    if (chosen && *chosen) return NULL;
    const char *loaded = dt_blas_core_loaded();
    /* core/cpu_isa: ONEDNN_MAX_CPU_ISA=AVX2 keeps OpenBLAS on AVX2 kernels too */
    const int avx512 = dt_cpu_has_avx512();
    /* An AVX-512 CPU on AVX2 kernels: OpenBLAS 0.3.21 maps AMD's AVX-512 CPUs to its Zen
     * (= Haswell) kernels, where later releases take the SkylakeX ones (OpenBLAS pull
     * request 4303); on this AMD EPYC sgemm ran 444 against 220 GFLOP/s (2 threads). */
    if (avx512 && !core_has_avx512(loaded)) return "SkylakeX";
    /* Kernels past what the CPU, capped by ONEDNN_MAX_CPU_ISA, has: the best ones within
     * it, so that the cap makes OpenBLAS run as on such a host too (AVX2: Haswell; AVX:
     * Sandybridge; SSE4.1, oneDNN's least: Nehalem) */
    if (!avx512 && core_has_avx512(loaded) && dt_cpu_has_avx2()) return "Haswell";
    if (!dt_cpu_has_avx2() && core_has_avx2(loaded))
        return !strcmp(dt_cpu_isa_name(), "avx") ? "Sandybridge" : "Nehalem";
    /* Otherwise only the generic fallbacks: another core OpenBLAS recognised is its own
     * best choice. */
    if (strcasecmp(loaded, "Prescott") && strcasecmp(loaded, "Core2") &&
        strcasecmp(loaded, "Nehalem") && strcasecmp(loaded, "unknown"))
        return NULL;
    if (dt_cpu_has_avx2()) return "Haswell";
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
