/* One worker: the update is plain SGD on the local gradients. */
#include "parallel/sync.h"

static void local_update(dt_sync *s, dt_step_comm *c) {
    (void)c;
    dt_sgd_step(s->setup.opt, s->setup.model->params, s->setup.model->grads);
}

const dt_sync_kind dt_sync_local = {.name = "single", .update = local_update};
