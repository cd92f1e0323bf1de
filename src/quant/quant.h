/* int8 post-training quantization: a zoo model's float graph becomes a quantized
 * network (BatchNorm folded into the convolution before it, ReLU and the residual add
 * fused into the layer that produces their input), whose numbers come from calibration
 * images; it is saved as safetensors, loaded back, and run by a float emulation of its
 * integer arithmetic (qemu.h) or by oneDNN's int8 primitives (int8_dnnl.h), which
 * compute the same integers.
 *
 * Scales are multipliers, as in the lab: q = round(x * scale), x ~ q / scale (PyTorch's
 * scale is the reciprocal). Every layer computes, with acc = sum(q_in * q_weight):
 *
 *     y = ((float)acc + (float)bias) * output_scale[c]       (float32, in this order)
 *         [y = fmaf(residual_scale, (float)q_residual, y)]     (a fused residual add)
 *     q_out = clamp(rint(y), lo, hi)                           (round half to even)
 *
 * with [lo, hi] = [-128, 127] (signed), [0, 255] after a ReLU (symmetric scheme; [0, 127]
 * when its range is reduced) or [0, 127] (the lab's clamp, then ReLU). The last layer of the
 * symmetric scheme stops at y: float logits (a final average pooling: sum / k^2, not rounded, over
 * its input's scale). Pooling keeps its input's scale (average: rint(sum /
 * k^2)). docs/quantization.md has the schemes, the file's tensors and the exact formulas. */
#ifndef DTRAIN_QUANT_H
#define DTRAIN_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/error.h"
#include "dtrain/model.h"
#include "dtrain/safetensors.h"
#include "dtrain/zoo.h"
#include "quant/calib.h"

/* The most inputs an int8 op reads (a concat's: DenseNet-201's joins 49); a float
 * concat of more stays float. */
enum { DT_QOP_MAX_INPUTS = 64 };

typedef enum dt_quant_scheme {
    /* symmetric int8 weights (per tensor or per channel, [-127, 127]); activations s8,
     * or u8 after a ReLU, scale = levels / threshold from calibration; float logits */
    DT_QUANT_SYMMETRIC,
    /* the course lab: step = (max - min) / 127 per layer for weights and activations,
     * ranges of the layers' outputs before ReLU, output scales chained through every
     * preceding layer's scales, int8 logits; per-tensor weights, chains only */
    DT_QUANT_LAB,
} dt_quant_scheme;

typedef struct dt_quant_config {
    dt_quant_scheme scheme;
    int per_channel; /* one weight scale per output channel (symmetric scheme only) */
    dt_calib_choice calib;
    int report; /* also gather the report's statistics (one more pass) */
    /* Symmetric scheme: integers oneDNN computes exactly without VNNI (PyTorch's
     * reduce_range): activations after a ReLU in [0, 127] (7 bits, so no pair of u8 x s8
     * products overflows 16 bits), and even weights in a layer with a signed input
     * (which oneDNN halves there). Decided at quantize time from this CPU
     * (dt_quant_reduce_range_here) and recorded in the file (`int8_range`). */
    int reduce_range;
} dt_quant_config;

/* Whether a network quantized here should have reduced ranges: this CPU (capped by
 * ONEDNN_MAX_CPU_ISA) has no AVX512-VNNI and the scheme allows it (the lab's arithmetic
 * is the lab's: never reduced). */
int dt_quant_reduce_range_here(dt_quant_scheme scheme);

/* "symmetric" | "lab"; -1 if unknown. */
int dt_quant_scheme_parse(const char *text, dt_quant_scheme *out);
const char *dt_quant_scheme_name(dt_quant_scheme scheme);

/* The kinds of op of a quantized network. A kind is one row in each of three tables:
 * its facts and builder (quant.c), its emulation (qemu.c) and its oneDNN primitive
 * (int8_dnnl.c); each table asserts it has DT_QOP_COUNT rows. */
