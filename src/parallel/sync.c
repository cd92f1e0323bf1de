#include "parallel/sync.h"

#include <string.h>

int dt_sync_create(dt_sync *s, const dt_sync_kind *kind, const dt_sync_setup *setup,
                   dt_error *err) {
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->setup = *setup;
    return kind->create ? kind->create(s, err) : 0;
}

void dt_sync_destroy(dt_sync *s) {
    if (s->kind && s->kind->destroy) s->kind->destroy(s);
    s->impl = NULL;
}

void dt_sync_step_begin(dt_sync *s, int epoch, dt_step_comm *c) {
    if (s->kind->step_begin) s->kind->step_begin(s, epoch, c);
}

void dt_sync_after_backward(dt_sync *s, dt_step_comm *c) {
    if (s->kind->after_backward) s->kind->after_backward(s, c);
}

void dt_sync_update(dt_sync *s, dt_step_comm *c) {
    if (s->kind->update) s->kind->update(s, c);
}

void dt_sync_epoch_end(dt_sync *s, int epoch) {
    if (s->kind->epoch_end) s->kind->epoch_end(s, epoch);
}

int dt_sync_finish(dt_sync *s, dt_runlog *log, int *params_replaced, dt_error *err) {
    *params_replaced = 0;
    return s->kind->finish ? s->kind->finish(s, log, params_replaced, err) : 0;
}

void dt_sync_describe(const dt_sync *s, dt_epoch_record *er) {
    er->allreduce_auto[0] = er->bucket_auto[0] = 0;
    if (s->kind && s->kind->describe) s->kind->describe(s, er);
}

int dt_sync_collect(dt_sync *s, dt_error *err) {
    return s->kind->collect ? s->kind->collect(s, err) : 0;
}
