/* The layout pass (model.c): activations kept in oneDNN's nChw16c between convs give
 * the same bits as NCHW everywhere — logits, loss, every parameter gradient and the
 * BatchNorm running statistics after a training step, then eval logits — and the
 * pass blocks what it should (and only that). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtrain/backend.h"
#include "dtrain/model.h"
#include "dtrain/zoo.h"
#include "testutil.h"

typedef struct step_result {
    double loss;
    float *logits, *grads, *buffers, *eval_logits;
    int blocked_storages;
} step_result;

static step_result run_step(const dt_model_spec *spec, int batch, int plain) {
    dt_model m;
    dt_error err;
    if (dt_zoo_build(&m, spec, &err)) fail_msg("%s", err.msg);
    m.conv_backend = DT_CONV_DNNL;
    m.plain_layouts = plain;
    if (dt_model_alloc(&m, batch, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 7);
    step_result r = {0};
    for (int s = 0; s < m.n_storages; s++) r.blocked_storages += m.storages[s].blocked;
    fill_uniform(dt_model_input_data(&m), dt_model_input_floats_per_sample(&m) * batch, 3, -1, 1);
    int32_t *labels = test_alloc(sizeof(int32_t) * batch);
    for (int i = 0; i < batch; i++) labels[i] = (i * 7) % m.classes;
    dt_model_zero_grad(&m);
    dt_model_forward(&m, batch);
    r.loss = dt_model_loss(&m, labels, batch, NULL);
    dt_model_backward(&m, labels, batch);
    const size_t nl = (size_t)batch * m.classes;
    r.logits = test_alloc(sizeof(float) * nl);
    memcpy(r.logits, dt_model_logits(&m), sizeof(float) * nl);
    r.grads = test_alloc(sizeof(float) * m.n_params);
    memcpy(r.grads, m.grads, sizeof(float) * m.n_params);
    r.buffers = test_alloc(sizeof(float) * (m.n_buffers + 1));
    memcpy(r.buffers, m.buffers, sizeof(float) * m.n_buffers);
    m.training = 0;
    dt_model_forward(&m, batch);
    r.eval_logits = test_alloc(sizeof(float) * nl);
    memcpy(r.eval_logits, dt_model_logits(&m), sizeof(float) * nl);
    free(labels);
    dt_model_free(&m);
    return r;
}

static void free_result(step_result *r) {
    free(r->logits), free(r->grads), free(r->buffers), free(r->eval_logits);
}

/* Runs the model both ways; the blocked run must block something and match bit for bit. */
static void check_same_bits(const char *name, int width, int c, int h, int w, int batch) {
    dt_model_spec spec;
    assert_int_equal(dt_zoo_default_spec(&spec, name), 0);
    spec.width = width;
    spec.in_c = c, spec.in_h = h, spec.in_w = w;
    spec.classes = 10;
    spec.no_dropout = 1;
    dt_model probe;
    dt_error err;
    if (dt_zoo_build(&probe, &spec, &err)) fail_msg("%s", err.msg);
    const size_t n_params = probe.n_params, n_buffers = probe.n_buffers;
    dt_model_free(&probe);
    step_result blocked = run_step(&spec, batch, 0), plain = run_step(&spec, batch, 1);
    print_message("%s width %d: %d blocked storages, loss %.7f\n", name, width,
                  blocked.blocked_storages, blocked.loss);
    assert_true(blocked.blocked_storages > 0);
    assert_int_equal(plain.blocked_storages, 0);
    assert_true(isfinite(blocked.loss));
    assert_memory_equal(&blocked.loss, &plain.loss, sizeof(double));
    assert_memory_equal(blocked.logits, plain.logits, sizeof(float) * batch * 10);
    assert_memory_equal(blocked.grads, plain.grads, sizeof(float) * n_params);
    assert_memory_equal(blocked.buffers, plain.buffers, sizeof(float) * n_buffers);
    assert_memory_equal(blocked.eval_logits, plain.eval_logits, sizeof(float) * batch * 10);
    free_result(&blocked);
    free_result(&plain);
}

static void test_resnet50_blocked_matches_plain(void **state) {
    (void)state;
    check_same_bits("resnet50", 16, 3, 32, 32, 3);
}

static void test_resnet18_blocked_matches_plain(void **state) {
    (void)state;
    check_same_bits("resnet18", 16, 3, 32, 32, 3);
}

