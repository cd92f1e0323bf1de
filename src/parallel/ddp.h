/* Synchronous data-parallel SGD, as PyTorch DistributedDataParallel: the gradient
 * buffer is cut into buckets (--bucket-mb, default 25) from its end, i.e. in reverse
 * layer order, the order backward produces them; a bucket may end inside a tensor.
 * With overlap, a communication thread all-reduces each bucket as soon as backward has
 * written all of it, while backward goes on; without, all buckets go after backward.
 * Gradients are averaged (sum / world size); with a 16-bit comm_dtype they travel
 * rounded to it (allreduce.h). BatchNorm running statistics stay per
 * rank (Goyal et al.): only parameters' gradients are exchanged.
 *
 * The model's params and grads are the only buffers touched (offset ranges). */
#ifndef DTRAIN_DDP_H
#define DTRAIN_DDP_H

#include "dtrain/model.h"
#include "dtrain/world.h"
#include "metrics/trace.h"
#include "parallel/allreduce.h"

typedef struct dt_ddp dt_ddp;

typedef struct dt_comm_stats {
    double t_comm;         /* time spent all-reducing this step's buckets */
    double t_comm_exposed; /* time the step waited for them after backward */
    long long bytes_sent;
} dt_comm_stats;

/* The bucket size when none is given, in MiB (PyTorch DDP's bucket_cap_mb). */
#define DT_DDP_BUCKET_MB_DEFAULT 25.0

/* Hooks itself into m's backward (m->on_grads_ready). bucket_mb: > 0 that size, 0 the
 * default, < 0 auto: measured over the first steps among 1, 4, 25 and 100 MiB (those
 * that cut the buffer differently), the same choice on every rank (ddp.c). */
int dt_ddp_create(dt_ddp **ddp, const dt_world *w, dt_model *m, dt_allreduce_algo algo,
                  dt_comm_dtype dtype, double bucket_mb, int overlap, dt_error *err);
void dt_ddp_destroy(dt_ddp *ddp);
/* The all-reduce that runs, and for --allreduce auto why (dt_allreduce.used). */
const char *dt_ddp_allreduce_used(const dt_ddp *ddp);
/* --allreduce auto: what it measured and chose per bucket size (dt_allreduce_auto_report);
 * call between steps. */
void dt_ddp_allreduce_report(const dt_ddp *ddp, char *out, size_t size);

/* Rank 0's parameters and buffers to every rank (before training). */
void dt_ddp_broadcast_model(dt_ddp *ddp);
/* Before backward: no bucket is ready. */
void dt_ddp_begin_step(dt_ddp *ddp);
/* After backward: every bucket all-reduced and averaged. */
void dt_ddp_finish_step(dt_ddp *ddp, dt_comm_stats *stats);
int dt_ddp_bucket_count(const dt_ddp *ddp);
/* Each bucket's all-reduce into trace's comm track from now on (NULL: none). */
void dt_ddp_set_trace(dt_ddp *ddp, dt_trace *trace);
/* --bucket-mb auto: each candidate's median step and the choice, e.g. "1 MiB (43)
 * 512.3 ms, 4 MiB (11) 498.2 ms, ... -> 4 MiB (11 buckets, after 140 steps)"; "" for a
 * fixed size. Call between steps. */
void dt_ddp_bucket_report(const dt_ddp *ddp, char *out, size_t size);

/* The bucket plan, without MPI (the simulator uses it too): floats per bucket for
 * --bucket-mb (at least 1), how many buckets n_params makes, and bucket b's range of
 * the gradient buffer (b = 0 is the buffer's last range: backward writes it first). */
size_t dt_ddp_bucket_floats(double bucket_mb);
int dt_ddp_bucket_total(size_t n_params, size_t per);
void dt_ddp_bucket_range(size_t n_params, size_t per, int b, size_t *begin, size_t *count);

#endif
