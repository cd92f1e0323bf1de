#include "dtrain/zoo.h"

#include "nn/onnx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void build_logreg(dt_model *m, int x, const dt_model_spec *spec) {
    const int classes = spec->classes;
    dt_model_linear(m, "linear", dt_model_flatten(m, x), classes);
}

static void build_mlp(dt_model *m, int x, const dt_model_spec *spec) {
    const int classes = spec->classes;
    x = dt_model_relu(m, dt_model_linear(m, "fc1", dt_model_flatten(m, x), 256));
    x = dt_model_relu(m, dt_model_linear(m, "fc2", x, 256));
    dt_model_linear(m, "fc3", x, classes);
}

/* LeNet-5 for 28x28 inputs: conv1 pads by 2 so that conv2's output is 16x5x5. */
static void build_lenet5(dt_model *m, int x, const dt_model_spec *spec) {
    const int classes = spec->classes;
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

static void build_resnet18(dt_model *m, int x, const dt_model_spec *spec) {
    const int classes = spec->classes, width = spec->width;
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
static void build_lenet_cifar(dt_model *m, int x, const dt_model_spec *spec) {
    const int classes = spec->classes;
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

/* The depth N of a CIFAR ResNet's name "resnetN" (N = 6n + 2, 8 <= N <= 1202: He et
 * al.'s resnet20 .. resnet1202), or 0. Only digits after "resnet", no leading zero. */
static int cifar_resnet_depth(const char *name) {
    if (!name || strncmp(name, "resnet", 6)) return 0;
    const char *d = name + 6;
    if (*d < '1' || *d > '9' || strlen(d) > 4) return 0;
    int depth = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9') return 0;
        depth = depth * 10 + (*d - '0');
    }
    return depth >= 8 && depth <= 1202 && (depth - 2) % 6 == 0 ? depth : 0;
}

static void build_cifar_resnet_named(dt_model *m, int x, const dt_model_spec *spec) {
    build_cifar_resnet(m, x, spec->classes, spec->width, (cifar_resnet_depth(spec->name) - 2) / 6);
}

/* ---- torchvision's ImageNet models ----
 * Architectures and state_dict names as torchvision.models (alexnet, vgg16, vgg16_bn,
 * resnet50, googlenet), so weights move both ways. Their width is the first conv's
 * channels (64); every other layer, the classifiers' hidden 4096 included, scales
 * with it (rounded down, at least 1), so full width is torchvision's exactly. Their
 * adaptive average pooling lets them take other input sizes down to a minimum. */

/* c channels of the full-width model at this width. */
static int scaled(int c, int width) {
    int v = (int)((long long)c * width / 64);
    return v > 0 ? v : 1;
}

/* Refuses inputs below min x min, with the reason. */
static int needs_at_least(dt_model *m, int x, int min, const char *why) {
    if (x < 0) return 0;
    if (m->values[x].h >= min && m->values[x].w >= min) return 1;
    char msg[256];
    snprintf(msg, sizeof msg, "needs inputs of at least %dx%d (%s), got %dx%d", min, min, why,
             m->values[x].h, m->values[x].w);
    zoo_fail(m, msg);
    return 0;
}

/* The probability of a dropout layer: 0 when the spec asks for none (parity fixtures:
 * PyTorch's random numbers cannot be reproduced). */
static float dropout_p(const dt_model_spec *spec, float p) {
    return spec->no_dropout ? 0.0f : p;
}

/* torchvision's weight initialisation, applied to the tensors PyTorch's layers would
 * initialise by fan-in (conv and linear weights and biases; BatchNorm's ones and zeros
 * stay): conv weights (4-D) N(0, 2 / fan_out) (kaiming_normal_, mode fan_out) or
 * N(0, conv_std^2); linear weights (2-D) N(0, linear_std^2); their biases (1-D) zero.
 * A std of 0 leaves that kind at PyTorch's default, as torchvision does (resnet50's
 * fc, alexnet). Deep plain nets need it: vgg16 from PyTorch's default does not learn. */
enum { KAIMING_FAN_OUT = -1 };

static void init_like_torchvision(dt_model *m, float conv_std, float linear_std, int zero_biases) {
    for (int i = 0; i < m->n_tensors; i++) {
        dt_tensor_entry *t = &m->tensors[i];
        if (t->init != DT_INIT_UNIFORM_FAN_IN) continue;
        if (t->ndim == 4 && conv_std != 0.0f) {
            const int fan_out = t->shape[0] * t->shape[2] * t->shape[3];
            t->init = DT_INIT_NORMAL;
            t->std = conv_std == KAIMING_FAN_OUT ? sqrtf(2.0f / (float)fan_out) : conv_std;
        } else if (t->ndim == 2 && linear_std != 0.0f) {
            t->init = DT_INIT_NORMAL;
            t->std = linear_std;
        } else if (t->ndim == 1 && zero_biases) {
            t->init = DT_INIT_ZEROS;
        }
    }
}

static int conv_relu(dt_model *m, const char *name, int x, int c_out, int k, int stride, int pad) {
    return dt_model_relu(m, dt_model_conv2d(m, name, x, c_out, k, stride, pad, 1));
}

/* torchvision's classifier head of AlexNet and VGG: linear layers (hidden width h) with
 * ReLU, and dropout before (AlexNet) or after (VGG) the first two. Module indices as
 * torchvision's nn.Sequential. */
static void classifier(dt_model *m, int x, const dt_model_spec *spec, int h, int dropout_first) {
    x = dt_model_flatten(m, x);
    const float p = dropout_p(spec, 0.5f);
    if (dropout_first) {
        x = dt_model_dropout(m, x, p);
        x = dt_model_relu(m, dt_model_linear(m, "classifier.1", x, h));
        x = dt_model_dropout(m, x, p);
        x = dt_model_relu(m, dt_model_linear(m, "classifier.4", x, h));
    } else {
        x = dt_model_relu(m, dt_model_linear(m, "classifier.0", x, h));
        x = dt_model_dropout(m, x, p);
        x = dt_model_relu(m, dt_model_linear(m, "classifier.3", x, h));
        x = dt_model_dropout(m, x, p);
    }
    dt_model_linear(m, "classifier.6", x, spec->classes);
}

/* AlexNet (torchvision's, after Krizhevsky's "one weird trick"): 61,100,840 parameters. */
static void build_alexnet(dt_model *m, int x, const dt_model_spec *spec) {
    const int w = spec->width;
    if (!needs_at_least(m, x, 63, "conv1's stride 4 and three 3x3/2 max pools")) return;
    x = dt_model_maxpool2d(m, conv_relu(m, "features.0", x, w, 11, 4, 2), 3, 2);
    x = dt_model_maxpool2d(m, conv_relu(m, "features.3", x, scaled(192, w), 5, 1, 2), 3, 2);
    x = conv_relu(m, "features.6", x, scaled(384, w), 3, 1, 1);
    x = conv_relu(m, "features.8", x, scaled(256, w), 3, 1, 1);
    x = dt_model_maxpool2d(m, conv_relu(m, "features.10", x, scaled(256, w), 3, 1, 1), 3, 2);
    x = dt_model_adaptive_avgpool2d(m, x, 6, 6);
    classifier(m, x, spec, scaled(4096, w), 1);
}

/* VGG-16 (configuration D): 13 3x3 convs with bias, five 2x2 max pools; with
 * BatchNorm after each conv, vgg16_bn. features.N counts conv, [bn,] relu and pool
 * modules as torchvision's make_layers does. */
static void build_vgg16_any(dt_model *m, int x, const dt_model_spec *spec, int bn) {
    static const int cfg[] = {64, 64,  0,   128, 128, 0,   256, 256, 256,
                              0,  512, 512, 512, 0,   512, 512, 512, 0}; /* 0: max pool */
    if (!needs_at_least(m, x, 32, "five 2x2 max pools")) return;
    int index = 0;
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        char name[32];
        if (cfg[i] == 0) {
            x = dt_model_maxpool2d(m, x, 2, 2);
            index++;
            continue;
        }
        snprintf(name, sizeof name, "features.%d", index++);
        x = dt_model_conv2d(m, name, x, scaled(cfg[i], spec->width), 3, 1, 1, 1);
        if (bn) {
            snprintf(name, sizeof name, "features.%d", index++);
            x = dt_model_batchnorm2d(m, name, x);
        }
        x = dt_model_relu(m, x);
        index++;
    }
    x = dt_model_adaptive_avgpool2d(m, x, 7, 7);
    classifier(m, x, spec, scaled(4096, spec->width), 0);
    init_like_torchvision(m, KAIMING_FAN_OUT, 0.01f, 1);
}

static void build_vgg16(dt_model *m, int x, const dt_model_spec *spec) {
    build_vgg16_any(m, x, spec, 0);
}

static void build_vgg16_bn(dt_model *m, int x, const dt_model_spec *spec) {
    build_vgg16_any(m, x, spec, 1);
}

/* torchvision's Bottleneck (ResNet v1.5: the stride on the 3x3 conv): 1x1 down to
 * `planes`, 3x3, 1x1 up to 4 x planes, each with BatchNorm; a 1x1 conv + BN
 * projection (downsample.0/.1) when the shape changes. */
static int bottleneck(dt_model *m, const char *prefix, int x, int planes, int stride) {
    char name[80];
    const int in_planes = x >= 0 ? m->values[x].c : 0;
    snprintf(name, sizeof name, "%s.conv1", prefix);
    int y = dt_model_conv2d(m, name, x, planes, 1, 1, 0, 0);
    snprintf(name, sizeof name, "%s.bn1", prefix);
    y = dt_model_relu(m, dt_model_batchnorm2d(m, name, y));
    snprintf(name, sizeof name, "%s.conv2", prefix);
    y = dt_model_conv2d(m, name, y, planes, 3, stride, 1, 0);
    snprintf(name, sizeof name, "%s.bn2", prefix);
    y = dt_model_relu(m, dt_model_batchnorm2d(m, name, y));
    snprintf(name, sizeof name, "%s.conv3", prefix);
    y = dt_model_conv2d(m, name, y, 4 * planes, 1, 1, 0, 0);
    snprintf(name, sizeof name, "%s.bn3", prefix);
    y = dt_model_batchnorm2d(m, name, y);
    int shortcut = x;
    if (stride != 1 || in_planes != 4 * planes) {
        snprintf(name, sizeof name, "%s.downsample.0", prefix);
        shortcut = dt_model_conv2d(m, name, x, 4 * planes, 1, stride, 0, 0);
        snprintf(name, sizeof name, "%s.downsample.1", prefix);
        shortcut = dt_model_batchnorm2d(m, name, shortcut);
    }
    return dt_model_relu(m, dt_model_add(m, y, shortcut));
}

/* ResNet-50: 25,557,032 parameters. Every layer pads, so any input of at least 1x1
 * builds (a 7x7 map only at 224x224). */
static void build_resnet50(dt_model *m, int x, const dt_model_spec *spec) {
    static const int blocks[4] = {3, 4, 6, 3};
    x = dt_model_conv2d(m, "conv1", x, spec->width, 7, 2, 3, 0);
    x = dt_model_relu(m, dt_model_batchnorm2d(m, "bn1", x));
    x = dt_model_maxpool2d_padded(m, x, 3, 2, 1, 0);
    for (int layer = 0; layer < 4; layer++) {
        for (int b = 0; b < blocks[layer]; b++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", layer + 1, b);
            x = bottleneck(m, prefix, x, spec->width << layer, (layer > 0 && b == 0) ? 2 : 1);
        }
    }
    x = dt_model_adaptive_avgpool2d(m, x, 1, 1);
    dt_model_linear(m, "fc", dt_model_flatten(m, x), spec->classes);
    init_like_torchvision(m, KAIMING_FAN_OUT, 0.0f, 0);
}

/* GoogLeNet's BasicConv2d: conv without bias, BatchNorm with eps 0.001, ReLU. */
static int basic_conv(dt_model *m, const char *prefix, int x, int c_out, int k, int stride,
                      int pad) {
    char name[80];
    snprintf(name, sizeof name, "%s.conv", prefix);
    x = dt_model_conv2d(m, name, x, c_out, k, stride, pad, 0);
    snprintf(name, sizeof name, "%s.bn", prefix);
    return dt_model_relu(m, dt_model_batchnorm2d_eps(m, name, x, 1e-3f));
}

/* Inception(in, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj) as torchvision's:
 * its "5x5" branch (branch3) is a 3x3 conv there, and so here. ch[] at full width. */
static int inception(dt_model *m, const char *prefix, int x, const int ch[6], int width) {
    char name[64]; /* + ".conv" fits basic_conv's 80 */
    int out[4];
    snprintf(name, sizeof name, "%s.branch1", prefix);
    out[0] = basic_conv(m, name, x, scaled(ch[0], width), 1, 1, 0);
    snprintf(name, sizeof name, "%s.branch2.0", prefix);
    int y = basic_conv(m, name, x, scaled(ch[1], width), 1, 1, 0);
    snprintf(name, sizeof name, "%s.branch2.1", prefix);
    out[1] = basic_conv(m, name, y, scaled(ch[2], width), 3, 1, 1);
    snprintf(name, sizeof name, "%s.branch3.0", prefix);
    y = basic_conv(m, name, x, scaled(ch[3], width), 1, 1, 0);
    snprintf(name, sizeof name, "%s.branch3.1", prefix);
    out[2] = basic_conv(m, name, y, scaled(ch[4], width), 3, 1, 1);
    y = dt_model_maxpool2d_padded(m, x, 3, 1, 1, 1);
    snprintf(name, sizeof name, "%s.branch4.1", prefix);
    out[3] = basic_conv(m, name, y, scaled(ch[5], width), 1, 1, 0);
    return dt_model_concat(m, out, 4);
}

/* GoogLeNet as torchvision's googlenet(aux_logits=False, transform_input=False):
 * 6,624,904 parameters. The auxiliary classifiers, used only in training and dropped
 * in eval, are not built. */
static void build_googlenet(dt_model *m, int x, const dt_model_spec *spec) {
    static const struct {
        const char *name;
        int ch[6];
        int pool_after; /* 1: maxpool3 (3x3/2), 2: maxpool4 (2x2/2) */
    } blocks[] = {
        {"inception3a", {64, 96, 128, 16, 32, 32}, 0},
        {"inception3b", {128, 128, 192, 32, 96, 64}, 1},
        {"inception4a", {192, 96, 208, 16, 48, 64}, 0},
        {"inception4b", {160, 112, 224, 24, 64, 64}, 0},
        {"inception4c", {128, 128, 256, 24, 64, 64}, 0},
        {"inception4d", {112, 144, 288, 32, 64, 64}, 0},
        {"inception4e", {256, 160, 320, 32, 128, 128}, 2},
        {"inception5a", {256, 160, 320, 32, 128, 128}, 0},
        {"inception5b", {384, 192, 384, 48, 128, 128}, 0},
    };
    const int w = spec->width;
    if (!needs_at_least(m, x, 15, "conv1's stride 2 and three 3x3/2 max pools")) return;
    x = basic_conv(m, "conv1", x, w, 7, 2, 3);
    x = dt_model_maxpool2d_padded(m, x, 3, 2, 0, 1);
    x = basic_conv(m, "conv2", x, w, 1, 1, 0);
    x = basic_conv(m, "conv3", x, scaled(192, w), 3, 1, 1);
    x = dt_model_maxpool2d_padded(m, x, 3, 2, 0, 1);
    for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++) {
        x = inception(m, blocks[i].name, x, blocks[i].ch, w);
        if (blocks[i].pool_after == 1) x = dt_model_maxpool2d_padded(m, x, 3, 2, 0, 1);
        if (blocks[i].pool_after == 2) x = dt_model_maxpool2d_padded(m, x, 2, 2, 0, 1);
    }
    x = dt_model_adaptive_avgpool2d(m, x, 1, 1);
    x = dt_model_dropout(m, dt_model_flatten(m, x), dropout_p(spec, 0.2f));
    dt_model_linear(m, "fc", x, spec->classes);
    /* trunc_normal_(std 0.01, a -2, b 2): the cut is 200 sigma away, a plain normal */
    init_like_torchvision(m, 0.01f, 0.01f, 0);
}

