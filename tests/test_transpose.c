/* Transpose (nn/transpose.h): the blocked loop against numpy's definition for every
 * shape and permutation it folds differently, f32 and bf16 from the one body; the op's
 * gradient in a model against finite differences; a bf16 model's transposes against
 * the f32 one's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cpu_isa.h"
#include "core/rng.h"
#include "dtrain/backend.h"
#include "dtrain/dtype.h"
#include "dtrain/model.h"
#include "nn/transpose.h"
#include "testutil.h"

/* numpy.transpose(x, (0, perm + 1)) for n samples of dims, element by element. */
static void reference(float *out, const float *in, int n, int rank, const int *dims,
                      const int *perm) {
    size_t per = 1, in_stride[8], out_dims[8], count;
    for (int d = rank - 1; d >= 0; d--) in_stride[d] = per, per *= (size_t)dims[d];
    for (int d = 0; d < rank; d++) out_dims[d] = (size_t)dims[perm[d]];
    count = per * (size_t)n;
    for (size_t o = 0; o < count; o++) {
        size_t rest = o % per, src = (o / per) * per;
        for (int d = rank - 1; d >= 0; d--) {
            src += (rest % out_dims[d]) * in_stride[perm[d]];
            rest /= out_dims[d];
        }
        out[o] = in[src];
    }
}

/* Every permutation of up to 5 axes over shapes with sizes of 1 (dropped), 16s and
 * remainders (tiles), adjacent axes kept together (merged): f32 exact, bf16 exact
 * when it writes, one rounding when it adds. */
static void test_transpose_matches_numpy(void **state) {
    (void)state;
    const int shapes[][6] = {{2, 3, 4}, {1, 17, 33}, {3, 2, 1, 5}, {2, 3, 4, 5, 2}, {18, 20}, {7}};
    const int ranks[] = {3, 3, 4, 5, 2, 1};
    int checked = 0;
    for (size_t s = 0; s < sizeof ranks / sizeof *ranks; s++) {
        const int rank = ranks[s], n = 3;
        size_t count = (size_t)n;
        for (int d = 0; d < rank; d++) count *= (size_t)shapes[s][d];
        float *x = test_alloc(count * 4), *want = test_alloc(count * 4),
              *got = test_alloc(count * 4);
        uint16_t *x16 = test_alloc(count * 2), *got16 = test_alloc(count * 2);
        fill_uniform(x, count, 5 + s, -2, 2);
        for (size_t i = 0; i < count; i++) {
            x16[i] = dt_bf16_from_f32(x[i]);
            x[i] = dt_bf16_to_f32(x16[i]); /* bf16 values: both types move the same */
        }
        int perm[6] = {0, 1, 2, 3, 4, 5};
        /* every permutation, in lexicographic order */
        for (;;) {
            reference(want, x, n, rank, shapes[s], perm);
            dt_transpose_run(got, x, n, rank, shapes[s], perm, 0, 4);
            assert_memory_equal(got, want, count * 4);
            dt_transpose_run(got16, x16, n, rank, shapes[s], perm, 0, 2);
            for (size_t i = 0; i < count; i++) assert_true(dt_bf16_to_f32(got16[i]) == want[i]);
            /* add: out = out + moved, each type's own rounding */
            for (size_t i = 0; i < count; i++) got[i] = 1.0f, got16[i] = dt_bf16_from_f32(1.0f);
            dt_transpose_run(got, x, n, rank, shapes[s], perm, 1, 4);
            dt_transpose_run(got16, x16, n, rank, shapes[s], perm, 1, 2);
            for (size_t i = 0; i < count; i++) {
                assert_true(got[i] == 1.0f + want[i]);
                assert_true(got16[i] == dt_bf16_from_f32(1.0f + want[i]));
            }
            checked++;
            int i = rank - 2;
            while (i >= 0 && perm[i] > perm[i + 1]) i--;
            if (i < 0) break;
            int j = rank - 1;
            while (perm[j] < perm[i]) j--;
            int t = perm[i];
            perm[i] = perm[j], perm[j] = t;
            for (int a = i + 1, b = rank - 1; a < b; a++, b--)
                t = perm[a], perm[a] = perm[b], perm[b] = t;
        }
        free(x), free(want), free(got), free(x16), free(got16);
    }
    print_message("%d shape x permutation cases, f32 and bf16, write and add\n", checked);
    assert_int_equal(checked, 6 + 6 + 24 + 120 + 2 + 1);
}

