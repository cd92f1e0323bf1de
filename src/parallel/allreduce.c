#include "dtrain/allreduce.h"

#include <mpi.h>
#include <string.h>

enum { RING_TAG = 7301, MAX_CHUNKS = 1024 };

int dt_allreduce_parse(const char *name, dt_allreduce_algo *algo) {
    if (!strcmp(name, "auto"))
        *algo = DT_ALLREDUCE_AUTO;
    else if (!strcmp(name, "mpi"))
        *algo = DT_ALLREDUCE_MPI;
    else if (!strcmp(name, "ring"))
        *algo = DT_ALLREDUCE_RING;
    else
        return -1;
    return 0;
}

const char *dt_allreduce_name(dt_allreduce_algo algo) {
    return algo == DT_ALLREDUCE_MPI ? "mpi" : algo == DT_ALLREDUCE_RING ? "ring" : "auto";
}

int dt_allreduce_init(dt_allreduce *ar, const dt_world *w, dt_allreduce_algo algo,
                      size_t max_floats, dt_error *err) {
    memset(ar, 0, sizeof *ar);
    ar->world = w;
    ar->algo = algo;
    ar->chunk_floats = 1 << 16; /* 256 KiB */
    ar->scratch_floats = max_floats / (size_t)w->size + 1;
    ar->scratch = dt_alloc(sizeof(float) * ar->scratch_floats, "ring all-reduce buffer", err);
    return ar->scratch ? 0 : -1;
}

void dt_allreduce_free(dt_allreduce *ar) {
    dt_free(ar->scratch);
    ar->scratch = NULL;
}

static void segment(size_t n, int parts, int i, size_t *begin, size_t *count) {
    size_t seg = (n + (size_t)parts - 1) / (size_t)parts;
    size_t b = seg * (size_t)i;
    *begin = b < n ? b : n;
    size_t e = b + seg < n ? b + seg : n;
    *count = e > *begin ? e - *begin : 0;
}

/* One ring step: post the receives of rc floats from the left neighbour into recv and
 * the sends of sc floats from send to the right, chunk by chunk; requests go to
 * reqs[0 .. *nr) (receives, in chunk order) and reqs[*nr .. *nr + *ns) (sends). */
static void post_step(dt_allreduce *ar, float *recv, size_t rc, const float *send, size_t sc,
                      size_t chunk, int left, int right, MPI_Request *reqs, int *nr, int *ns) {
    *nr = (int)((rc + chunk - 1) / chunk);
    *ns = (int)((sc + chunk - 1) / chunk);
    for (int k = 0; k < *nr; k++) {
        size_t off = (size_t)k * chunk, len = rc - off < chunk ? rc - off : chunk;
        DT_CHECK_MPI(
            MPI_Irecv(recv + off, (int)len, MPI_FLOAT, left, RING_TAG, ar->world->comm, &reqs[k]));
    }
    for (int k = 0; k < *ns; k++) {
        size_t off = (size_t)k * chunk, len = sc - off < chunk ? sc - off : chunk;
        DT_CHECK_MPI(MPI_Isend(send + off, (int)len, MPI_FLOAT, right, RING_TAG, ar->world->comm,
                               &reqs[*nr + k]));
        ar->bytes_sent += (long long)(len * sizeof(float));
    }
}

static void ring(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    const int p = w->size, r = w->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    MPI_Request reqs[2 * MAX_CHUNKS];
    size_t chunk = ar->chunk_floats;
    size_t max_seg = (n + (size_t)p - 1) / (size_t)p;
    if ((max_seg + chunk - 1) / chunk > MAX_CHUNKS) chunk = (max_seg + MAX_CHUNKS - 1) / MAX_CHUNKS;
    /* Reduce-scatter: after p-1 steps rank r holds the sum of segment (r+1) mod p. */
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r - s + p) % p, &sb, &sc);
        segment(n, p, (r - s - 1 + 2 * p) % p, &rb, &rc);
        int nr, ns;
        post_step(ar, ar->scratch, rc, buf + sb, sc, chunk, left, right, reqs, &nr, &ns);
        for (int k = 0; k < nr; k++) { /* reduce chunk k while later ones travel */
            dt_world_wait_all(w, 1, &reqs[k], left, "ring all-reduce");
            size_t off = (size_t)k * chunk, len = rc - off < chunk ? rc - off : chunk;
            float *dst = buf + rb + off;
            const float *src = ar->scratch + off;
            for (size_t i = 0; i < len; i++) dst[i] += src[i];
        }
        dt_world_wait_all(w, ns, reqs + nr, right, "ring all-reduce");
    }
    /* All-gather: pass the reduced segments around, straight into place. */
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r + 1 - s + p) % p, &sb, &sc);
        segment(n, p, (r - s + p) % p, &rb, &rc);
        int nr, ns;
        post_step(ar, buf + rb, rc, buf + sb, sc, chunk, left, right, reqs, &nr, &ns);
        dt_world_wait_all(w, nr + ns, reqs, left, "ring all-reduce");
    }
}

void dt_allreduce_sum(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    if (w->size == 1 || n == 0) return;
    dt_allreduce_algo algo = ar->algo;
    if (algo == DT_ALLREDUCE_AUTO)
        algo = n * sizeof(float) >= DT_RING_MIN_BYTES ? DT_ALLREDUCE_RING : DT_ALLREDUCE_MPI;
    if (algo == DT_ALLREDUCE_RING) {
        ring(ar, buf, n);
        return;
    }
    MPI_Request req;
    DT_CHECK_MPI(
        MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, ar->world->comm, &req));
    dt_world_wait_all(w, 1, &req, (w->rank + 1) % w->size, "MPI_Allreduce");
    ar->bytes_sent += (long long)(2.0 * (w->size - 1) / w->size * (double)n * sizeof(float));
}
