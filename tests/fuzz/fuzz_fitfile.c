/* libFuzzer target for the saved fits (fit-loss --save, fit-speed --save) that
 * predict reads. Build and run: scripts/fuzz.sh SECONDS fitfile. */
#include "fuzz_file.h"
#include "perfmodel/fitfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, ".json");
    if (!path) return 0;
    dt_error err;
    dt_loss_fit lf;
    double last, converge;
    dt_loss_fit_load(path, &lf, &last, &converge, &err);
    dt_speed_fit sf;
    dt_speed_fit_load(path, &sf, &err);
    return 0;
}
