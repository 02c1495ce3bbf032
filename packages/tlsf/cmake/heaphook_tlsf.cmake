# heaphook_tlsf.cmake — the TLSF backend as CMake targets, for a package that builds it into
# another kind of library (aix-plugin's plug-in archive) instead of a preload library.
# Include after the core's cmake/heaphook.cmake:
#
#   include(${HEAPHOOK_TLSF_DIR}/cmake/heaphook_tlsf.cmake)
#   target_link_libraries(my_module PRIVATE heaphook::tlsf_backend)
#
# Targets (static libraries of position-independent objects, compiled with the core's preload
# flags, built only when something links them):
#   heaphook::tlsf_grow     the pool growth policy (tlsf_grow.h: INITIAL_MEMPOOL_SIZE, then
#                           ADDITIONAL_MEMPOOL_SIZE doubled until a request fits)
#   heaphook::tlsf_backend  the backend's C table, heaphook_backend_get() (heaphook/backend.h);
#                           links heaphook::tlsf_grow and the core's heaphook::support
#   heaphook::tlsf2 (also tlsf::tlsf, the ROS tlsf package's target name)
#                           the TLSF 2.x API (include/tlsf/tlsf.h: init_memory_pool,
#                           add_new_area, tlsf_malloc(size), tlsf_free ...) over heaphook's TLSF,
#                           for tier4-style allocators (native/tlsf2_compat.c; heaphook's own
#                           TLSF, native/tlsf.c, is compiled into it with its colliding
#                           names renamed by native/tlsf2_rename.h, force-included)
# Variables:
#   HEAPHOOK_TLSF_DIR       set by this module: the @heaphook/tlsf package directory.
#   TLSF_BACKEND_SOURCES    the backend's files and the TLSF core (native/backend_internal.h has
#                           the map), every one compiled with TLSF_BACKEND_DEFINITIONS
#   TLSF_BACKEND_DEFINITIONS  TLSF_FREE_CHECK and TLSF_HEAD_KEY, from the TLSF_FREE_CHECK option
include_guard(GLOBAL)

get_filename_component(HEAPHOOK_TLSF_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

# TLSF_FREE_CHECK=OFF builds the backend without the check on every free, realloc and
# malloc_usable_size, to measure what it costs (README "The check on every call").
option(TLSF_FREE_CHECK "tlsf: check the pointer of every free, realloc and malloc_usable_size" ON)
set(TLSF_BACKEND_SOURCES)
foreach(file tlsf_backend.c backend_entry.c backend_pool.c backend_check.c backend_heaps.c
             backend_trim.c backend_stats.c tlsf.c)
  list(APPEND TLSF_BACKEND_SOURCES ${HEAPHOOK_TLSF_DIR}/native/${file})
endforeach()
if(TLSF_FREE_CHECK)
  set(TLSF_BACKEND_DEFINITIONS TLSF_FREE_CHECK=1 TLSF_HEAD_KEY=1)
else()
  set(TLSF_BACKEND_DEFINITIONS TLSF_FREE_CHECK=0 TLSF_HEAD_KEY=0)
endif()

function(_heaphook_tlsf_library target alias)
  add_library(${target} STATIC EXCLUDE_FROM_ALL ${ARGN})
  target_compile_options(${target} PRIVATE ${HEAPHOOK_PRELOAD_FLAGS})
  target_compile_definitions(${target} PRIVATE ${HEAPHOOK_PRELOAD_DEFINITIONS})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 11
                                             C_EXTENSIONS ON LINKER_LANGUAGE C)
  add_library(heaphook::${alias} ALIAS ${target})
endfunction()

if(NOT TARGET heaphook_tlsf_grow)
  _heaphook_tlsf_library(heaphook_tlsf_grow tlsf_grow ${HEAPHOOK_TLSF_DIR}/native/tlsf_grow.c)
  target_include_directories(heaphook_tlsf_grow PUBLIC ${HEAPHOOK_TLSF_DIR}/native)
  target_link_libraries(heaphook_tlsf_grow PUBLIC heaphook::support)

  _heaphook_tlsf_library(heaphook_tlsf_backend tlsf_backend ${TLSF_BACKEND_SOURCES})
  target_compile_definitions(heaphook_tlsf_backend PRIVATE ${TLSF_BACKEND_DEFINITIONS})
  target_link_libraries(heaphook_tlsf_backend PUBLIC heaphook::tlsf_grow heaphook::support)
endif()

if(NOT TARGET heaphook_tlsf2)
  _heaphook_tlsf_library(heaphook_tlsf2 tlsf2 ${HEAPHOOK_TLSF_DIR}/native/tlsf2_compat.c
                         ${HEAPHOOK_TLSF_DIR}/native/tlsf.c)
  # tlsf.c's tlsf_malloc, tlsf_free ... take other arguments than TLSF 2.x's functions of the
  # same names, which tlsf2_compat.c defines: this target's copy of tlsf.c is compiled with
  # them renamed heaphook_tlsf2_impl_* (target options only: the backend's tlsf.c is untouched).
  target_compile_options(heaphook_tlsf2 PRIVATE -include
                                                ${HEAPHOOK_TLSF_DIR}/native/tlsf2_rename.h)
  target_include_directories(heaphook_tlsf2 PUBLIC ${HEAPHOOK_TLSF_DIR}/include
                             PRIVATE ${HEAPHOOK_TLSF_DIR}/native)
  target_link_libraries(heaphook_tlsf2 PUBLIC Threads::Threads)
  if(NOT TARGET tlsf::tlsf)
    add_library(tlsf::tlsf ALIAS heaphook_tlsf2)
  endif()
endif()