/* One row per model: its default input shape and width, how to build it, whether it
 * takes other input shapes, and its default training recipe. */
typedef struct zoo_entry {
    const char *name;
    int in_c, in_h, in_w;
    int classes; /* default classes (the data's replace them) */
    int width;   /* default width (0: the model has none) */
    /* spec->width is resolved (the row's default if the spec's is 0) */
    void (*build)(dt_model *m, int input, const dt_model_spec *spec);
    /* NULL: the model takes the data's shape (its builder refuses what does not fit);
     * else why it takes only its default one, for the error. */
    const char *fixed_input;
    const dt_zoo_recipe *recipe; /* its default training recipe */
} zoo_entry;

/* Why the fixed-input models are fixed: a linear layer sized for one input. */
static const char FC_784[] = "its first linear layer takes exactly 784 = 1x28x28 inputs";
static const char FC_LENET[] = "its fc1 is sized for the 16x5x5 features of that input";
static const char POOL_RESNET18[] =
    "its final average pool has a fixed 4x4 window, as the reference's avg_pool2d(out, 4), "
    "so its linear layer's size follows the input's";

/* The recipes. Batch 128 per process for all; the ImageNet references' rates are for
 * batch 256 and are halved here (the linear scaling rule). Our step schedule is x0.1
 * at 50% and 75% of the epochs. Measured: tests/test_recipes.c, docs/architecture.md. */
