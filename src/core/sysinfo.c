#include "core/sysinfo.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpu_isa.h"

/* The value after "key<spaces>:" on the first line of path that starts with key. */
static int proc_value(const char *path, const char *key, char *out, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int found = -1;
    const size_t n = strlen(key);
    while (found < 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n)) continue;
        const char *colon = strchr(line + n, ':');
        if (!colon) continue;
        for (colon++; *colon == ' ' || *colon == '\t';) colon++;
        snprintf(out, size, "%s", colon);
        out[strcspn(out, "\n")] = 0;
        found = 0;
    }
    fclose(f);
    return found;
}

void dt_sysinfo_read(dt_sysinfo *s) {
    memset(s, 0, sizeof *s);
    char model[96] = "", family[16] = "", number[16] = "";
    proc_value("/proc/cpuinfo", "model name", model, sizeof model);
    proc_value("/proc/cpuinfo", "cpu family", family, sizeof family);
    proc_value("/proc/cpuinfo", "model\t", number, sizeof number);
    /* a virtual machine may name only the brand ("AMD EPYC"): family and model tell
     * Zen 3 (25, 1) from Zen 4 (25, 17) */
    char full[192];
    if (model[0] && family[0] && number[0])
        snprintf(full, sizeof full, "%s (family %s, model %s)", model, family, number);
    else
        snprintf(full, sizeof full, "%s", model);
    snprintf(s->cpu, sizeof s->cpu, "%.*s", (int)sizeof s->cpu - 1, full);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->cpus = cpus > 0 ? (int)cpus : 0;
    char mem[64];
    if (proc_value("/proc/meminfo", "MemTotal", mem, sizeof mem) == 0) {
        char *end;
        const double kib = strtod(mem, &end);
        if (end != mem && kib > 0) s->memory_gib = kib / (1024.0 * 1024.0);
    }
    snprintf(s->isa, sizeof s->isa, "%s", dt_cpu_isa_name());
    const dnnl_version_t *v = dnnl_version();
    /* OpenBLAS's config: "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64" */
    char name[32] = "OpenBLAS", version[32] = "?", blas[72];
    const char *config = openblas_get_config();
    if (config) sscanf(config, "%31s %31s", name, version); /* its first two words */
    snprintf(blas, sizeof blas, "%s %s", name, version);
    const char *core = openblas_get_corename();
    snprintf(s->libraries, sizeof s->libraries, "oneDNN %d.%d.%d, %s (%s kernels)", v->major,
             v->minor, v->patch, blas, core ? core : "?");
}
