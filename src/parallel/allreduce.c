#include "dtrain/allreduce.h"

#include <stdio.h>
#include <string.h>

#include "world_mpi.h"

enum { RING_TAG = 7301, MAX_CHUNKS = 1024 };

int dt_allreduce_parse(const char *name, dt_allreduce_algo *algo) {
    if (!strcmp(name, "auto"))
        *algo = DT_ALLREDUCE_AUTO;
    else if (!strcmp(name, "mpi"))
        *algo = DT_ALLREDUCE_MPI;
    else if (!strcmp(name, "ring"))
        *algo = DT_ALLREDUCE_RING;
    else if (!strcmp(name, "shm"))
        *algo = DT_ALLREDUCE_SHM;
    else
        return -1;
    return 0;
}

const char *dt_allreduce_name(dt_allreduce_algo algo) {
    return algo == DT_ALLREDUCE_MPI    ? "mpi"
           : algo == DT_ALLREDUCE_RING ? "ring"
           : algo == DT_ALLREDUCE_SHM  ? "shm"
                                       : "auto";
}

int dt_allreduce_init(dt_allreduce *ar, const dt_world *w, dt_allreduce_algo algo,
                      dt_comm_dtype dtype, size_t max_floats, dt_error *err) {
    memset(ar, 0, sizeof *ar);
    if (dtype != DT_COMM_FP32 && algo == DT_ALLREDUCE_MPI) {
        dt_error_set(err,
                     "--comm-dtype %s needs dtrain's ring all-reduce (--allreduce ring or "
                     "auto): MPI has no %s sum",
                     dt_comm_dtype_name(dtype), dt_comm_dtype_name(dtype));
        return -1;
    }
    if (dtype != DT_COMM_FP32 && algo == DT_ALLREDUCE_SHM) {
        dt_error_set(err,
                     "--comm-dtype %s needs dtrain's ring all-reduce (--allreduce ring or "
                     "auto): shared memory gains nothing from rounding",
                     dt_comm_dtype_name(dtype));
        return -1;
    }
    ar->world = w;
    ar->algo = algo;
    ar->dtype = dtype;
    snprintf(ar->used, sizeof ar->used, "%s",
             dtype != DT_COMM_FP32 ? "ring" : dt_allreduce_name(algo));
    if (dtype == DT_COMM_FP32 && w->size > 1 &&
        (algo == DT_ALLREDUCE_AUTO || algo == DT_ALLREDUCE_SHM)) {
        dt_error why;
        const int rc = dt_shm_allreduce_create(&ar->shm, w, &why);
        if (rc < 0 || (rc > 0 && algo == DT_ALLREDUCE_SHM)) {
            dt_error_set(err, "%s%s", rc > 0 ? "--allreduce shm: " : "", why.msg);
            return -1;
        }
        if (rc == 0) {
            snprintf(ar->used, sizeof ar->used, "shm");
            return 0; /* the ring's buffers are not needed */
        }
        snprintf(ar->used, sizeof ar->used, "ring or mpi by size (no shm: %.60s)", why.msg);
    }
    ar->chunk_floats = 1 << 16; /* 256 KiB */
    ar->scratch_floats = max_floats / (size_t)w->size + 1;
    ar->scratch = dt_alloc(sizeof(float) * ar->scratch_floats, "ring all-reduce buffer", err);
    if (!ar->scratch) return -1;
    if (dtype != DT_COMM_FP32) {
        ar->wire_send = dt_alloc(sizeof(uint16_t) * ar->scratch_floats, "ring send buffer", err);
        ar->wire_recv = ar->wire_send ? dt_alloc(sizeof(uint16_t) * ar->scratch_floats,
                                                 "ring receive buffer", err)
                                      : NULL;
        if (!ar->wire_recv) {
            dt_allreduce_free(ar);
            return -1;
        }
    }
    return 0;
}

void dt_allreduce_free(dt_allreduce *ar) {
    dt_shm_allreduce_destroy(ar->shm);
    ar->shm = NULL;
    dt_free(ar->scratch);
    dt_free(ar->wire_send);
    dt_free(ar->wire_recv);
    ar->scratch = NULL;
    ar->wire_send = ar->wire_recv = NULL;
}

static void segment(size_t n, int parts, int i, size_t *begin, size_t *count) {
    dt_allreduce_segment(n, parts, i, 1, begin, count);
}

/* One ring step: post the receives of rc values from the left neighbour into recv and
 * the sends of sc values from send to the right, chunk by chunk; values are of MPI type
 * `type`, `elem` bytes each; requests go to reqs[0 .. *nr) (receives, in chunk order) and
 * reqs[*nr .. *nr + *ns) (sends). */
static void post_step(dt_allreduce *ar, void *recv, size_t rc, const void *send, size_t sc,
                      size_t chunk, MPI_Datatype type, size_t elem, int left, int right,
                      MPI_Request *reqs, int *nr, int *ns) {
    *nr = (int)((rc + chunk - 1) / chunk);
    *ns = (int)((sc + chunk - 1) / chunk);
    for (int k = 0; k < *nr; k++) {
        size_t off = (size_t)k * chunk, len = rc - off < chunk ? rc - off : chunk;
        DT_CHECK_MPI(MPI_Irecv((char *)recv + off * elem, (int)len, type, left, RING_TAG,
                               dt_world_mpi(ar->world), &reqs[k]));
    }
    for (int k = 0; k < *ns; k++) {
        size_t off = (size_t)k * chunk, len = sc - off < chunk ? sc - off : chunk;
        DT_CHECK_MPI(MPI_Isend((const char *)send + off * elem, (int)len, type, right, RING_TAG,
                               dt_world_mpi(ar->world), &reqs[*nr + k]));
        ar->bytes_sent += (long long)(len * elem);
    }
}

