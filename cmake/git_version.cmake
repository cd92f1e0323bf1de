# Writes OUT (a header defining DT_GIT_COMMIT) from `git describe` of SRC; rewrites it
# only when the text changes, so a build without new commits recompiles nothing.
# Run at every build (add_custom_target in CMakeLists.txt): a version fixed at configure
# time would name a stale commit after the next `git commit` and `make`.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define DT_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