static const dt_zoo_recipe LOGREG = {
    0.01f, 0.9f, 0.0f, DT_LR_COSINE,
    "measured on Fashion-MNIST (PyTorch's nn tutorial's lr 0.5 without momentum is for "
    "unnormalised pixels: its loss ends at 20 here)"};
static const dt_zoo_recipe MLP = {0.05f, 0.9f, 5e-4f, DT_LR_COSINE,
                                  "measured on Fashion-MNIST (no reference recipe)"};
static const dt_zoo_recipe LENET5 = {0.05f, 0.9f, 5e-4f, DT_LR_COSINE,
                                     "measured on Fashion-MNIST (docs/data.md)"};
static const dt_zoo_recipe RESNET18 = {
    0.1f, 0.9f, 5e-4f, DT_LR_COSINE,
    "kuangliu/pytorch-cifar: lr 0.1, momentum 0.9, wd 5e-4, cosine, batch 128"};
static const dt_zoo_recipe LENET_CIFAR = {
    0.05f, 0.9f, 0.0f, DT_LR_COSINE,
    "PyTorch's CIFAR-10 tutorial (lr 0.001, momentum 0.9, no decay at batch 4: 0.032 at "
    "batch 128), lenet5's 0.05 and cosine as measured"};
static const dt_zoo_recipe RESNET_CIFAR = {
    0.1f, 0.9f, 1e-4f, DT_LR_STEP,
    "He et al. 2016: lr 0.1, momentum 0.9, wd 1e-4, x0.1 at 50% and 75%, batch 128"};
