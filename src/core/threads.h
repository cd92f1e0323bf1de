/* One knob for all parallelism: OpenMP loops and OpenBLAS (OpenMP build) share it. */
#ifndef DTRAIN_THREADS_H
#define DTRAIN_THREADS_H

void dt_threads_set(int n);
int dt_threads_get(void);

#endif
