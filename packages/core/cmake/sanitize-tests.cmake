# The core's sanitizer tier (test/sanitize, README "Tests"): the config parsers' test under
# AddressSanitizer + UndefinedBehaviorSanitizer, with the support sources (config, log, os)
# compiled instrumented into it. Included at the end of CMakeLists.txt.
include(${CMAKE_CURRENT_LIST_DIR}/sanitizers.cmake)

heaphook_add_sanitized_program(heaphook_config_test_asan asan
  SOURCES ${HEAPHOOK_CORE_DIR}/test/native/config_test.c ${HEAPHOOK_SUPPORT_SOURCES}
  INCLUDES ${HEAPHOOK_CORE_DIR}/include ${HEAPHOOK_CORE_DIR}/native
  OPTIONS -fno-builtin)
