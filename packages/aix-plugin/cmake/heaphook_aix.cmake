# heaphook_aix.cmake — build an AIX malloc plug-in module and its archive from a heaphook C
# backend. Include after the core's cmake/heaphook.cmake.
#
#   heaphook_aix_add_plugin(<name> ARCHIVE <archive>.a [SOURCES <backend sources>...]
#                           [LIBRARIES <targets>...] [INCLUDES <dirs>...] [RAW] [SERIALIZE])
#
# Builds the shared module mem64.o (mem32.o for a 32-bit build) in
# ${HEAPHOOK_OUTPUT_DIR}/aix/<name>/ and the archive ${HEAPHOOK_OUTPUT_DIR}/<archive>.a holding
# it under that member name. The backend comes as SOURCES, as LIBRARIES (targets such as the
# tlsf package's heaphook::tlsf_backend), or both. Without RAW the module is the adapter
# (native/adapter.c) over the
# backend's heaphook_backend_get() plus the core's config, log and os helpers (heaphook::support); with RAW the
# sources define the AIX entry points themselves (a plug-in that is not a heaphook backend).
# SERIALIZE (not with RAW), for a backend that is not thread safe: once __malloc_init__ has run,
# every entry point takes the adapter's recursive subsystem mutex (HEAPHOOK_AIX_SERIALIZE).
# Exports: exactly the symbols of native/mem.exp (AIX: -bE:mem.exp; Linux: a version script
# generated from it).
include_guard(GLOBAL)

get_filename_component(HEAPHOOK_AIX_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(HEAPHOOK_AIX_EXP ${HEAPHOOK_AIX_DIR}/native/mem.exp)

if(CMAKE_SIZEOF_VOID_P EQUAL 8)
  set(HEAPHOOK_AIX_MEMBER mem64)
else()
  set(HEAPHOOK_AIX_MEMBER mem32)
endif()

# The Linux version script, from the AIX export list.
file(STRINGS ${HEAPHOOK_AIX_EXP} _aix_exp_lines)
set(_aix_symbols "")
foreach(line IN LISTS _aix_exp_lines)
  string(STRIP "${line}" line)
  if(line AND NOT line MATCHES "^[*#]")
    string(APPEND _aix_symbols "    ${line};\n")
  endif()
endforeach()
set(HEAPHOOK_AIX_VERSION_SCRIPT ${CMAKE_BINARY_DIR}/heaphook_aix_mem.map)
file(WRITE ${HEAPHOOK_AIX_VERSION_SCRIPT}.new "{\n  global:\n${_aix_symbols}  local: *;\n};\n")
configure_file(${HEAPHOOK_AIX_VERSION_SCRIPT}.new ${HEAPHOOK_AIX_VERSION_SCRIPT} COPYONLY)

function(heaphook_aix_add_plugin name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "RAW;SERIALIZE" "ARCHIVE" "SOURCES;LIBRARIES;INCLUDES")
  set(target heaphook_aix_${name})
  set(dir ${HEAPHOOK_OUTPUT_DIR}/aix/${name})
  if(ARG_RAW)
    add_library(${target} SHARED ${ARG_SOURCES})
  else()
    add_library(${target} SHARED ${HEAPHOOK_AIX_DIR}/native/adapter.c ${ARG_SOURCES})
    target_link_libraries(${target} PRIVATE heaphook::support)
    if(ARG_SERIALIZE)
      target_compile_definitions(${target} PRIVATE HEAPHOOK_AIX_SERIALIZE=1)
    endif()
  endif()
  target_include_directories(${target} PRIVATE ${HEAPHOOK_AIX_DIR}/native
                                               ${HEAPHOOK_CORE_DIR}/include ${ARG_INCLUDES})
  target_compile_options(${target} PRIVATE ${HEAPHOOK_PRELOAD_FLAGS})
  target_compile_definitions(${target} PRIVATE ${HEAPHOOK_PRELOAD_DEFINITIONS})
  target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES} Threads::Threads)
  set_target_properties(
    ${target}
    PROPERTIES OUTPUT_NAME ${HEAPHOOK_AIX_MEMBER}
               PREFIX ""
               SUFFIX ".o"
               C_STANDARD 11
               C_EXTENSIONS ON
               LINKER_LANGUAGE C
               LIBRARY_OUTPUT_DIRECTORY ${dir})
  if(CMAKE_SYSTEM_NAME STREQUAL "AIX")
    # A shared module (SRE) with no entry point, exporting the list in mem.exp.
    target_link_options(${target} PRIVATE "-Wl,-bE:${HEAPHOOK_AIX_EXP}" -Wl,-bM:SRE
                        -Wl,-bnoentry)
    set(ar_command ar -X32_64 -r -c)
  else()
    target_link_options(${target} PRIVATE "-Wl,--version-script=${HEAPHOOK_AIX_VERSION_SCRIPT}"
                        -Wl,--no-undefined -Wl,-z,now -Wl,-z,relro)
    set_target_properties(${target} PROPERTIES LINK_DEPENDS ${HEAPHOOK_AIX_VERSION_SCRIPT})
    # GNU ar: no symbol table (the members are shared modules), deterministic.
    set(ar_command ar rcSD)
  endif()
  if(ARG_ARCHIVE)
    set(archive ${HEAPHOOK_OUTPUT_DIR}/${ARG_ARCHIVE})
    add_custom_command(
      OUTPUT ${archive}
      COMMAND ${CMAKE_COMMAND} -E rm -f ${archive}
      COMMAND ${ar_command} ${archive} ${HEAPHOOK_AIX_MEMBER}.o
      WORKING_DIRECTORY ${dir}
      DEPENDS ${target}
      COMMENT "archive ${ARG_ARCHIVE} (member ${HEAPHOOK_AIX_MEMBER}.o)")
    add_custom_target(${target}_archive ALL DEPENDS ${archive})
  endif()
endfunction()
