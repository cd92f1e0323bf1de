#define _GNU_SOURCE
#include "study/linkmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/outfile.h"
#include "study/scaling.h"
#include "study/sweep.h"

double dt_link_ring_seconds(const dt_link *link, int procs, double bytes, int buckets) {
    if (procs < 2) return 0;
    const double alpha = 2.0 * (procs - 1) * link->delay_s;
    return buckets * alpha + 2.0 * (procs - 1) / procs * bytes * 8 / link->rate_bps;
}

int dt_link_buckets(double params, double bucket_mb) {
    double per = floor(bucket_mb * 1048576.0 / 4); /* floats per bucket, as ddp.c */
    if (per < 1) per = 1;
    return (int)ceil(params / per);
}

/* One line of the table: a config of one bucket size. */
typedef struct link_line {
    double bucket_mb;
    const dt_scale_row *r;
    int buckets;
    double model_comm; /* per epoch, s */
} link_line;

static const char *fig(char *buf, size_t size, double v, const char *fmt) {
    if (v < 0 || !isfinite(v))
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, fmt, v);
    return buf;
}

static void write_md(FILE *f, const link_line *l, int n, const dt_link *link, int rph,
                     const char *where, const dt_scale_study *first, double bytes) {
    fprintf(f, "# Communication over the link: %s\n\n", where);
    fprintf(f,
            "Model %s, %.0f parameters, %.0f bytes all-reduced per step. Ring model per "
            "step: T = k alpha + 2(P-1)/P n/B with k buckets, n bytes, B = %.3g bit/s, "
            "alpha = 2(P-1) d, d = %g us one-way delay%s (packet headers not counted). "
            "Per epoch: iterations x T. Measured: the 2nd epoch's training time, compute "
            "and all-reduce time (means over ranks; the all-reduce overlaps backward, the "
            "exposed part is what the epoch waited).%s\n\n",
            first->model, first->params, bytes, link->rate_bps, link->delay_s * 1e6,
            link->delay_s > 0 ? "" : " (none)",
            rph > 1 ? " Consecutive ranks share a host: a config on one host crosses no "
                      "link (no model), and the ring crosses each used host's link once "
                      "per direction."
                    : "");
    fprintf(f, "| bucket MiB | procs | batch/proc | buckets | steps | epoch s | compute s | "
               "all-reduce s | exposed s | ring model s | measured/model | compute + model "
               "s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const dt_scale_row *r = l[i].r;
        char a[32], b[32], c[32], d[32], e[32], g[32], h[32];
        double ratio = l[i].model_comm > 0 && r->t_comm > 0 ? r->t_comm / l[i].model_comm : -1;
        double sum = r->t_compute >= 0 ? r->t_compute + l[i].model_comm : -1;
        fprintf(f, "| %g | %d | %d | %d | %ld | %s%s | %s | %s | %s | %s | %s | %s |\n",
                l[i].bucket_mb, r->procs, r->batch, l[i].buckets, r->iterations,
                fig(a, sizeof a, r->t_train, "%.2f"), r->busy ? " busy" : "",
                fig(b, sizeof b, r->t_compute, "%.2f"), fig(c, sizeof c, r->t_comm, "%.2f"),
                fig(d, sizeof d, r->t_comm_exposed, "%.2f"),
                fig(e, sizeof e, r->procs > rph ? l[i].model_comm : -1, "%.2f"),
                fig(g, sizeof g, ratio, "%.2f"), fig(h, sizeof h, sum, "%.2f"));
    }
    int busy = 0;
    for (int i = 0; i < n; i++) busy |= l[i].r->busy;
    if (busy)
        fprintf(f,
                "\n`busy`: other processes used over %.2f cores during the run (see each "
                "study's report).\n",
                DT_SCALE_BUSY_CORES);
}

int dt_link_report(const char *const *dirs, const double *bucket_mb, int n, const dt_link *link,
                   int ranks_per_host, const char *where, const char *out_dir, FILE *print,
                   dt_error *err) {
    if (ranks_per_host < 1) ranks_per_host = 1;
    dt_scale_study *studies = calloc((size_t)n, sizeof *studies);
    link_line *lines = NULL;
    int n_lines = 0, cap = 0, rc = -1;
    if (!studies) return dt_error_set(err, "out of memory for the link table");
    double bytes = 0;
    for (int s = 0; s < n; s++) {
        if (dt_scale_read_dir(dirs[s], &studies[s], err)) goto done;
        const dt_scale_study *st = &studies[s];
        const int elem = st->comm_dtype[0] && strcmp(st->comm_dtype, "fp32") ? 2 : 4;
        bytes = st->params * elem;
        for (int i = 0; i < st->n_rows; i++) {
            if (st->rows[i].lr_scaled) continue;
            if (n_lines == cap) {
                cap = cap ? 2 * cap : 32;
                link_line *grown = realloc(lines, (size_t)cap * sizeof *lines);
                if (!grown) {
                    dt_error_set(err, "out of memory for the link table");
                    goto done;
                }
                lines = grown;
            }
            link_line *l = &lines[n_lines++];
            l->bucket_mb = bucket_mb[s];
            l->r = &st->rows[i];
            l->buckets = dt_link_buckets(st->params, bucket_mb[s]);
            /* ranks on one host cross no link */
            l->model_comm =
                l->r->procs <= ranks_per_host
                    ? 0
                    : l->r->iterations * dt_link_ring_seconds(link, l->r->procs, bytes, l->buckets);
        }
    }
    if (n_lines == 0) {
        dt_error_set(err, "no finished runs in %s to compare with the link model", dirs[0]);
        goto done;
    }
    char path[4200];
    dt_outfile out;
    snprintf(path, sizeof path, "%s/network.md", out_dir);
    if (dt_outfile_open(&out, path, err)) goto done;
    write_md(out.f, lines, n_lines, link, ranks_per_host, where, &studies[0], bytes);
    if (dt_outfile_commit(&out, err)) goto done;
    snprintf(path, sizeof path, "%s/network.csv", out_dir);
    if (dt_outfile_open(&out, path, err)) goto done;
    fprintf(out.f, "model,bucket_mb,procs,batch_size,buckets,iterations,rate_bps,delay_s,"
                   "t_train,t_compute,t_comm,t_comm_exposed,model_comm,busy\n");
    for (int i = 0; i < n_lines; i++) {
        const dt_scale_row *r = lines[i].r;
        fprintf(out.f, "%s,%g,%d,%d,%d,%ld,%.0f,%g,%.6f,%.6f,%.6f,%.6f,%.6f,%d\n", studies[0].model,
                lines[i].bucket_mb, r->procs, r->batch, lines[i].buckets, r->iterations,
                link->rate_bps, link->delay_s, r->t_train, r->t_compute, r->t_comm,
                r->t_comm_exposed, lines[i].model_comm, r->busy);
    }
    if (dt_outfile_commit(&out, err)) goto done;
    if (print) write_md(print, lines, n_lines, link, ranks_per_host, where, &studies[0], bytes);
    rc = 0;
done:
    for (int s = 0; s < n; s++) dt_scale_free(&studies[s]);
    free(studies);
    free(lines);
    return rc;
}
