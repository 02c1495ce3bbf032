# tlsf's sanitizer tier (test/sanitize, README "Tests"): the TLSF core's unit test under
# AddressSanitizer + UndefinedBehaviorSanitizer, the TLSF sources compiled instrumented into it.
# Included at the end of CMakeLists.txt; the function is the core's (cmake/sanitizers.cmake).
include(${HEAPHOOK_CORE_DIR}/cmake/sanitizers.cmake)

heaphook_add_sanitized_program(tlsf_unit_asan asan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../test/native/tlsf_unit.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/tlsf.c ${CMAKE_CURRENT_LIST_DIR}/../native/tlsf_grow.c
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../native ${HEAPHOOK_CORE_DIR}/include
  OPTIONS -fno-builtin)

# The backend's thread heaps (remote frees, the thread cache, heaps released at thread exit and
# adopted, malloc_trim taking released heaps) under ThreadSanitizer: tlsf_backend.c compiled
# instrumented into a stress program that drives the backend through its table (the program's
# malloc stays the sanitizer's), linked with the core's support part instrumented the same way.
heaphook_add_sanitized_program(tlsf_threads_stress_tsan tsan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../test/native/tlsf_threads_stress.c
          ${TLSF_BACKEND_SOURCES} ${CMAKE_CURRENT_LIST_DIR}/../native/tlsf_grow.c
  CORE support
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../native ${HEAPHOOK_CORE_DIR}/include
  DEFINITIONS ${TLSF_BACKEND_DEFINITIONS})