typedef enum dt_qop_kind {
    DT_QOP_CONV,
    DT_QOP_LINEAR,
    DT_QOP_MAXPOOL,
    DT_QOP_AVGPOOL,
    DT_QOP_ADAPTIVE_AVGPOOL, /* windows of equal size (global average pooling among them) */
    DT_QOP_CONCAT,           /* channels of int8 inputs that share its scale: a copy */
    DT_QOP_FLOAT, /* any other op: run by the float model, its int8 inputs dequantized, its
                     output quantized (qfloat.h) */
    DT_QOP_COUNT
} dt_qop_kind;

/* What a kind is, for code that walks a network whatever its ops. */
typedef struct dt_qop_class {
    const char *name; /* "conv", "linear", "maxpool", "avgpool", ... */
    dt_op_kind from;  /* the float op it quantizes (DT_QOP_FLOAT: any kind) */
    /* The rank of its int8 weights (4: [c_out, c_in, k, k]; 2: [c_out, fan_in]), which
     * come with an int32 bias and scales and make its output a calibrated value; 0: no
     * weights, its input's integers passed on at the input's scale and range (pooling). */
    int weight_dims;
} dt_qop_class;

const dt_qop_class *dt_qop_class_of(dt_qop_kind kind);

/* An activation tensor of the quantized network, per sample [c, h, w] (NCHW). */
typedef struct dt_qvalue {
    char name[96]; /* "input", or the name of the layer that writes it */
    int c, h, w;
    int lo, hi;   /* its integers' range */
    int is_float; /* the symmetric scheme's logits */
    float scale;  /* q = round(x * scale) */
    /* The value whose scale this one shares (itself if none): a pooling's output and
     * its input, a concat's output and its inputs (so a concat is a copy). */
    int share;
    int from_float; /* written by a kept-float op: its float copy is in the float model */
    /* Where the float model holds it during calibration: its storage after op
     * `record_after` (-1: the model's input), or after `relu_op` (-1: none) when the
     * scheme calibrates after ReLU. */
    int float_storage, record_after, relu_op;
} dt_qvalue;

typedef struct dt_qop {
    dt_qop_kind kind;
    char name[80]; /* conv/linear: the state-dict prefix, e.g. "layer1.0.conv2" */
    int in, out;   /* value ids */
    int residual;  /* value added before rounding (a fused residual add), or -1 */
    int c_in, c_out, kernel, stride, pad; /* linear: kernel 1, c_in = input features */
    int groups, dilation;                 /* conv: [c_out, c_in / groups, k, k] weights */
    /* concat and kept-float ops: every input in order (ins[0] = in) */
    int ins[DT_QOP_MAX_INPUTS];
    int n_ins;
    /* a kept-float op: its float op, and the parameters and buffers it reads (weight,
     * bias, running mean, running variance; tensor -1: none), saved in the file */
    int float_op;
    char float_kind[32]; /* its kind's name (dt_op_kind_name) */
    int float_tensor[4];
    char float_name[4][96];
    size_t float_count[4];
    float *float_data[4];
    int n_scales;        /* conv/linear: 1 or c_out */
    int8_t *weight;      /* [c_out, c_in, kernel, kernel] or [c_out, c_in] */
    int32_t *bias;       /* [c_out], at the accumulator's scale */
    float *weight_scale; /* [n_scales] */
    float *output_scale; /* [n_scales] */
    float residual_scale;
    int float_conv, float_bn; /* quantize time: the float model's op ids (bn: -1) */
} dt_qop;

/* A layer's int8 weights per output channel (c_in / groups * k * k) and in all. */
size_t dt_qop_fan_in(const dt_qop *o);
size_t dt_qop_weight_count(const dt_qop *o);
/* Whether op o reads value v (its input, residual or any concat/float input). */
int dt_qop_reads(const dt_qop *o, int v);

