/* libFuzzer target for every CSV reader (all through textfile.h's dt_csv): the input
 * read as a report's --times CSV, a fit-speed CSV (both kinds), a fit-jobs table and
 * a fit-loss CSV. Build and run:
 * scripts/fuzz.sh SECONDS csv. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "perfmodel/perfinput.h"
#include "study/scale_csv.h"

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
    dt_loss_points pts_loss;
    if (dt_loss_points_from_csv(path, 2, &pts_loss, &err) == 0) dt_loss_points_free(&pts_loss);
    return 0;
}