static const dt_zoo_recipe IMAGENET_NO_BN = {
    0.005f, 0.9f, 1e-4f, DT_LR_STEP,
    "PyTorch examples/imagenet for AlexNet and VGG: lr 0.01 at batch 256, momentum 0.9, "
    "wd 1e-4, x0.1 every 30 of 90 epochs"};
static const dt_zoo_recipe IMAGENET = {
    0.05f, 0.9f, 1e-4f, DT_LR_STEP,
    "torchvision's reference: lr 0.1 at batch 256, momentum 0.9, wd 1e-4, x0.1 every 30 of "
    "90 epochs"};

static const zoo_entry zoo[] = {
    {"logreg", 1, 28, 28, 10, 0, build_logreg, FC_784, &LOGREG},
    {"mlp", 1, 28, 28, 10, 0, build_mlp, FC_784, &MLP},
    {"lenet5", 1, 28, 28, 10, 0, build_lenet5, FC_LENET, &LENET5},
    {"resnet18", 3, 32, 32, 10, 64, build_resnet18, POOL_RESNET18, &RESNET18},
    {"lenet_cifar", 3, 32, 32, 10, 0, build_lenet_cifar, FC_LENET, &LENET_CIFAR},
    {"resnet20", 3, 32, 32, 10, 16, build_cifar_resnet_named, NULL, &RESNET_CIFAR},
    {"resnet32", 3, 32, 32, 10, 16, build_cifar_resnet_named, NULL, &RESNET_CIFAR},
    {"resnet44", 3, 32, 32, 10, 16, build_cifar_resnet_named, NULL, &RESNET_CIFAR},
    {"resnet56", 3, 32, 32, 10, 16, build_cifar_resnet_named, NULL, &RESNET_CIFAR},
    {"alexnet", 3, 224, 224, 1000, 64, build_alexnet, NULL, &IMAGENET_NO_BN},
    {"vgg16", 3, 224, 224, 1000, 64, build_vgg16, NULL, &IMAGENET_NO_BN},
    {"vgg16_bn", 3, 224, 224, 1000, 64, build_vgg16_bn, NULL, &IMAGENET},
    {"resnet50", 3, 224, 224, 1000, 64, build_resnet50, NULL, &IMAGENET},
    {"googlenet", 3, 224, 224, 1000, 64, build_googlenet, NULL, &IMAGENET},
};
enum { ZOO_SIZE = sizeof zoo / sizeof *zoo };

