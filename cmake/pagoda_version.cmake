# Run at every build (cmake -P): writes OUT from IN with PAGODA_VERSION and the git commit of
# SOURCE_DIR ("unknown" outside a checkout or without git). configure_file rewrites OUT only
# when its text changes, so a build on the same commit recompiles nothing.
set(PAGODA_GIT_COMMIT unknown)
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=7 HEAD
    WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE commit RESULT_VARIABLE failed
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT failed)
    set(PAGODA_GIT_COMMIT ${commit})
    # Uncommitted changes to tracked files: say so rather than claim the commit.
    execute_process(COMMAND ${GIT_EXECUTABLE} diff --quiet HEAD --
      WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE dirty ERROR_QUIET)
    if(dirty)
      set(PAGODA_GIT_COMMIT ${commit}-dirty)
    endif()
  endif()
endif()
configure_file(${IN} ${OUT} @ONLY)