/* conv -> [g, C/g, H, W] -> channel shuffle (1, 0, 2, 3) -> [C, H*W] -> (1, 0) ->
 * flatten -> linear: both of the loop's paths (rows, tiles) in one graph. */
static void build_shuffle(dt_model *m, dt_precision precision) {
    dt_model_init_empty(m, "shuffle", 10);
    m->precision = precision;
    m->conv_backend = DT_CONV_DNNL;
    int x = dt_model_input(m, 3, 5, 5);
    x = dt_model_conv2d(m, "conv", x, 20, 3, 1, 1, 1);
    const int split[4] = {4, 5, 5, 5}, shuffle[4] = {1, 0, 2, 3};
    x = dt_model_reshape(m, x, 4, split);
    x = dt_model_transpose(m, x, shuffle);
    const int flat[2] = {20, 25}, swap[2] = {1, 0};
    x = dt_model_reshape(m, x, 2, flat);
    x = dt_model_transpose(m, x, swap);
    x = dt_model_flatten(m, x);
    dt_model_linear(m, "fc", x, 10);
}

static double loss_at(dt_model *m, const float *x, const int32_t *labels, int n) {
    memcpy(dt_model_input_data(m), x, sizeof(float) * dt_model_input_floats_per_sample(m) * n);
    dt_model_forward(m, n);
    return dt_model_loss(m, labels, n, NULL);
}

static void test_transpose_grad_matches_fd(void **state) {
    (void)state;
    dt_model m;
    dt_error err;
    build_shuffle(&m, DT_PRECISION_FP32);
    const int batch = 3;
    if (dt_model_alloc(&m, batch, &err)) fail_msg("%s", err.msg);
    for (int s = 0; s < m.n_storages; s++) assert_int_equal(m.storages[s].blocked, 0);
    dt_model_init_params(&m, 7);
    const size_t nx = dt_model_input_floats_per_sample(&m) * batch;
    float *x = test_alloc(nx * sizeof(float));
    fill_uniform(x, nx, 3, -1, 1);
    const int32_t labels[3] = {1, 4, 7};
    dt_model_zero_grad(&m);
    loss_at(&m, x, labels, batch);
    dt_model_backward(&m, labels, batch);
    /* the conv's weight: its gradient came back through both transposes */
    const dt_tensor_entry *w = &m.tensors[dt_model_find_tensor(&m, "conv.weight")];
    float *p = m.params + w->offset;
    const float eps = 1e-2f;
    float analytic[24], numeric[24];
    for (int k = 0; k < 24; k++) {
        const size_t i = (size_t)k * 7 % w->numel;
        const float keep = p[i];
        p[i] = keep + eps;
        const double lp = loss_at(&m, x, labels, batch);
        p[i] = keep - eps;
        const double lm = loss_at(&m, x, labels, batch);
        p[i] = keep;
        numeric[k] = (float)((lp - lm) / (2.0 * eps));
        analytic[k] = m.grads[w->offset + i];
    }
    const double e = rel_error(analytic, numeric, 24);
    print_message("conv weight through two transposes: relative error %.2e\n", e);
    assert_true(e < 1e-2);
    free(x);
    dt_model_free(&m);
}

/* The bf16 model runs its transposes in bf16 (transpose.bf16) and agrees with f32 to
 * bf16's precision. */
static void test_transpose_bf16_model_matches_f32(void **state) {
    (void)state;
    if (!dt_cpu_has_bf16()) skip();
    dt_model a, b;
    dt_error err;
    build_shuffle(&a, DT_PRECISION_FP32);
    build_shuffle(&b, DT_PRECISION_BF16);
    const int batch = 4;
    if (dt_model_alloc(&a, batch, &err) || dt_model_alloc(&b, batch, &err)) fail_msg("%s", err.msg);
    int bf16_transposes = 0;
    for (int i = 0; i < b.n_ops; i++) bf16_transposes += b.ops[i].impl == &dt_transpose_bf16_kernel;
    assert_int_equal(bf16_transposes, 2);
    dt_model_init_params(&a, 9);
    dt_model_init_params(&b, 9);
    const size_t nx = dt_model_input_floats_per_sample(&a) * batch;
    float *x = test_alloc(nx * sizeof(float));
    fill_uniform(x, nx, 4, -1, 1);
    const int32_t labels[4] = {0, 3, 5, 9};
    dt_model_zero_grad(&a);
    dt_model_zero_grad(&b);
    loss_at(&a, x, labels, batch);
    loss_at(&b, x, labels, batch);
    const double logits = rel_error(dt_model_logits(&b), dt_model_logits(&a), (size_t)batch * 10);
    dt_model_backward(&a, labels, batch);
    dt_model_backward(&b, labels, batch);
    const double grads = rel_error(b.grads, a.grads, a.n_params);
    print_message("bf16 against f32: logits %.2e, gradients %.2e\n", logits, grads);
    assert_true(logits < 2e-2);
    assert_true(grads < 3e-2);
    free(x);
    dt_model_free(&a);
    dt_model_free(&b);
}