/* The chunk size that keeps a step within MAX_CHUNKS requests. */
static size_t ring_chunk(const dt_allreduce *ar, size_t n) {
    const size_t p = (size_t)ar->world->size, max_seg = (n + p - 1) / p;
    size_t chunk = ar->chunk_floats;
    if ((max_seg + chunk - 1) / chunk > MAX_CHUNKS) chunk = (max_seg + MAX_CHUNKS - 1) / MAX_CHUNKS;
    return chunk;
}

static void ring(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    const int p = w->size, r = w->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    MPI_Request reqs[2 * MAX_CHUNKS];
    const size_t chunk = ring_chunk(ar, n);
    /* Reduce-scatter: after p-1 steps rank r holds the sum of segment (r+1) mod p. */
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r - s + p) % p, &sb, &sc);
        segment(n, p, (r - s - 1 + 2 * p) % p, &rb, &rc);
        int nr, ns;
        post_step(ar, ar->scratch, rc, buf + sb, sc, chunk, MPI_FLOAT, sizeof(float), left, right,
                  reqs, &nr, &ns);
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
        post_step(ar, buf + rb, rc, buf + sb, sc, chunk, MPI_FLOAT, sizeof(float), left, right,
                  reqs, &nr, &ns);
        dt_world_wait_all(w, nr + ns, reqs, left, "ring all-reduce");
    }
}

/* The ring with 16-bit values on the wire (comm_dtype.h): each rank adds what it
 * receives into its fp32 buffer, so sums are fp32 and only transfers round. The owner
 * of each reduced segment rounds it as the others will receive it, so every rank ends
 * with the same values. */
static void ring_wire(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    const int p = w->size, r = w->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    MPI_Request reqs[2 * MAX_CHUNKS];
    const size_t chunk = ring_chunk(ar, n);
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r - s + p) % p, &sb, &sc);
        segment(n, p, (r - s - 1 + 2 * p) % p, &rb, &rc);
        dt_comm_pack(ar->dtype, ar->wire_send, buf + sb, sc);
        int nr, ns;
        post_step(ar, ar->wire_recv, rc, ar->wire_send, sc, chunk, MPI_UINT16_T, sizeof(uint16_t),
                  left, right, reqs, &nr, &ns);
        for (int k = 0; k < nr; k++) {
            dt_world_wait_all(w, 1, &reqs[k], left, "ring all-reduce");
            size_t off = (size_t)k * chunk, len = rc - off < chunk ? rc - off : chunk;
            dt_comm_unpack_add(ar->dtype, buf + rb + off, ar->wire_recv + off, len);
        }
        dt_world_wait_all(w, ns, reqs + nr, right, "ring all-reduce");
    }
    size_t ob, oc;
    segment(n, p, (r + 1) % p, &ob, &oc);
    dt_comm_round(ar->dtype, buf + ob, oc);
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r + 1 - s + p) % p, &sb, &sc);
        segment(n, p, (r - s + p) % p, &rb, &rc);
        dt_comm_pack(ar->dtype, ar->wire_send, buf + sb, sc);
        int nr, ns;
        post_step(ar, ar->wire_recv, rc, ar->wire_send, sc, chunk, MPI_UINT16_T, sizeof(uint16_t),
                  left, right, reqs, &nr, &ns);
        dt_world_wait_all(w, nr + ns, reqs, left, "ring all-reduce");
        dt_comm_unpack(ar->dtype, buf + rb, ar->wire_recv, rc);
    }
}

/* What a ring sends per rank for n floats, 2(P-1)/P n: the bytes counted for shm and
 * mpi, whose own traffic is not seen (a model, so that reports compare across
 * algorithms). */
static long long ring_volume(int p, size_t n) {
    return (long long)(2.0 * (p - 1) / p * (double)n * sizeof(float));
}

void dt_allreduce_sum(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    if (w->size == 1 || n == 0) return;
    if (ar->dtype != DT_COMM_FP32) {
        ring_wire(ar, buf, n); /* init refused mpi with a 16-bit wire */
        return;
    }
    if (ar->shm) {
        dt_shm_allreduce_sum(ar->shm, buf, n);
        ar->bytes_sent += ring_volume(w->size, n);
        return;
    }
    dt_allreduce_algo algo = ar->algo;
    if (algo == DT_ALLREDUCE_AUTO)
        algo = n * sizeof(float) >= DT_RING_MIN_BYTES ? DT_ALLREDUCE_RING : DT_ALLREDUCE_MPI;
    if (algo == DT_ALLREDUCE_RING) {
        ring(ar, buf, n);
        return;
    }
    MPI_Request req;
    DT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                                dt_world_mpi(ar->world), &req));
    dt_world_wait_all(w, 1, &req, (w->rank + 1) % w->size, "MPI_Allreduce");
    ar->bytes_sent += ring_volume(w->size, n);
}
