# ucm-hooks' sanitizer tier (test/sanitize, README "Tests"): the handler chain's readers and
# writers (native/ucm.c) under ThreadSanitizer: the library's sources compiled instrumented into
# test/native/ucm_dispatch_stress.c, linked with the core's support and reloc parts instrumented
# the same way (CORE). Included at the end of CMakeLists.txt; the function is the core's
# (cmake/sanitizers.cmake).
include(${HEAPHOOK_CORE_DIR}/cmake/sanitizers.cmake)

heaphook_add_sanitized_program(ucm_dispatch_stress_tsan tsan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../test/native/ucm_dispatch_stress.c
          ${UCM_SOURCES}
  CORE support reloc
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../include ${HEAPHOOK_CORE_DIR}/include
           ${HEAPHOOK_CORE_DIR}/native
  DEFINITIONS HEAPHOOK_UCM_NO_LIBC_NAMES
  # atomic_thread_fence (the readers' fence when membarrier is missing) is invisible to TSan: the
  # happens-before edges it checks are the release/acquire pairs on seq and ucm_current.
  OPTIONS -Wno-tsan)