/* What the report shows of an activation and of a layer's weights. */
typedef struct dt_qvalue_stats {
    dt_calib_stats calib;      /* of the float values (before ReLU for the lab scheme) */
    double range_lo, range_hi; /* the float range the integers cover */
    double clipped;            /* fraction of values outside it (report pass) */
    double signal, noise;      /* sums of x^2 and (x - q / scale)^2 (report pass) */
} dt_qvalue_stats;

enum { DT_QUANT_WEIGHT_BINS = 60 };
typedef struct dt_qweight_stats {
    double min, max;
    double signal, noise;                /* sums of w^2 and (w - q / weight_scale)^2 */
    uint64_t hist[DT_QUANT_WEIGHT_BINS]; /* over [min, max] */
} dt_qweight_stats;

typedef struct dt_qnet {
    char model[4096];   /* the --model as given: a zoo name or an ONNX path, whole */
    dt_model_spec spec; /* spec.name points at model */
    dt_quant_config cfg;
    dt_qvalue *values;
    int n_values;
    dt_qop *ops;
    int n_ops;
    int calib_samples;
    /* quantize time only (NULL after loading): per value and per op */
    dt_qvalue_stats *vstats;
    dt_qweight_stats *wstats;
} dt_qnet;

/* The structure of the quantized network of model m's graph (m need not be
 * allocated): ops, values, fused ReLUs and residual adds, no numbers yet. Each float op
 * takes the first int8 form that fits it (a row of quant.c's table); dropout is the
 * identity; any op without one (a BatchNorm not after a convolution, a ReLU after a
 * pooling, the option-A shortcut, a kind quant does not know) is kept float. */
int dt_qnet_build(dt_qnet *q, const dt_model *m, const dt_model_spec *spec, dt_quant_scheme scheme,
                  dt_error *err);
void dt_qnet_free(dt_qnet *q);

/* The calibration images: writes up to max_n samples [n, c, h, w] of batch `index`
 * (0, 1, ...) into x and returns n; 0 after the last batch; -1 with err on failure.
 * Each pass asks for the batches again from index 0. */
typedef int (*dt_quant_feed)(void *ctx, int index, float *x, int max_n, dt_error *err);

/* Quantizes: m (built by the zoo for the same spec, allocated, holding the float
 * weights) runs the calibration images in inference mode; q gets its scales, integer
 * weights and biases. Fails with one line naming the layer if a range is empty (all
 * activations 0: the scale would be infinite), not finite, or a bias overflows int32. */
int dt_quantize(dt_qnet *q, dt_model *m, const dt_quant_config *cfg, dt_quant_feed feed,
                void *feed_ctx, dt_error *err);

/* Saves q (atomically) with `meta` added to its own metadata (format, model, scheme,
 * ...). The tensors: docs/quantization.md. */
int dt_qnet_save(const dt_qnet *q, const char *path, const dt_st_meta *meta, int n_meta,
                 dt_error *err);
/* Whether a safetensors file holds a quantized network (its metadata says so). */
int dt_qnet_file_is_quantized(const dt_safetensors *st);
/* Loads a file dt_qnet_save wrote for the model of `spec` (built by the zoo); every
 * tensor must be there with its dtype and shape, every scale finite and positive. */
int dt_qnet_load(dt_qnet *q, const dt_safetensors *st, const dt_model_spec *spec, dt_error *err);

/* FNV-1a (64 bits, hex) of a file's bytes: the quantized file records that of the float
 * weights it came from, so eval can tell whether a float file is the same one. Only a
 * regular file is read, no further than its size; expect_bytes >= 0: the size it must
 * have (a path named inside a file is not trusted further). */
int dt_quant_file_hash(const char *path, long expect_bytes, char *hex, size_t size, dt_error *err);

/* The ops kept float, as "3 ops (shortcut_pad x2, batchnorm2d x1)"; "" if none.
 * Returns their number. */
int dt_qnet_float_summary(const dt_qnet *q, char *text, size_t size);

/* Multiply-accumulates of one sample's forward pass (conv and linear layers). */
double dt_qnet_macs(const dt_qnet *q);

#endif
