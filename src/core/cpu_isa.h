/* What this CPU offers dtrain's kernels, decided in one place: oneDNN's effective ISA
 * (dnnl_get_effective_cpu_isa), which is the CPU's instruction sets capped by
 * ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA). One variable then makes the whole process
 * (oneDNN's kernels, dtrain's own AVX-512 loops, the bf16 check, int8's exactness,
 * OpenBLAS's choice of kernels) behave as on a host with only those instructions:
 * ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 machine is a Zen 3 (docs/performance.md). */
#ifndef DTRAIN_CPU_ISA_H
#define DTRAIN_CPU_ISA_H

/* AVX2 and FMA. */
int dt_cpu_has_avx2(void);
/* AVX-512 F, BW, VL and DQ (oneDNN's avx512_core). */
int dt_cpu_has_avx512(void);
/* AVX512-BF16 (or AMX, which implies it): bf16 products at full speed. */
int dt_cpu_has_bf16(void);
/* AVX512-VNNI: oneDNN's int8 kernels sum u8 x s8 products exactly in 32 bits; without
 * it they sum pairs in 16 bits with saturation (vpmaddubsw) and halve the weights of a
 * signed input (docs/quantization.md). */
int dt_cpu_has_int8_vnni(void);
/* oneDNN's name of the effective ISA ("avx512_core_bf16", "avx2", ...), for messages
 * and records. */
const char *dt_cpu_isa_name(void);

#endif
