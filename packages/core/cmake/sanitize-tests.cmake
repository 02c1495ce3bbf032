# The core's sanitizer tier (test/sanitize, README "Tests"): the config parsers' test under
# AddressSanitizer + UndefinedBehaviorSanitizer, linked with the support part (config, log, os)
# instrumented the same way (CORE support). Included at the end of CMakeLists.txt.
include(${CMAKE_CURRENT_LIST_DIR}/sanitizers.cmake)

heaphook_add_sanitized_program(heaphook_config_test_asan asan
  SOURCES ${HEAPHOOK_CORE_DIR}/test/native/config_test.c
  CORE support
  INCLUDES ${HEAPHOOK_CORE_DIR}/include ${HEAPHOOK_CORE_DIR}/native
  OPTIONS -fno-builtin)