const char *dt_zoo_names(void) {
    return "logreg, mlp, lenet5, resnet18, lenet_cifar, resnet20, resnet32, resnet44, "
           "resnet56, alexnet, vgg16, vgg16_bn, resnet50, googlenet"; /* the rows above, in
                                                                          order (test_zoo) */
}

int dt_zoo_count(void) {
    return ZOO_SIZE;
}

const char *dt_zoo_name(int i) {
    return i >= 0 && i < ZOO_SIZE ? zoo[i].name : NULL;
}

/* Any other CIFAR ResNet depth 6n + 2 (resnet26, resnet110, ...): the named rows' model. */
static const zoo_entry CIFAR_RESNET_ANY = {
    "resnetN", 3, 32, 32, 10, 16, build_cifar_resnet_named, NULL, &RESNET_CIFAR};

static const zoo_entry *find(const char *name) {
    for (int i = 0; i < ZOO_SIZE; i++)
        if (!strcmp(zoo[i].name, name)) return &zoo[i];
    return cifar_resnet_depth(name) ? &CIFAR_RESNET_ANY : NULL;
}

/* An imported graph has no published recipe: PyTorch's usual SGD starting point. */
static const dt_zoo_recipe IMPORTED = {
    0.01f, 0.9f, 5e-4f, DT_LR_COSINE,
    "an ONNX model (no recipe of its own): SGD lr 0.01, momentum 0.9, wd 5e-4, cosine; "
    "give --lr and the others for yours"};