static void test_vgg16_bn_blocked_matches_plain(void **state) {
    (void)state;
    check_same_bits("vgg16_bn", 16, 3, 32, 32, 2);
}

static void test_googlenet_blocked_matches_plain(void **state) {
    (void)state;
    check_same_bits("googlenet", 16, 3, 32, 32, 2);
}

/* What the pass decides: conv outputs with 16k channels that reach only convs, BN,
 * ReLU, adds, maxpool and the global pool are blocked; the input, anything with other channel
 * counts, and what a plain-only op (linear, concat) touches are not; maxpool
 * keeps its input's layout. */
static void test_layout_choices(void **state) {
    (void)state;
    dt_model m;
    dt_error err;
    dt_model_init_empty(&m, "layouts", 10);
    int x = dt_model_input(&m, 3, 8, 8);
    int a = dt_model_conv2d(&m, "a", x, 16, 3, 1, 1, 0); /* -> bn -> relu: blocked */
    int b = dt_model_relu(&m, dt_model_batchnorm2d(&m, "bn", a));
    int c = dt_model_conv2d(&m, "c", b, 16, 3, 1, 1, 0); /* -> add with b: blocked */
    int s = dt_model_add(&m, b, c);
    int d = dt_model_conv2d(&m, "d", s, 8, 1, 1, 0, 0);  /* 8 channels: plain */
    int e = dt_model_conv2d(&m, "e", d, 32, 1, 1, 0, 0); /* -> maxpool -> concat: plain */
    int p = dt_model_maxpool2d(&m, e, 2, 2);
    int q = dt_model_concat(&m, (int[]){p, p}, 2);
    int e2 = dt_model_conv2d(&m, "e2", s, 16, 1, 1, 0, 0); /* -> maxpool -> conv: blocked */
    int p2 = dt_model_maxpool2d(&m, e2, 2, 2);
    dt_model_conv2d(&m, "e3", p2, 16, 1, 1, 0, 0);
    int f = dt_model_conv2d(&m, "f", q, 16, 1, 1, 0, 0); /* -> global pool: blocked */
    int g = dt_model_adaptive_avgpool2d(&m, f, 1, 1);    /* NCHW out */
    dt_model_linear(&m, "fc", dt_model_flatten(&m, g), 10);
    m.conv_backend = DT_CONV_DNNL;
    if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    assert_int_equal(dt_model_value_blocked(&m, x), 0);
    assert_int_equal(dt_model_value_blocked(&m, a), 1);
    assert_int_equal(dt_model_value_blocked(&m, b), 1);
    assert_int_equal(dt_model_value_blocked(&m, c), 1);
    assert_int_equal(dt_model_value_blocked(&m, s), 1);
    assert_int_equal(dt_model_value_blocked(&m, d), 0);
    assert_int_equal(dt_model_value_blocked(&m, e), 0);
    assert_int_equal(dt_model_value_blocked(&m, p), 0);
    assert_int_equal(dt_model_value_blocked(&m, q), 0);
    assert_int_equal(dt_model_value_blocked(&m, e2), 1);
    assert_int_equal(dt_model_value_blocked(&m, p2), 1);
    assert_int_equal(dt_model_value_blocked(&m, f), 1);
    assert_int_equal(dt_model_value_blocked(&m, g), 0);
    /* b feeds conv c and the add: two readers; c only the add */
    assert_int_equal(m.storages[m.values[b].storage].readers, 2);
    assert_int_equal(m.storages[m.values[c].storage].readers, 1);
    dt_model_free(&m);
    /* The im2col backend keeps everything NCHW. */
    dt_model_spec spec;
    assert_int_equal(dt_zoo_default_spec(&spec, "resnet18"), 0);
    spec.width = 16;
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    m.conv_backend = DT_CONV_IM2COL;
    if (dt_model_alloc(&m, 1, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < m.n_storages; i++) assert_int_equal(m.storages[i].blocked, 0);
    dt_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_choices),
        cmocka_unit_test(test_resnet50_blocked_matches_plain),
        cmocka_unit_test(test_resnet18_blocked_matches_plain),
        cmocka_unit_test(test_vgg16_bn_blocked_matches_plain),
        cmocka_unit_test(test_googlenet_blocked_matches_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
