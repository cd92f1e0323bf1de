/* Parameter-server training (TensorFlow's parameter servers, MXNet's kvstore): ranks
 * 0..P-1 are servers holding contiguous shards of the flat parameter buffer (split
 * evenly by bytes) and the optimizer state of their shard; the other W ranks are
 * workers that pull parameters, compute gradients on their data shard and push them.
 *   sync   a server averages `replicas` gradients computed on its current version,
 *          applies them and bumps the version; later gradients for older versions
 *          are dropped and counted (SyncReplicasOptimizer);
 *   async  every gradient is applied on arrival; staleness = server version - the
 *          version the gradient was computed on;
 *   ssp    as async, but a worker's pull waits while it is more than `staleness`
 *          steps ahead of the slowest worker (Ho et al. 2013). */
#ifndef DTRAIN_PS_H
#define DTRAIN_PS_H

#include <stddef.h>

#include "dtrain/error.h"
#include "dtrain/lr_schedule.h"
#include "dtrain/model.h"
#include "dtrain/sgd.h"
#include "dtrain/world.h"
#include "parallel/comm_dtype.h"

/* Message tags of the protocol between workers and servers. */
enum {
    DT_PS_TAG_PULL = 11,
    DT_PS_TAG_VERSION = 12,
    DT_PS_TAG_PARAMS = 13,
    DT_PS_TAG_PUSH = 14,
    DT_PS_TAG_GRADS = 15,
    DT_PS_TAG_DONE = 16,
    DT_PS_TAG_STATS = 17,
    DT_PS_TAG_STATE_REQ = 18, /* worker -> server: send your shard's state (checkpoint) */
    DT_PS_TAG_STATE = 19,     /* server -> worker: version, optimizer steps */
    DT_PS_TAG_STATE_PARAMS = 20,
    DT_PS_TAG_STATE_MOMENTUM = 21,
    /* a worker enters a long phase (evaluation); its next message ends it. 30: clear of
     * the state tags above */
    DT_PS_TAG_BUSY = 30,
};

typedef enum dt_ps_mode { DT_PS_NONE, DT_PS_SYNC, DT_PS_ASYNC, DT_PS_SSP } dt_ps_mode;

enum { DT_PS_STALENESS_BINS = 16 };

typedef struct dt_ps_config {
    dt_ps_mode mode;
    int servers, replicas, staleness;
    dt_comm_dtype comm_dtype; /* of the gradients workers push (pulls stay fp32) */
} dt_ps_config;

enum { DT_PS_MAX_EPOCHS = 64 };

typedef struct dt_ps_server_stats {
    long updates, applied, dropped;
    long staleness_hist[DT_PS_STALENESS_BINS]; /* last bin: >= bins-1 */
    /* the same per epoch of the pushing worker (epochs past the last row go there) */
    long epoch_hist[DT_PS_MAX_EPOCHS][DT_PS_STALENESS_BINS];
    long epoch_dropped[DT_PS_MAX_EPOCHS];
    double busy_s;
    long long bytes_in, bytes_out;
    long max_clock_gap; /* ssp: largest (fastest - slowest) clock seen at a served pull */
} dt_ps_server_stats;

int dt_ps_parse_mode(const char *name, dt_ps_mode *mode);
const char *dt_ps_mode_name(dt_ps_mode mode);

/* The shard of server s: params[*offset .. *offset + *count). */
void dt_ps_shard(size_t n_params, int servers, int s, size_t *offset, size_t *count);

/* The statistics a server sends to the first worker at the end (DT_PS_TAG_STATS). */
void dt_ps_send_stats(const dt_world *job, const dt_ps_server_stats *st, int to);
void dt_ps_recv_stats(const dt_world *job, dt_ps_server_stats *st, int from);

/* Worker side. */
typedef struct dt_ps_client {
    const dt_world *world;
    dt_ps_config cfg;
    dt_model *model;
    long versions[64]; /* version of each server's shard last pulled */
    long clock;        /* steps completed */
    int epoch;         /* sent with every push, for per-epoch staleness histograms */
    long long bytes_sent, bytes_received;
    double last_wait_s; /* of the last pull: time until every server answered */
    uint16_t *wire;     /* the gradient packed for a 16-bit comm_dtype, else NULL */
} dt_ps_client;

int dt_ps_client_init(dt_ps_client *c, const dt_world *w, const dt_ps_config *cfg, dt_model *m,
                      dt_error *err);
void dt_ps_client_free(dt_ps_client *c);
/* Fetches every shard into m->params (waits as the mode says). */
void dt_ps_pull(dt_ps_client *c);
/* Sends m->grads, shard by shard, tagged with the versions pulled; advances the clock. */
void dt_ps_push(dt_ps_client *c);
/* For a checkpoint: every server's shard of the parameters and momentum into params
 * and velocity (full-size buffers), its version and optimizer steps (those of server
 * 0 into *version, *opt_steps). Served when a pull would be (ps-sync: once every
 * worker's gradient of this step is applied), so the state is that of a step
 * boundary. */
void dt_ps_fetch_state(dt_ps_client *c, float *params, float *velocity, long *version,
                       long *opt_steps);

/* Tells every server this worker enters a phase in which it sends nothing for a while
 * (evaluation): the servers do not count that silence as a failure until the worker's
 * next message. A worker that dies meanwhile is noticed by mpirun; one that hangs, by
 * its peers' timeouts in the evaluation's reductions. */
void dt_ps_busy(dt_ps_client *c);
/* Tells every server this worker is finished. */
void dt_ps_done(dt_ps_client *c);

#endif
