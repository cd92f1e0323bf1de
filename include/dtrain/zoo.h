/* The model zoo, a table of models (src/nn/zoo.c): architectures of the common PyTorch references,
 * with their state_dict names. The ResNets take a width, their stem's channels (64 for resnet18,
 * 16 for the CIFAR resnet20..56 of He et al.; smaller widths give the same architecture
 * narrower, for fast tests), and so do torchvision's ImageNet models (alexnet, vgg16, vgg16_bn,
 * resnet50, googlenet: their first conv's 64, every layer scaled alike). */
#ifndef DTRAIN_ZOO_H
#define DTRAIN_ZOO_H

#include "dtrain/error.h"
#include "dtrain/lr_schedule.h"
#include "dtrain/model.h"

typedef struct dt_model_spec {
    const char *name; /* a row of the zoo: dt_zoo_names() */
    int in_c, in_h, in_w;
    int classes;
    int width;      /* the first conv's channels (the rest scale alike); 0 = the model's default */
    int no_dropout; /* 1: dropout layers with p = 0 (PyTorch parity fixtures: its random
                       numbers cannot be reproduced, so the references drop nothing) */
    dt_precision precision; /* conv2d's multiply format (fp32 = 0) */
    int reinit;             /* an ONNX model: fresh weights drawn from the seed by the zoo's rules
                               (PyTorch's defaults) instead of the file's initializers */
} dt_model_spec;

/* Builds the graph of a named model (not yet allocated). Returns 0, or -1 with an
 * error naming the model if it is unknown. */
int dt_zoo_build(dt_model *m, const dt_model_spec *spec, dt_error *err);

/* The spec of --model NAME: a zoo row's default (dt_zoo_default_spec), or an ONNX
 * file's shape and classes (NAME ending in .onnx; docs/onnx.md). -1 with the error:
 * an unknown name, or why the file does not import. */
int dt_zoo_spec_of(dt_model_spec *spec, const char *name, dt_error *err);

/* Fills the input shape and classes a model has by default (1x28x28 for the MNIST
 * models, 3x32x32 for the CIFAR ones, both in 10 classes; 3x224x224 in 1000 classes
 * for the ImageNet ones); -1 if unknown. */
int dt_zoo_default_spec(dt_model_spec *spec, const char *name);

/* Input shapes. A model whose layers all follow the input (convolutions, then global
 * or adaptive average pooling) takes the data's shape: a CIFAR ResNet trains on 1x28x28
 * Fashion-MNIST, its conv1 then having one input channel, and the ImageNet models
 * take any size down to their minimum (alexnet 63x63, vgg16 32x32, googlenet 15x15,
 * resnet50 1x1). A model with a linear
 * layer sized for one input (lenet5, lenet_cifar, mlp, logreg; resnet18, whose last
 * pool has a fixed window) takes only its default shape.
 *
 * dt_zoo_fixed_input: NULL if the model takes the data's shape, else why it does not. */
const char *dt_zoo_fixed_input(const char *name);

/* The spec for data of c x h x w images in `classes` classes (0: the model's): the data's
 * shape if the model takes it and its graph builds at that shape, its default shape if
 * that equals the data's. Otherwise -1 with the error "model M takes CxHxW inputs but
 * DATA has CxHxW images (why)" or "model M cannot take the CxHxW images of DATA: ...".
 * width is left 0 (the model's default). */
int dt_zoo_spec_for_data(dt_model_spec *spec, const char *name, int c, int h, int w, int classes,
                         const char *data, dt_error *err);

/* A model's default training recipe: the SGD settings `dtrain train` (scale, bench)
 * takes for the flags not given (dt_train_config_resolve). From the model's published
 * or reference recipe where one exists, else measured here; `source` says which in one
 * line. The batch size stays 128 (per process) for every model. */
typedef struct dt_zoo_recipe {
    float lr, momentum, weight_decay;
    dt_lr_kind schedule;
    const char *source;
} dt_zoo_recipe;

/* The recipe of a named model; NULL if unknown. */
const dt_zoo_recipe *dt_zoo_recipe_of(const char *name);

/* Comma-separated list of model names, for help and errors. */
const char *dt_zoo_names(void);
/* The models one by one: dt_zoo_name(i) for i < dt_zoo_count() (NULL outside). */
int dt_zoo_count(void);
const char *dt_zoo_name(int i);

#endif