/* conv -> BatchNorm -> ReLU -> conv (16 channels: oneDNN's blocked nChw16c between them)
 * -> [2, 8, H, W] -> channel shuffle -> [16, H, W] -> conv: the storages a reshape sees
 * stay plain, the others blocked, and the logits and gradients are the all-plain
 * model's. */
static void build_blocked(dt_model *m, int plain) {
    dt_model_init_empty(m, "blocked", 10);
    m->conv_backend = DT_CONV_DNNL;
    m->plain_layouts = plain;
    int x = dt_model_input(m, 3, 6, 6);
    x = dt_model_relu(m,
                      dt_model_batchnorm2d(m, "bn1", dt_model_conv2d(m, "c1", x, 16, 3, 1, 1, 0)));
    x = dt_model_conv2d(m, "c2", x, 16, 1, 1, 0, 0);
    const int split[4] = {2, 8, 6, 6}, shuffle[4] = {1, 0, 2, 3}, back[3] = {16, 6, 6};
    x = dt_model_reshape(m, dt_model_transpose(m, dt_model_reshape(m, x, 4, split), shuffle), 3,
                         back);
    x = dt_model_conv2d(m, "c3", x, 16, 3, 1, 1, 1);
    dt_model_linear(m, "fc", dt_model_flatten(m, dt_model_adaptive_avgpool2d(m, x, 1, 1)), 10);
}

static void test_blocked_layouts_stop_at_a_reshape(void **state) {
    (void)state;
    dt_model a, b;
    dt_error err;
    build_blocked(&a, 0);
    build_blocked(&b, 1);
    const int batch = 3;
    if (dt_model_alloc(&a, batch, &err) || dt_model_alloc(&b, batch, &err)) fail_msg("%s", err.msg);
    /* values: 0 input, 1 conv1, 2 bn1, 3 relu1, 4 conv2, 5 its [2, 8, 6, 6] view, 6 the
     * transpose, 7 its [16, 6, 6] view, 8 conv3 */
    assert_int_equal(dt_model_value_blocked(&a, 2), 1);         /* bn1 -> relu -> conv2 */
    assert_int_equal(dt_model_value_blocked(&a, 4), 0);         /* conv2's, reshaped */
    assert_int_equal(dt_model_value_blocked(&a, 6), 0);         /* the transpose's */
    assert_int_equal(a.values[5].storage, a.values[4].storage); /* views, no copies */
    assert_int_equal(a.values[7].storage, a.values[6].storage);
    dt_model_init_params(&a, 3);
    dt_model_init_params(&b, 3);
    const size_t nx = dt_model_input_floats_per_sample(&a) * batch;
    float *x = test_alloc(nx * sizeof(float));
    fill_uniform(x, nx, 8, -1, 1);
    const int32_t labels[3] = {2, 5, 7};
    dt_model_zero_grad(&a);
    dt_model_zero_grad(&b);
    loss_at(&a, x, labels, batch);
    loss_at(&b, x, labels, batch);
    const double logits = rel_error(dt_model_logits(&a), dt_model_logits(&b), (size_t)batch * 10);
    dt_model_backward(&a, labels, batch);
    dt_model_backward(&b, labels, batch);
    const double grads = rel_error(a.grads, b.grads, a.n_params);
    print_message("blocked against plain: logits %.2e, gradients %.2e\n", logits, grads);
    assert_true(logits < 1e-5);
    assert_true(grads < 1e-4);
    free(x);
    dt_model_free(&a);
    dt_model_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_matches_numpy),
        cmocka_unit_test(test_transpose_grad_matches_fd),
        cmocka_unit_test(test_transpose_bf16_model_matches_f32),
        cmocka_unit_test(test_blocked_layouts_stop_at_a_reshape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
