# heaphook_tier4.cmake — tier4/heaphook's CMake functions, build_library() and test_library(),
# for allocators written against tier4's heaphook::GlobalAllocator. Included by heaphook.cmake,
# so a project that includes heaphook.cmake (or the ament package's heaphook-extras) has them:
#
#   build_library(preloaded_mine src/my_allocator.cpp)           # -> libpreloaded_mine.so
#   target_link_libraries(preloaded_mine PRIVATE tlsf::tlsf)     # keyword form, as tier4's
#   if(BUILD_TESTING)
#     test_library(test_preloaded_mine src/my_allocator.cpp)     # -> test executable + ctest
#     target_link_libraries(test_preloaded_mine tlsf::tlsf)      # plain form, as tier4's
#   endif()
#
#   build_library(<lib_name> <sources>...)
#       As tier4's: shared library target <lib_name>, file lib<lib_name>.so (tier4's own
#       libraries are build_library(preloaded_tlsf ...) -> libpreloaded_tlsf.so), installed to
#       lib/. Here it is heaphook_add_backend(<lib_name> CXX_STDLIB TARGET <lib_name> ...): the
#       heaphook core, the C++ adapter and libstdc++ (tier4's allocators use std::unordered_map,
#       std::pmr ...); the backend's name (heaphook_active_backend) is <lib_name>. Beyond
#       tier4's: the core's normalisation (glibc's edge cases), reallocarray, the statistics
#       calls, fork handlers (the backend's do_fork_* if it has them), the bootstrap arena.
#       The target takes target_link_libraries / target_compile_definitions like any other
#       (keyword signatures: PRIVATE ...).
#   test_library(<test_name> <sources>...)
#       tier4's builds a gtest executable from its test/test_allocator.cpp, the sources and its
#       hooks, so the allocator serves the test program itself. Here: executable <test_name>
#       (in HEAPHOOK_OUTPUT_DIR, installed to lib/ as tier4's) holding the sources, the core and
#       heaphook's conformance suite (test/native/conformance.c), so the allocator serves the
#       whole test program; with GoogleTest (find_package(GTest), else Debian's googletest
#       sources in /usr/src/googletest, else none: HEAPHOOK_GTEST=OFF skips the search) the
#       suite runs as gtest tests (test/native/tier4_gtest.cpp: the conformance groups, and
#       tier4-style calls of GlobalAllocator::get_instance()), without it as a plain program.
#       Registered with add_test(<test_name>) when BUILD_TESTING is on. Only plain-signature
#       target_link_libraries calls are made on it, so tier4's
#       `target_link_libraries(test_preloaded_tlsf tlsf::tlsf)` works unchanged.
include_guard(GLOBAL)

option(HEAPHOOK_GTEST "heaphook: test_library() builds GoogleTest executables when found" ON)

# GoogleTest once per project: an installed package, or Debian's sources (package googletest).
function(_heaphook_find_gtest out)
  if(NOT HEAPHOOK_GTEST)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  if(TARGET GTest::gtest)
    set(${out} GTest::gtest PARENT_SCOPE)
    return()
  endif()
  if(TARGET gtest)  # ament_cmake_gtest (or a parent project) added Debian's sources already
    set(${out} gtest PARENT_SCOPE)
    return()
  endif()
  find_package(GTest QUIET)
  if(TARGET GTest::gtest)
    set(${out} GTest::gtest PARENT_SCOPE)
  elseif(EXISTS /usr/src/googletest/googletest/CMakeLists.txt)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory(/usr/src/googletest/googletest ${CMAKE_BINARY_DIR}/heaphook_googletest
                     EXCLUDE_FROM_ALL)
    set(${out} gtest PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

if(NOT COMMAND build_library)
  function(build_library lib_name)
    set(sources ${ARGN})
    if(NOT sources)
      message(FATAL_ERROR "build_library(${lib_name}): no sources")
    endif()
    heaphook_add_backend(${lib_name} CXX_STDLIB TARGET ${lib_name} ${sources})
    install(TARGETS ${lib_name} LIBRARY DESTINATION lib)
  endfunction()
endif()

if(NOT COMMAND test_library)
  function(test_library test_name)
    set(sources ${ARGN})
    if(NOT sources)
      message(FATAL_ERROR "test_library(${test_name}): no sources")
    endif()
    _heaphook_find_gtest(gtest)
    set(conformance ${HEAPHOOK_CONFORMANCE_SOURCE})
    if(gtest)
      set(conformance ${HEAPHOOK_CORE_DIR}/test/native/tier4_conformance.c)
      set(runner ${HEAPHOOK_CORE_DIR}/test/native/tier4_gtest.cpp)
    endif()
    # The adapter last: its constructor must run after the sources' static constructors.
    add_executable(${test_name} ${sources} ${conformance} ${runner} ${HEAPHOOK_CXX_ADAPTER})
    target_compile_options(${test_name} PRIVATE ${_heaphook_preload_flags_cxx_stdlib})
    target_compile_definitions(
      ${test_name} PRIVATE ${_heaphook_preload_definitions} HEAPHOOK_BACKEND_NAME="${test_name}"
                           HEAPHOOK_CXX_STDLIB=1 HEAPHOOK_CONFORMANCE_BACKEND="${test_name}")
    target_include_directories(${test_name} PRIVATE ${HEAPHOOK_CORE_DIR}/include)
    # The suite with -fno-builtin (gcc would fold the calls under test); under gtest,
    # tier4_conformance.c renames its main() for the runner.
    set_source_files_properties(${conformance} PROPERTIES COMPILE_OPTIONS -fno-builtin)
    target_include_directories(${test_name} PRIVATE ${HEAPHOOK_CORE_DIR}/test/native)
    # The core's objects in the executable: its malloc is the process's (exported, -rdynamic,
    # so the suite's dlsym(RTLD_DEFAULT, "heaphook_active_backend") finds it).
    target_link_libraries(
      ${test_name} heaphook_core_objects heaphook_interpose_objects heaphook_bootstrap_objects
      heaphook_support_objects heaphook_reloc_objects ${gtest} Threads::Threads ${CMAKE_DL_LIBS})
    set_target_properties(
      ${test_name}
      PROPERTIES ENABLE_EXPORTS ON
                 C_STANDARD 11
                 C_EXTENSIONS ON
                 CXX_STANDARD 17
                 CXX_EXTENSIONS OFF
                 RUNTIME_OUTPUT_DIRECTORY ${HEAPHOOK_OUTPUT_DIR})
    install(TARGETS ${test_name} DESTINATION lib)
    if(BUILD_TESTING)
      add_test(NAME ${test_name} COMMAND ${test_name})
      set_tests_properties(${test_name} PROPERTIES ENVIRONMENT HEAPHOOK_CONFORMANCE_QUIET=1)
    endif()
  endfunction()
endif()