const dt_zoo_recipe *dt_zoo_recipe_of(const char *name) {
    if (dt_onnx_is_path(name)) return &IMPORTED;
    const zoo_entry *e = name ? find(name) : NULL;
    return e ? e->recipe : NULL;
}

/* A head of no class computes nothing a step could learn from (a bench of one timed
 * empty steps at millions of images a second): refused wherever a model is made. */
static int check_classes(const char *name, int classes, dt_error *err) {
    if (classes >= 1) return 0;
    return dt_error_set(err, "model %s outputs %d classes (a classifier needs at least 1)", name,
                        classes);
}

int dt_zoo_spec_of(dt_model_spec *spec, const char *name, dt_error *err) {
    if (dt_onnx_is_path(name))
        return dt_onnx_spec(spec, name, err) || check_classes(name, spec->classes, err) ? -1 : 0;
    if (dt_zoo_default_spec(spec, name))
        return dt_error_set(err,
                            "unknown model '%s' (known: %s, resnetN for any CIFAR depth N = "
                            "6n+2 such as resnet26 or resnet110, or a FILE.onnx)",
                            name, dt_zoo_names());
    return 0;
}

int dt_zoo_default_spec(dt_model_spec *spec, const char *name) {
    memset(spec, 0, sizeof *spec);
    spec->name = name;
    spec->classes = 10;
    const zoo_entry *e = find(name);
    if (!e) return -1;
    spec->classes = e->classes;
    spec->in_c = e->in_c;
    spec->in_h = e->in_h;
    spec->in_w = e->in_w;
    spec->width = e->width;
    return 0;
}

