# Loaded by find_package(heaphook) (ament CONFIG_EXTRAS): the CMake module of heaphook's core
# (heaphook_add_backend, heaphook_add_backend_test, and tier4's build_library / test_library)
# and the TLSF 2.x API target tlsf::tlsf, from this package's share folder.
include("${heaphook_DIR}/../core/cmake/heaphook.cmake")
include("${heaphook_DIR}/../tlsf/cmake/heaphook_tlsf.cmake")
