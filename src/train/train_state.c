#include "dtrain/train_state.h"

#include <string.h>

#include "dtrain/backend.h"
#include "dtrain/checkpoint.h"
#include "dtrain/zoo.h"

/* Builds, allocates and initialises; the weights in init_path (if any) come last so
 * that they replace the seeded ones. */
static int build(dt_model *m, const dt_model_spec *spec, int max_batch, uint64_t seed,
                 dt_error *err) {
    if (dt_zoo_build(m, spec, err) || dt_model_alloc(m, max_batch, err)) return -1;
    dt_model_init_params(m, seed);
    return 0;
}

int dt_train_build_model(dt_model *m, const dt_model_spec *spec, int max_batch, uint64_t seed,
                         const char *init_path, dt_error *err) {
    memset(m, 0, sizeof *m);
    if (build(m, spec, max_batch, seed, err) ||
        (init_path && dt_checkpoint_load(m, NULL, init_path, err))) {
        dt_model_free(m);
        return -1;
    }
    return 0;
}

int dt_train_model_spec(dt_model_spec *spec, const char *model, int width, const dt_dataset *ds,
                        dt_error *err) {
    if (dt_zoo_spec_for_data(spec, model, ds->c, ds->h, ds->w, ds->classes, ds->name, err))
        return -1;
    if (width > 0) spec->width = width;
    return 0;
}

int dt_train_open_data(dt_dataset *ds, const char *model, const char *data, int train,
                       long max_samples, dt_error *err) {
    dt_model_spec spec;
    if (dt_zoo_spec_of(&spec, model, err)) return -1;
    if (dt_dataset_open(ds, data, train, err)) return -1;
    if (dt_train_model_spec(&spec, model, 0, ds, err)) {
        dt_dataset_close(ds);
        return -1;
    }
    if (max_samples > 0 && max_samples < ds->size) ds->size = (int)max_samples;
    return 0;
}

int dt_train_state_init(dt_train_state *s, const dt_model_spec *spec, int max_batch, uint64_t seed,
                        const char *init_path, float lr, float momentum, float weight_decay,
                        dt_error *err) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    if (build(&s->model, spec, max_batch, seed, err) ||
        dt_sgd_init(&s->opt, s->model.n_params, lr, momentum, weight_decay, err) ||
        (init_path && dt_checkpoint_load(&s->model, NULL, init_path, err))) {
        dt_train_state_free(s);
        return -1;
    }
    return 0;
}

void dt_train_state_free(dt_train_state *s) {
    dt_model_free(&s->model);
    dt_sgd_free(&s->opt);
}
