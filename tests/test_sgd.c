/* SGD follows torch.optim.SGD: weight decay added to the gradient, momentum buffer
 * initialised to the first gradient (not zero), dampening 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "dtrain/sgd.h"

static void test_sgd_matches_torch_semantics(void **state) {
    (void)state;
    dt_sgd opt;
    dt_error err;
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
    assert_int_equal(dt_sgd_init(&opt, 2, 0.1f, 0.9f, 0.01f, &err), 0);
    dt_sgd_step(&opt, p, g);
    /* d = g + wd*p = {0.51, 0.23}; v = d; p -= 0.1*v */
    assert_float_equal(p[0], 1.0f - 0.051f, 1e-7);
    assert_float_equal(p[1], -2.0f - 0.023f, 1e-7);
    assert_float_equal(opt.velocity[0], 0.51f, 1e-7);
    dt_sgd_step(&opt, p, g);
    /* d = {0.5 + 0.01*0.949, 0.25 - 0.01*2.023}; v = 0.9*v + d */
    float v0 = 0.9f * 0.51f + (0.5f + 0.01f * 0.949f);
    float v1 = 0.9f * 0.23f + (0.25f - 0.01f * 2.023f);
    assert_float_equal(opt.velocity[0], v0, 1e-6);
    assert_float_equal(p[0], 0.949f - 0.1f * v0, 1e-6);
    assert_float_equal(p[1], -2.023f - 0.1f * v1, 1e-6);
    assert_int_equal(opt.steps, 2);
    dt_sgd_free(&opt);
}

static void test_sgd_without_momentum_is_plain_gradient_descent(void **state) {
    (void)state;
    dt_sgd opt;
    dt_error err;
    float p[1] = {3.0f}, g[1] = {2.0f};
    assert_int_equal(dt_sgd_init(&opt, 1, 0.5f, 0.0f, 0.0f, &err), 0);
    assert_null(opt.velocity);
    dt_sgd_step(&opt, p, g);
    dt_sgd_step(&opt, p, g);
    assert_float_equal(p[0], 1.0f, 1e-7);
    dt_sgd_free(&opt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_matches_torch_semantics),
        cmocka_unit_test(test_sgd_without_momentum_is_plain_gradient_descent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
