/* The model zoo, a table of models (src/nn/zoo.c): architectures of the common PyTorch references,
 * with their state_dict names. The ResNets take a width, their stem's channels (64 for resnet18,
 * 16 for the CIFAR resnet20..56 of He et al.; smaller widths give the same architecture
 * narrower, for fast tests). */
#ifndef DTRAIN_ZOO_H
#define DTRAIN_ZOO_H

#include "dtrain/error.h"
#include "dtrain/model.h"

typedef struct dt_model_spec {
    const char *name; /* a row of the zoo: dt_zoo_names() */
    int in_c, in_h, in_w;
    int classes;
    int width; /* a ResNet's stem channels; 0 = the model's default */
} dt_model_spec;

/* Builds the graph of a named model (not yet allocated). Returns 0, or -1 with an
 * error naming the model if it is unknown. */
int dt_zoo_build(dt_model *m, const dt_model_spec *spec, dt_error *err);

/* Fills the input shape a model expects by default (1x28x28 for the MNIST models,
 * 3x32x32 for resnet18); -1 if unknown. */
int dt_zoo_default_spec(dt_model_spec *spec, const char *name);

/* Comma-separated list of model names, for help and errors. */
const char *dt_zoo_names(void);
/* The models one by one: dt_zoo_name(i) for i < dt_zoo_count() (NULL outside). */
int dt_zoo_count(void);
const char *dt_zoo_name(int i);

#endif
