#include "dtrain/version.h"

#include "dt_git_commit.h" /* generated at every build: cmake/git_version.cmake */

#ifndef DT_VERSION
#error "DT_VERSION comes from CMakeLists.txt (project VERSION)"
#endif

const char *dt_version(void) {
    return DT_VERSION;
}

const char *dt_version_commit(void) {
    return DT_GIT_COMMIT;
}
