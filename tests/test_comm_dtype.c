/* The 16-bit wire formats (comm_dtype.h): fp16 against GCC's _Float16 conversions (an
 * independent round-to-nearest-even), bf16 against the nearer of its two neighbours
 * computed in double, and the edges: saturation, underflow, inf, NaN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "parallel/comm_dtype.h"

static float one(dt_comm_dtype t, float x) {
    uint16_t h;
    float y;
    dt_comm_pack(t, &h, &x, 1);
    dt_comm_unpack(t, &y, &h, 1);
    return y;
}

static float random_float(dt_rng *rng) {
    /* magnitudes from 2^-30 to 2^17: subnormal fp16 up to fp16's overflow */
    const float m = 1.0f + (float)dt_rng_below(rng, 1u << 23) * 0x1p-23f;
    const int e = (int)dt_rng_below(rng, 48) - 30;
    const float v = ldexpf(m, e);
    return dt_rng_below(rng, 2) ? -v : v;
}

static void test_fp16_matches_float16(void **state) {
    (void)state;
    dt_rng rng = dt_rng_make(7, 0);
    long checked = 0;
    for (int i = 0; i < 1000000; i++) {
        const float x = random_float(&rng);
        if (fabsf(x) >= 65504.0f) continue; /* _Float16 gives inf there; we saturate */
        const float want = (float)(_Float16)x;
        const float got = one(DT_COMM_FP16, x);
        if (memcmp(&want, &got, sizeof got))
            fail_msg("fp16(%a) = %a, _Float16 gives %a", x, got, want);
        checked++;
    }
    assert_true(checked > 900000);
    /* every fp16 value survives a round trip bit for bit (NaNs aside) */
    for (uint32_t h = 0; h < 65536; h++) {
        const uint16_t in = (uint16_t)h;
        float f;
        uint16_t back;
        dt_comm_unpack(DT_COMM_FP16, &f, &in, 1);
        if (isnan(f)) continue;
        _Float16 ref;
        memcpy(&ref, &in, sizeof ref);
        assert_float_equal(f, (float)ref, 0);
        dt_comm_pack(DT_COMM_FP16, &back, &f, 1);
        assert_int_equal(back, in);
    }
}

static void test_fp16_edges(void **state) {
    (void)state;
    assert_float_equal(one(DT_COMM_FP16, 70000.0f), 65504.0f, 0);
    assert_float_equal(one(DT_COMM_FP16, -1e30f), -65504.0f, 0);
    assert_float_equal(one(DT_COMM_FP16, 65519.0f), 65504.0f, 0);
    assert_true(isinf(one(DT_COMM_FP16, INFINITY)) && one(DT_COMM_FP16, -INFINITY) < 0);
    assert_true(isnan(one(DT_COMM_FP16, NAN)));
    assert_float_equal(one(DT_COMM_FP16, 0x1p-26f), 0.0f, 0);
    assert_float_equal(one(DT_COMM_FP16, 0x1p-25f), 0.0f, 0); /* tie: to even, 0 */
    assert_float_equal(one(DT_COMM_FP16, 0x1.8p-25f), 0x1p-24f, 0);
}

static void test_bf16_rounds_to_nearest_even(void **state) {
    (void)state;
    dt_rng rng = dt_rng_make(8, 0);
    for (int i = 0; i < 1000000; i++) {
        const float x = dt_rng_normal(&rng) * ldexpf(1.0f, (int)dt_rng_below(&rng, 60) - 30);
        uint32_t u;
        memcpy(&u, &x, sizeof u);
        const uint32_t lo_bits = u & 0xffff0000u, hi_bits = lo_bits + 0x10000u;
        float lo, hi;
        memcpy(&lo, &lo_bits, sizeof lo);
        memcpy(&hi, &hi_bits, sizeof hi);
        const double dlo = fabs((double)x - lo), dhi = fabs((double)hi - x);
        const float want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo_bits >> 16) & 1u) ? hi : lo;
        const float got = one(DT_COMM_BF16, x);
        if (memcmp(&want, &got, sizeof got)) fail_msg("bf16(%a) = %a, want %a", x, got, want);
    }
    assert_true(isnan(one(DT_COMM_BF16, NAN)));
    assert_true(isinf(one(DT_COMM_BF16, INFINITY)));
    assert_float_equal(one(DT_COMM_BF16, 1e38f), 1e38f, 1e38f / 128);
}

static void test_unpack_add_and_round(void **state) {
    (void)state;
    float x[4] = {1.0f, -2.5f, 0.1f, 3e-3f}, acc[4] = {1, 1, 1, 1}, r[4];
    uint16_t h[4];
    for (int t = DT_COMM_BF16; t <= DT_COMM_FP16; t++) {
        dt_comm_pack((dt_comm_dtype)t, h, x, 4);
        float a[4];
        memcpy(a, acc, sizeof a);
        dt_comm_unpack_add((dt_comm_dtype)t, a, h, 4);
        memcpy(r, x, sizeof r);
        dt_comm_round((dt_comm_dtype)t, r, 4);
        for (int i = 0; i < 4; i++) {
            assert_float_equal(a[i], acc[i] + r[i], 0);
            assert_float_equal(r[i], one((dt_comm_dtype)t, x[i]), 0);
            assert_float_equal(r[i], x[i], fabsf(x[i]) / (t == DT_COMM_BF16 ? 256 : 2048));
        }
    }
    dt_comm_dtype d;
    assert_int_equal(dt_comm_dtype_parse("bf16", &d), 0);
    assert_int_equal(d, DT_COMM_BF16);
    assert_int_equal(dt_comm_dtype_parse("fp8", &d), -1);
    assert_int_equal(dt_comm_dtype_size(DT_COMM_FP16), 2);
    assert_int_equal(dt_comm_dtype_size(DT_COMM_FP32), 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp16_matches_float16),
        cmocka_unit_test(test_fp16_edges),
        cmocka_unit_test(test_bf16_rounds_to_nearest_even),
        cmocka_unit_test(test_unpack_add_and_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
