#include "core/cpu_isa.h"

#include <oneapi/dnnl/dnnl.h>

/* oneDNN's ISA values are feature masks: a larger ISA holds every bit of the smaller
 * ones it implies (avx512_core_amx holds avx512_core_bf16's, which holds VNNI's); its
 * "all" (0, no x86 JIT) offers none. */
static int offers(dnnl_cpu_isa_t isa) {
    const unsigned have = (unsigned)dnnl_get_effective_cpu_isa();
    return (have & (unsigned)isa) == (unsigned)isa;
}

int dt_cpu_has_avx2(void) {
    return offers(dnnl_cpu_isa_avx2);
}

int dt_cpu_has_avx512(void) {
    return offers(dnnl_cpu_isa_avx512_core);
}

int dt_cpu_has_bf16(void) {
    return offers(dnnl_cpu_isa_avx512_core_bf16);
}

int dt_cpu_has_int8_vnni(void) {
    return offers(dnnl_cpu_isa_avx512_core_vnni);
}

const char *dt_cpu_isa_name(void) {
    /* widest first: the first the effective ISA holds names it */
    static const struct {
        dnnl_cpu_isa_t isa;
        const char *name;
    } names[] = {
        {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
        {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
        {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
        {dnnl_cpu_isa_avx512_core, "avx512_core"},
        {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
        {dnnl_cpu_isa_avx2, "avx2"},
        {dnnl_cpu_isa_avx, "avx"},
        {dnnl_cpu_isa_sse41, "sse41"},
    };
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
        if (offers(names[i].isa)) return names[i].name;
    return "baseline";
}
