/* libFuzzer target for the run-log reader: the input read as a whole log (as report,
 * plots and fit-loss read it, smoothing windows included) and its first line parsed
 * alone (as the sweep's live progress does). Build and run: scripts/fuzz.sh SECONDS runlog. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "metrics/runlog.h"
#include "perfmodel/perfinput.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dt_error err;
    char *line = malloc(size + 1);
    if (!line) return 0;
    memcpy(line, data, size);
    line[size] = 0;
    dt_runlog_entry entry;
    dt_runlog_parse_line(line, &entry, &err);
    free(line);
    const char *path = fuzz_file(data, size, ".jsonl");
    if (!path) return 0;
    dt_runlog_contents c;
    if (dt_runlog_load(path, &c, &err) == 0) dt_runlog_contents_free(&c);
    for (long every = 0; every <= 3; every += 3) {
        dt_loss_points pts;
        if (dt_loss_points_from_log(path, every, &pts, &err) == 0) dt_loss_points_free(&pts);
    }
    return 0;
}
