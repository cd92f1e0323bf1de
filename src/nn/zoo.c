#include "dtrain/zoo.h"

#include <stdio.h>
#include <string.h>

static void build_logreg(dt_model *m, int x, int classes, int width) {
    (void)width;
    dt_model_linear(m, "linear", dt_model_flatten(m, x), classes);
}

static void build_mlp(dt_model *m, int x, int classes, int width) {
    (void)width;
    x = dt_model_relu(m, dt_model_linear(m, "fc1", dt_model_flatten(m, x), 256));
    x = dt_model_relu(m, dt_model_linear(m, "fc2", x, 256));
    dt_model_linear(m, "fc3", x, classes);
}

/* LeNet-5 for 28x28 inputs: conv1 pads by 2 so that conv2's output is 16x5x5. */
static void build_lenet5(dt_model *m, int x, int classes, int width) {
    (void)width;
    x = dt_model_maxpool2d(m, dt_model_relu(m, dt_model_conv2d(m, "conv1", x, 6, 5, 1, 2, 1)), 2,
                           2);
    x = dt_model_maxpool2d(m, dt_model_relu(m, dt_model_conv2d(m, "conv2", x, 16, 5, 1, 0, 1)), 2,
                           2);
    x = dt_model_relu(m, dt_model_linear(m, "fc1", dt_model_flatten(m, x), 120));
    x = dt_model_relu(m, dt_model_linear(m, "fc2", x, 84));
    dt_model_linear(m, "fc3", x, classes);
}

/* BasicBlock of the CIFAR ResNet: conv3x3-bn-relu-conv3x3-bn, plus the input or a
 * 1x1 conv + bn shortcut when the shape changes, then relu. */
static int basic_block(dt_model *m, const char *prefix, int x, int planes, int stride) {
    char name[80];
    int in_planes = x >= 0 ? m->values[x].c : 0;
    snprintf(name, sizeof name, "%s.conv1", prefix);
    int y = dt_model_conv2d(m, name, x, planes, 3, stride, 1, 0);
    snprintf(name, sizeof name, "%s.bn1", prefix);
    y = dt_model_relu(m, dt_model_batchnorm2d(m, name, y));
    snprintf(name, sizeof name, "%s.conv2", prefix);
    y = dt_model_conv2d(m, name, y, planes, 3, 1, 1, 0);
    snprintf(name, sizeof name, "%s.bn2", prefix);
    y = dt_model_batchnorm2d(m, name, y);
    int shortcut = x;
    if (stride != 1 || in_planes != planes) {
        snprintf(name, sizeof name, "%s.shortcut.0", prefix);
        shortcut = dt_model_conv2d(m, name, x, planes, 1, stride, 0, 0);
        snprintf(name, sizeof name, "%s.shortcut.1", prefix);
        shortcut = dt_model_batchnorm2d(m, name, shortcut);
    }
    return dt_model_relu(m, dt_model_add(m, y, shortcut));
}

static void build_resnet18(dt_model *m, int x, int classes, int width) {
    x = dt_model_relu(
        m, dt_model_batchnorm2d(m, "bn1", dt_model_conv2d(m, "conv1", x, width, 3, 1, 1, 0)));
    for (int layer = 0; layer < 4; layer++) {
        int planes = width << layer;
        for (int b = 0; b < 2; b++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", layer + 1, b);
            x = basic_block(m, prefix, x, planes, (layer > 0 && b == 0) ? 2 : 1);
        }
    }
    int spatial = x >= 0 ? m->values[x].h : 1;
    x = dt_model_avgpool2d(m, x, spatial < 4 ? spatial : 4, spatial < 4 ? spatial : 4);
    dt_model_linear(m, "linear", dt_model_flatten(m, x), classes);
}

/* LeNet-5 as in the classic CIFAR-10 course model (3x32x32, no padding): conv2's
 * output is 16x5x5 = 400 features for fc1. */
static void build_lenet_cifar(dt_model *m, int x, int classes, int width) {
    (void)width;
    x = dt_model_maxpool2d(m, dt_model_relu(m, dt_model_conv2d(m, "conv1", x, 6, 5, 1, 0, 1)), 2,
                           2);
    x = dt_model_maxpool2d(m, dt_model_relu(m, dt_model_conv2d(m, "conv2", x, 16, 5, 1, 0, 1)), 2,
                           2);
    x = dt_model_relu(m, dt_model_linear(m, "fc1", dt_model_flatten(m, x), 120));
    x = dt_model_relu(m, dt_model_linear(m, "fc2", x, 84));
    dt_model_linear(m, "fc3", x, classes);
}

