/* Which dtrain this is: the release number and the commit it was built from. */
#ifndef DTRAIN_VERSION_H
#define DTRAIN_VERSION_H

/* "0.9.0" (CMake's project version) */
const char *dt_version(void);
/* `git describe --always --dirty` of the source tree at build time, "unknown" outside git */
const char *dt_version_commit(void);

#endif
