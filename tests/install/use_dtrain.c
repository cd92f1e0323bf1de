/* A program outside the tree built against an installed dtrain (tests/test_install.sh):
 * builds lenet5 through the public API and prints its version and parameter count. */
#include <stdio.h>

#include <dtrain/dtrain.h>

int main(void) {
    dt_model_spec spec;
    if (dt_zoo_default_spec(&spec, "lenet5")) return 1;
    dt_model m;
    dt_error err;
    if (dt_zoo_build(&m, &spec, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("dtrain %s: lenet5 has %zu parameters\n", dt_version(), (size_t)m.n_params);
    dt_model_free(&m);
    return 0;
}
