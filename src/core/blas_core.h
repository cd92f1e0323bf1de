/* OpenBLAS's kernels for this CPU. Debian's OpenBLAS (DYNAMIC_ARCH) picks its kernels
 * from the CPU's model number when it loads. On a CPU newer than the library (0.3.21 does
 * not know Emerald Rapids, family 6 model 207) it falls back to its generic SSE3
 * "Prescott" kernels, 3.5x slower on sgemm there (64.6 against 224.5 GFLOP/s, 2 threads);
 * on an AMD CPU with AVX-512 it takes its AVX2 Zen/Haswell kernels, 2x slower than the
 * SkylakeX ones on this AMD EPYC (220 against 444 GFLOP/s). The library reads
 * OPENBLAS_CORETYPE only at load time, so the fix is to set it from the CPU's
 * instruction-set features and start the program again. */
#ifndef DTRAIN_BLAS_CORE_H
#define DTRAIN_BLAS_CORE_H

/* The kernels OpenBLAS loaded ("SkylakeX", "Haswell", "Prescott", ...). */
const char *dt_blas_core_loaded(void);

/* The OpenBLAS core to ask for: SkylakeX when this CPU has AVX-512 (F, BW, VL, DQ) and
 * the loaded kernels do not use it; Haswell when the loaded one is the generic fallback
 * and the CPU has AVX2 and FMA, or when AVX-512 kernels were loaded and the CPU has
 * none (the CPU as core/cpu_isa sees it: ONEDNN_MAX_CPU_ISA caps it); Sandybridge or
 * Nehalem when the cap is AVX or SSE4.1 and the loaded kernels use AVX2; NULL when the
 * loaded kernels are fine or the user chose them (OPENBLAS_CORETYPE set). */
const char *dt_blas_core_better(void);

/* If dt_blas_core_better() names a core: sets OPENBLAS_CORETYPE and re-executes
 * /proc/self/exe with argv (once: a guard variable stops a loop). Returns only when it did
 * not re-execute; a failed exec prints one warning line and the program goes on with the
 * slow kernels. */
void dt_blas_core_fix(char **argv);

#endif
