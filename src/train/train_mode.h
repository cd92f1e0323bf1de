/* Training modes: one table row each. A row names the synchronisation strategy its
 * workers use (sync.h), the one used when a single worker trains alone, and the role
 * of the ranks that do not train (parameter servers), if any. Adding a mode = one
 * strategy file + one row here. */
#ifndef DTRAIN_TRAIN_MODE_H
#define DTRAIN_TRAIN_MODE_H

#include "dtrain/error.h"
#include "dtrain/world.h"
#include "parallel/sync.h"
#include "train/trainer.h"

typedef struct dt_train_mode {
    const char *name;            /* --mode, and the run record's "mode" */
    dt_ps_mode ps_mode;          /* the parameter-server variant; DT_PS_NONE otherwise */
    const dt_sync_kind *workers; /* strategy of the training ranks */
    const dt_sync_kind *alone;   /* strategy of one process alone; NULL: needs several */
    int has_servers;             /* ranks 0..cfg->ps.servers-1 run `serve` instead */
    int (*serve)(const dt_train_config *cfg, const dt_world *job, dt_error *err);
} dt_train_mode;

/* The row of a --mode name; NULL if unknown. */
const dt_train_mode *dt_train_mode_find(const char *name);
/* "allreduce, ps-sync, ps-async, ssp": for help texts and errors. */
const char *dt_train_mode_names(void);
/* The row cfg asks for: cfg->mode by name, else the parameter-server mode in
 * cfg->ps.mode, else allreduce. */
int dt_train_mode_of(const dt_train_config *cfg, const dt_train_mode **mode, dt_error *err);

/* The server role of the parameter-server modes: builds the model and optimizer as
 * the workers do (same seed, so the same initial weights) and serves its shard. */
int dt_ps_server_role(const dt_train_config *cfg, const dt_world *job, dt_error *err);

#endif