/* Records a builder's own error the way the dt_model_* builders do (the first wins). */
static void zoo_fail(dt_model *m, const char *why) {
    if (m->build_failed) return;
    m->build_failed = 1;
    dt_error_set(&m->build_error, "model %s: %s", m->name, why);
}

/* BasicBlock of the CIFAR ResNets of He et al. (akamaster/pytorch_resnet_cifar10):
 * as resnet18's, but a shape change goes through the parameter-free option-A
 * shortcut (subsample, zero channels), so the state dict has no shortcut tensors. */
static int cifar_block(dt_model *m, const char *prefix, int x, int planes, int stride) {
    char name[80];
    int in_planes = x >= 0 ? m->values[x].c : 0;
    snprintf(name, sizeof name, "%s.conv1", prefix);
    int y = dt_model_conv2d(m, name, x, planes, 3, stride, 1, 0);
    snprintf(name, sizeof name, "%s.bn1", prefix);
    y = dt_model_relu(m, dt_model_batchnorm2d(m, name, y));
    snprintf(name, sizeof name, "%s.conv2", prefix);
    y = dt_model_conv2d(m, name, y, planes, 3, 1, 1, 0);
    snprintf(name, sizeof name, "%s.bn2", prefix);
    y = dt_model_batchnorm2d(m, name, y);
    int shortcut = x;
    if (stride != 1 || in_planes != planes) shortcut = dt_model_shortcut_pad(m, x, planes, stride);
    return dt_model_relu(m, dt_model_add(m, y, shortcut));
}

/* The CIFAR ResNet of depth 6n+2: a 3x3 stem, three stages of n blocks (width, 2x,
 * 4x channels; 16 in the paper), global average pooling and one linear layer. The
 * pooling makes the network take any square input of at least 1x1. */
static void build_cifar_resnet(dt_model *m, int x, int classes, int width, int n) {
    x = dt_model_relu(
        m, dt_model_batchnorm2d(m, "bn1", dt_model_conv2d(m, "conv1", x, width, 3, 1, 1, 0)));
    for (int layer = 0; layer < 3; layer++) {
        for (int b = 0; b < n; b++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", layer + 1, b);
            x = cifar_block(m, prefix, x, width << layer, (layer > 0 && b == 0) ? 2 : 1);
        }
    }
    if (x < 0) return;
    /* The reference pools with avg_pool2d(out, out.size()[3]): global only if square. */
    if (m->values[x].h != m->values[x].w) {
        zoo_fail(m, "global average pooling needs square inputs");
        return;
    }
    x = dt_model_avgpool2d(m, x, m->values[x].w, m->values[x].w);
    dt_model_linear(m, "linear", dt_model_flatten(m, x), classes);
}

static void build_resnet20(dt_model *m, int x, int classes, int width) {
    build_cifar_resnet(m, x, classes, width, 3);
}

static void build_resnet32(dt_model *m, int x, int classes, int width) {
    build_cifar_resnet(m, x, classes, width, 5);
}

static void build_resnet44(dt_model *m, int x, int classes, int width) {
    build_cifar_resnet(m, x, classes, width, 7);
}

static void build_resnet56(dt_model *m, int x, int classes, int width) {
    build_cifar_resnet(m, x, classes, width, 9);
}

/* One row per model: its default input shape and width, how to build it, and
 * whether it takes other input shapes. */
typedef struct zoo_entry {
    const char *name;
    int in_c, in_h, in_w;
    int width; /* default width (0: the model has none) */
    void (*build)(dt_model *m, int input, int classes, int width);
    /* NULL: the model takes the data's shape (its builder refuses what does not fit);
     * else why it takes only its default one, for the error. */
    const char *fixed_input;
} zoo_entry;

/* Why the fixed-input models are fixed: a linear layer sized for one input. */
static const char FC_784[] = "its first linear layer takes exactly 784 = 1x28x28 inputs";
static const char FC_LENET[] = "its fc1 is sized for the 16x5x5 features of that input";
static const char POOL_RESNET18[] =
    "its final average pool has a fixed 4x4 window, as the reference's avg_pool2d(out, 4), "
    "so its linear layer's size follows the input's";

