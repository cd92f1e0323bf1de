/* libFuzzer target for every CSV reader: the input read as a report's --times CSV, a
 * fit-speed CSV (both kinds) and a fit-jobs table. Build and run:
 * scripts/fuzz.sh SECONDS csv. */
#include <stdlib.h>
#include <string.h>

#include "dtrain/perfinput.h"
#include "dtrain/scaling.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, ".csv");
    if (!path) return 0;
    dt_error err;
    dt_scale_study s;
    memset(&s, 0, sizeof s);
    dt_scale_read_csv(&s, path, &err);
    dt_scale_free(&s);
    static dt_speed_point pts[DT_SPEED_MAX_POINTS];
    int n;
    dt_speed_points_read_csv(path, DT_SPEED_PS, pts, &n, &err);
    dt_speed_points_read_csv(path, DT_SPEED_ALLREDUCE, pts, &n, &err);
    static dt_job_table t;
    dt_job_table_read(path, &t, &err);
    return 0;
}
