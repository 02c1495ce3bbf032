# tlsf's sanitizer tier (test/sanitize, README "Tests"): the TLSF core's unit test under
# AddressSanitizer + UndefinedBehaviorSanitizer, the TLSF sources compiled instrumented into it.
# Included at the end of CMakeLists.txt; the function is the core's (cmake/sanitizers.cmake).
include(${HEAPHOOK_CORE_DIR}/cmake/sanitizers.cmake)

heaphook_add_sanitized_program(tlsf_unit_asan asan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../test/native/tlsf_unit.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/tlsf.c ${CMAKE_CURRENT_LIST_DIR}/../native/tlsf_grow.c
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../native ${HEAPHOOK_CORE_DIR}/include
  OPTIONS -fno-builtin)
