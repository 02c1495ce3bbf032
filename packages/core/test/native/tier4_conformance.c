/* tier4_conformance.c — the conformance suite with its main() renamed, for test_library()'s
 * GoogleTest runner (tier4_gtest.cpp), which calls it. */
#define main heaphook_conformance_main
#include "conformance.c"