static const zoo_entry zoo[] = {
    {"logreg", 1, 28, 28, 0, build_logreg, FC_784},
    {"mlp", 1, 28, 28, 0, build_mlp, FC_784},
    {"lenet5", 1, 28, 28, 0, build_lenet5, FC_LENET},
    {"resnet18", 3, 32, 32, 64, build_resnet18, POOL_RESNET18},
    {"lenet_cifar", 3, 32, 32, 0, build_lenet_cifar, FC_LENET},
    {"resnet20", 3, 32, 32, 16, build_resnet20, NULL},
    {"resnet32", 3, 32, 32, 16, build_resnet32, NULL},
    {"resnet44", 3, 32, 32, 16, build_resnet44, NULL},
    {"resnet56", 3, 32, 32, 16, build_resnet56, NULL},
};
enum { ZOO_SIZE = sizeof zoo / sizeof *zoo };

const char *dt_zoo_names(void) {
    return "logreg, mlp, lenet5, resnet18, lenet_cifar, resnet20, resnet32, resnet44, "
           "resnet56"; /* the rows above, in order (test_zoo checks) */
}

int dt_zoo_count(void) {
    return ZOO_SIZE;
}

const char *dt_zoo_name(int i) {
    return i >= 0 && i < ZOO_SIZE ? zoo[i].name : NULL;
}

static const zoo_entry *find(const char *name) {
    for (int i = 0; i < ZOO_SIZE; i++)
        if (!strcmp(zoo[i].name, name)) return &zoo[i];
    return NULL;
}

int dt_zoo_default_spec(dt_model_spec *spec, const char *name) {
    memset(spec, 0, sizeof *spec);
    spec->name = name;
    spec->classes = 10;
    const zoo_entry *e = find(name);
    if (!e) return -1;
    spec->in_c = e->in_c;
    spec->in_h = e->in_h;
    spec->in_w = e->in_w;
    spec->width = e->width;
    return 0;
}

int dt_zoo_build(dt_model *m, const dt_model_spec *spec, dt_error *err) {
    const zoo_entry *e = find(spec->name);
    if (!e) {
        memset(m, 0, sizeof *m); /* as after dt_model_free: safe to free again */
        return dt_error_set(err, "unknown model '%s' (known: %s)", spec->name, dt_zoo_names());
    }
    dt_model_init_empty(m, spec->name, spec->classes);
    const int x = dt_model_input(m, spec->in_c, spec->in_h, spec->in_w);
    e->build(m, x, spec->classes, spec->width > 0 ? spec->width : e->width);
    if (m->build_failed) {
        dt_error_set(err, "%s", m->build_error.msg);
        dt_model_free(m);
        return -1;
    }
    return 0;
}

const char *dt_zoo_fixed_input(const char *name) {
    const zoo_entry *e = find(name);
    return e ? e->fixed_input : NULL;
}

int dt_zoo_spec_for_data(dt_model_spec *spec, const char *name, int c, int h, int w, int classes,
                         const char *data, dt_error *err) {
    const zoo_entry *e = find(name);
    if (dt_zoo_default_spec(spec, name) || !e)
        return dt_error_set(err, "unknown model '%s' (known: %s)", name, dt_zoo_names());
    if (classes > 0) spec->classes = classes;
    if (c == spec->in_c && h == spec->in_h && w == spec->in_w) return 0;
    if (e->fixed_input)
        return dt_error_set(err, "model %s takes %dx%dx%d inputs but %s has %dx%dx%d images (%s)",
                            name, spec->in_c, spec->in_h, spec->in_w, data, c, h, w,
                            e->fixed_input);
    spec->in_c = c;
    spec->in_h = h;
    spec->in_w = w;
    /* The builder's own checks decide what fits (a kernel larger than its feature
     * map, non-square pooling): building the graph allocates no tensors. */
    dt_model m;
    dt_error why;
    if (dt_zoo_build(&m, spec, &why))
        return dt_error_set(err, "model %s cannot take the %dx%dx%d images of %s: %s", name, c, h,
                            w, data, why.msg);
    dt_model_free(&m);
    return 0;
}
