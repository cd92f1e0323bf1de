#include "dtrain/dtype.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [DT_F32] = {"f32", 4}, [DT_BF16] = {"bf16", 2}, [DT_S8] = {"s8", 1},   [DT_U8] = {"u8", 1},
    [DT_S32] = {"s32", 4}, [DT_F64] = {"f64", 8},   [DT_S64] = {"s64", 8},
};
_Static_assert(sizeof dtypes / sizeof *dtypes == DT_DTYPE_COUNT, "one row per dtype");

size_t dt_dtype_size(dt_dtype dtype) {
    return dtypes[dtype].size;
}

const char *dt_dtype_name(dt_dtype dtype) {
    return dtypes[dtype].name;
}
