#include "train/train_mode.h"

#include <string.h>

static const dt_train_mode modes[] = {
    {"allreduce", DT_PS_NONE, &dt_sync_allreduce, &dt_sync_local, 0, NULL},
    {"ps-sync", DT_PS_SYNC, &dt_sync_ps_worker, NULL, 1, dt_ps_server_role},
    {"ps-async", DT_PS_ASYNC, &dt_sync_ps_worker, NULL, 1, dt_ps_server_role},
    {"ssp", DT_PS_SSP, &dt_sync_ps_worker, NULL, 1, dt_ps_server_role},
};
enum { N_MODES = sizeof modes / sizeof *modes };

const dt_train_mode *dt_train_mode_find(const char *name) {
    for (int i = 0; i < N_MODES; i++)
        if (!strcmp(modes[i].name, name)) return &modes[i];
    return NULL;
}

const char *dt_train_mode_names(void) {
    return "allreduce, ps-sync, ps-async, ssp";
}

int dt_train_mode_of(const dt_train_config *cfg, const dt_train_mode **mode, dt_error *err) {
    const char *name = cfg->mode                    ? cfg->mode
                       : cfg->ps.mode != DT_PS_NONE ? dt_ps_mode_name(cfg->ps.mode)
                                                    : "allreduce";
    *mode = dt_train_mode_find(name);
    if (!*mode)
        return dt_error_set(err, "unknown mode '%s' (known: %s)", name, dt_train_mode_names());
    return 0;
}
