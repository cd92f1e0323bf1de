/* The machine a run ran on, as a report's system table gives it (MLPerf's: the CPU,
 * its count, the memory) and the libraries doing the work (oneDNN, OpenBLAS; Open
 * MPI's comes from the world, parallel/world.h). Read once per run into its record. */
#ifndef DTRAIN_SYSINFO_H
#define DTRAIN_SYSINFO_H

#include <stddef.h>

typedef struct dt_sysinfo {
    char cpu[128];       /* /proc/cpuinfo's model name ("" unknown) */
    int cpus;            /* online CPUs (0 unknown) */
    double memory_gib;   /* MemTotal (0 unknown) */
    char isa[32];        /* what dtrain's kernels use: "avx512_bf16", "avx2", ... */
    char libraries[160]; /* "oneDNN 2.7.3, OpenBLAS 0.3.21 (Haswell)" */
} dt_sysinfo;

void dt_sysinfo_read(dt_sysinfo *s);

#endif