int dt_zoo_build(dt_model *m, const dt_model_spec *spec, dt_error *err) {
    if (dt_onnx_is_path(spec->name)) {
        if (dt_onnx_build(m, spec, err)) return -1;
        if (check_classes(spec->name, m->classes, err) == 0) return 0;
        dt_model_free(m);
        return -1;
    }
    const zoo_entry *e = find(spec->name);
    if (!e || check_classes(spec->name, spec->classes, err)) {
        memset(m, 0, sizeof *m); /* as after dt_model_free: safe to free again */
        return e ? -1
                 : dt_error_set(err, "unknown model '%s' (known: %s)", spec->name, dt_zoo_names());
    }
    dt_model_init_empty(m, spec->name, spec->classes);
    m->precision = spec->precision;
    const int x = dt_model_input(m, spec->in_c, spec->in_h, spec->in_w);
    dt_model_spec resolved = *spec;
    if (resolved.width <= 0) resolved.width = e->width;
    e->build(m, x, &resolved);
    if (m->build_failed) {
        dt_error_set(err, "%s", m->build_error.msg);
        dt_model_free(m);
        return -1;
    }
    return 0;
}

static const char ONNX_FIXED[] = "an ONNX graph's shapes are fixed when it is exported";

const char *dt_zoo_fixed_input(const char *name) {
    if (dt_onnx_is_path(name)) return ONNX_FIXED;
    const zoo_entry *e = find(name);
    return e ? e->fixed_input : NULL;
}

int dt_zoo_spec_for_data(dt_model_spec *spec, const char *name, int c, int h, int w, int classes,
                         const char *data, dt_error *err) {
    if (dt_zoo_spec_of(spec, name, err)) return -1;
    if (classes > 0 && classes != spec->classes) {
        if (dt_onnx_is_path(name)) /* its head is in the file */
            return dt_error_set(err, "model %s outputs %d classes but %s has %d", name,
                                spec->classes, data, classes);
        spec->classes = classes;
    }
    if (c == spec->in_c && h == spec->in_h && w == spec->in_w) return 0;
    const char *fixed = dt_zoo_fixed_input(name);
    if (fixed)
        return dt_error_set(err, "model %s takes %dx%dx%d inputs but %s has %dx%dx%d images (%s)",
                            name, spec->in_c, spec->in_h, spec->in_w, data, c, h, w, fixed);
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
