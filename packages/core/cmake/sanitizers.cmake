# sanitizers.cmake — the sanitizer tier: native unit and stress programs built a second time
# with a sanitizer, as extra executables of the package's own CMake project (only the sources a
# program names are compiled again, so the tier costs a few files per package, not a second
# build). Preload libraries are never sanitized (a sanitizer's runtime interposes malloc
# itself): each program links the modules it tests directly.
#
#   include(${HEAPHOOK_CORE_DIR}/cmake/sanitizers.cmake)   # or ../core/cmake/sanitizers.cmake
#   heaphook_add_sanitized_program(<name> <asan|tsan> SOURCES <file>... [DEBUG]
#       [CORE <part>...] [INCLUDES <dir>...] [DEFINITIONS <def>...] [OPTIONS <flag>...]
#       [LIBRARIES <lib>...])
#
#   asan: -fsanitize=address,undefined -fno-sanitize-recover=all (AddressSanitizer with
#         LeakSanitizer, and UndefinedBehaviorSanitizer; the first report ends the program)
#   tsan: -fsanitize=thread
#   Both: -O1 -g -fno-omit-frame-pointer, C11 with GNU extensions, _GNU_SOURCE, threads and
#   libdl linked; the program lands in HEAPHOOK_OUTPUT_DIR. Every source listed is compiled with
#   the sanitizer (instrumented), so list the module under test, not a prebuilt library of it.
#   CORE links the core's parts the module needs, instrumented with the same sanitizer: support
#   (config, log, os, lockrank: what heaphook::support holds), reloc (the GOT patcher) and
#   bootstrap. Each is one static library per kind and project, heaphook_<part>_<kind>
#   (heaphook::<part>_<kind>), compiled like the program and built only when a program links
#   it, so a package never lists the core's sources itself. DEBUG compiles the program and its
#   parts (heaphook_<part>_<kind>_debug) with HEAPHOOK_DEBUG=1: the debug assertions and the
#   lock-rank checks run under the sanitizer too. Needs heaphook.cmake included first.
#
# Variables:
#   HEAPHOOK_SANITIZERS  ON (default): build the programs when the compiler can link each
#                        sanitizer's runtime (Debian: libasan8 libubsan1 libtsan2, installed with
#                        gcc 12); OFF or no runtime: not built, and the package's
#                        test/sanitize tests are skipped, saying why.
include_guard(GLOBAL)
include(CheckCSourceCompiles)

option(HEAPHOOK_SANITIZERS "heaphook: build the sanitizer tier's test programs" ON)

set(_heaphook_sanitize_asan -fsanitize=address,undefined -fno-sanitize-recover=all)
set(_heaphook_sanitize_tsan -fsanitize=thread)

# Does the compiler link a program with this sanitizer? Checked once per kind and project.
function(_heaphook_sanitizer_usable kind result)
  if(DEFINED HEAPHOOK_SANITIZER_${kind}_USABLE)
    set(${result} ${HEAPHOOK_SANITIZER_${kind}_USABLE} PARENT_SCOPE)
    return()
  endif()
  set(CMAKE_REQUIRED_FLAGS "${_heaphook_sanitize_${kind}}")
  string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${CMAKE_REQUIRED_FLAGS}")
  set(CMAKE_REQUIRED_LINK_OPTIONS ${_heaphook_sanitize_${kind}})
  set(CMAKE_REQUIRED_QUIET ON)
  check_c_source_compiles("int main(void) { return 0; }" HEAPHOOK_SANITIZER_${kind}_USABLE)
  if(NOT HEAPHOOK_SANITIZER_${kind}_USABLE)
    message(WARNING "heaphook: the compiler cannot link -fsanitize for ${kind} "
                    "(install libasan8 libubsan1 libtsan2): the sanitizer tier is not built")
  endif()
  set(${result} ${HEAPHOOK_SANITIZER_${kind}_USABLE} PARENT_SCOPE)
endfunction()

# The flags of every instrumented object: the program's and the core parts' it links.
function(_heaphook_sanitized_flags target kind)
  target_compile_options(${target} PRIVATE ${_heaphook_sanitize_${kind}} -O1 -g
                                           -fno-omit-frame-pointer -Wall)
  target_compile_definitions(${target} PRIVATE _GNU_SOURCE)
  set_target_properties(${target} PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
endfunction()

# heaphook_<part>_<kind>[_debug]: a part of the core compiled with the sanitizer (and, for
# DEBUG, with HEAPHOOK_DEBUG=1), heaphook.cmake's _heaphook_core_part_variant.
function(_heaphook_sanitized_core part kind debug)
  set(variant ${kind})
  set(definitions)
  if(debug)
    set(variant ${kind}_debug)
    set(definitions HEAPHOOK_DEBUG=1)
  endif()
  _heaphook_core_part_variant(${part} ${variant} OPTIONS ${_heaphook_sanitize_${kind}} -O1 -g
                              -fno-omit-frame-pointer -Wall DEFINITIONS ${definitions})
endfunction()

function(heaphook_add_sanitized_program name kind)
  cmake_parse_arguments(PARSE_ARGV 2 arg "DEBUG" "" "SOURCES;CORE;INCLUDES;DEFINITIONS;OPTIONS;LIBRARIES")
  if(NOT kind MATCHES "^(asan|tsan)$")
    message(FATAL_ERROR "heaphook_add_sanitized_program(${name}): kind is asan or tsan, not ${kind}")
  endif()
  if(NOT HEAPHOOK_SANITIZERS)
    return()
  endif()
  _heaphook_sanitizer_usable(${kind} usable)
  if(NOT usable)
    return()
  endif()
  if(NOT DEFINED HEAPHOOK_OUTPUT_DIR)
    set(HEAPHOOK_OUTPUT_DIR ${CMAKE_BINARY_DIR}/Release)
  endif()
  find_package(Threads REQUIRED)
  set(core_libraries)
  set(variant ${kind})
  if(arg_DEBUG)
    set(variant ${kind}_debug)
    list(APPEND arg_DEFINITIONS HEAPHOOK_DEBUG=1)
  endif()
  foreach(part ${arg_CORE})
    _heaphook_sanitized_core(${part} ${kind} "${arg_DEBUG}")
    list(APPEND core_libraries heaphook_${part}_${variant})
  endforeach()
  add_executable(${name} ${arg_SOURCES})
  _heaphook_sanitized_flags(${name} ${kind})
  target_compile_options(${name} PRIVATE ${arg_OPTIONS})
  target_link_options(${name} PRIVATE ${_heaphook_sanitize_${kind}})
  target_compile_definitions(${name} PRIVATE ${arg_DEFINITIONS})
  target_include_directories(${name} PRIVATE ${arg_INCLUDES})
  target_link_libraries(${name} PRIVATE ${arg_LIBRARIES} ${core_libraries} Threads::Threads
                                        ${CMAKE_DL_LIBS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${HEAPHOOK_OUTPUT_DIR})
endfunction()
