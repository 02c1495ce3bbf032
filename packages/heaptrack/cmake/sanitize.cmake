# The sanitizer tier of heaptrack (test/sanitize, README "Tests"): the ring's and the leak
# table's unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (the table's a debug
# build, with the core's support part built the same way: DEBUG CORE support), and the ring
# under its real concurrency (several writers, one reader, as the drain thread) under
# ThreadSanitizer; the collector's input path
# (ring reader, record checks, writer) fed hostile rings, and the collector itself for the
# socket-level fuzz, under ASan + UBSan. Included at the end of
# CMakeLists.txt; the functions are the core's (packages/core/cmake/sanitizers.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/../../core/cmake/sanitizers.cmake)

heaphook_add_sanitized_program(hh_test_ring_unit_asan asan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../test/native/ring_unit.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/ring.c
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../native/track ${CMAKE_CURRENT_LIST_DIR}/../native
           ${HEAPHOOK_CORE_DIR}/include)
heaphook_add_sanitized_program(hh_test_ring_stress_tsan tsan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../test/native/ring_stress.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/ring.c
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../native/track ${CMAKE_CURRENT_LIST_DIR}/../native
           ${HEAPHOOK_CORE_DIR}/include)
heaphook_add_sanitized_program(hh_test_table_unit_asan asan DEBUG
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../test/native/table_unit.c
  CORE support
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../native ${CMAKE_CURRENT_LIST_DIR}/../native/track
           ${HEAPHOOK_CORE_DIR}/include)
heaphook_add_sanitized_program(hh_test_collector_fuzz_asan asan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../test/native/collector_fuzz.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/ring.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/writer.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/writer_codec.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/writer_check.c
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../native/track ${CMAKE_CURRENT_LIST_DIR}/../native
           ${HEAPHOOK_CORE_DIR}/include
  LIBRARIES ZLIB::ZLIB)
heaphook_add_sanitized_program(heaphook-heaptrack-collector-asan asan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/../native/collector/collector.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/ring.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/writer.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/writer_codec.c
          ${CMAKE_CURRENT_LIST_DIR}/../native/track/writer_check.c
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../native ${HEAPHOOK_CORE_DIR}/include
  LIBRARIES ZLIB::ZLIB)
