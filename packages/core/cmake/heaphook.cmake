# heaphook.cmake — build heaphook preload libraries (backends) and check them with the
# conformance suite. Usable from this repository and from a backend outside it:
#
#   cmake_minimum_required(VERSION 3.16)
#   project(my_backend C CXX)
#   # the directory of the installed @heaphook/core package, e.g. from
#   #   node -p "require('path').dirname(require.resolve('@heaphook/core/package.json'))"
#   set(HEAPHOOK_CORE "${CMAKE_SOURCE_DIR}/node_modules/@heaphook/core")
#   include(${HEAPHOOK_CORE}/cmake/heaphook.cmake)
#   heaphook_add_backend(mine src/my_allocator.cpp)        # -> libheaphook_mine.so
#   heaphook_add_backend_test(mine)                         # -> heaphook_conformance_mine
#
# Functions:
#   heaphook_add_backend(<name> [C_API] [CXX_STDLIB] [TARGET <target>] <sources>...
#                        [EXPORTS <symbol>...])
#       Shared library target heaphook_<name> (or <target>: then the file is lib<target>.so,
#       as tier4's build_library names it), file libheaphook_<name>.so in
#       HEAPHOOK_OUTPUT_DIR. The heaphook core is compiled into it (targets heaphook_*_objects,
#       built once per project), so the library is self-contained. Without C_API the sources
#       define a heaphook::GlobalAllocator and the core's C++ adapter is added; with C_API they
#       define heaphook_backend_get() themselves (heaphook/backend.h). Compiled with hidden
#       visibility, initial-exec TLS, -fno-exceptions -fno-rtti -fno-threadsafe-statics for
#       C++; linked by the C driver with the core's version script (only the malloc family and
#       heaphook/core.h are exported), -z now, and no libstdc++. EXPORTS adds symbols of the
#       backend's own API to the version script; define them with HEAPHOOK_EXPORT
#       (heaphook/backend.h), since everything else is compiled hidden.
#       CXX_STDLIB: the backend may use the whole C++ standard library (containers, std::mutex,
#       exceptions, RTTI, thread-safe statics): the library is linked with libstdc++ (NEEDED),
#       and the backend is initialised after the library's static constructors (libstdc++'s
#       and the loader's earlier allocations are served by the bootstrap arena). tier4's
#       build_library() (heaphook_tier4.cmake) builds this way.
#   heaphook_add_backend_test(<name> [<sources>...])
#       Executable heaphook_conformance_<name> in HEAPHOOK_OUTPUT_DIR: the conformance suite
#       (test/native/conformance.c, built with -fno-builtin) linked against libheaphook_<name>.so
#       (DT_NEEDED before libc, found through RPATH $ORIGIN), so it runs against the backend
#       with no LD_PRELOAD: `heaphook_conformance_<name> <name>`. Extra sources are linked into
#       it and may define `int heaphook_conformance_extra(const char *backend)` returning the
#       number of failed checks, run after the suite's own groups. Registered with add_test()
#       when testing is enabled.
#
#   heaphook::support, heaphook::reloc (targets)
#       The core's parts that work without its interposition, for libraries that interpose
#       malloc themselves (heaptrack, ucm-hooks) or adapt a backend to another ABI (aix-plugin):
#       link them rather than compiling the core's files. support: the environment readers
#       (heaphook/config.h), the malloc-safe logger (log.h), the seam for OS memory calls
#       (os.h), the fork modules' one registration (fork.h) and the debug build's lock-rank
#       checks (lockrank.h), portable (the AIX plug-in builds it on AIX); reloc: the GOT
#       patcher (reloc.h), ELF only. Static libraries of position-independent objects compiled
#       with the preload flags; the core's include directory comes with them.
#   heaphook::bootstrap (target)
#       The core's bootstrap arena and the next-allocator lookup (heaphook/bootstrap.h), for
#       libraries that define the malloc family themselves and forward to the allocator after
#       them (heaptrack, agent, rtcheck). ELF only. Link heaphook::support with it (its
#       assertions log through log.h).
#   heaphook_add_test_program(<name> <sources>... [DEBUG] [STATIC] [CORE <part>...]
#                             [INCLUDES <dir>...] [OPTIONS <flag>...])
#       Executable <name> in HEAPHOOK_OUTPUT_DIR, built like a user program: -O2 -g
#       -fno-builtin (otherwise gcc deletes malloc/free pairs and folds the calls under test)
#       -Wall -Wextra, _GNU_SOURCE, C11 with extensions, the core's include directory (after
#       INCLUDES), threads and dl. OPTIONS come after the defaults (-O1, -fomit-frame-pointer,
#       -fno-inline-functions ... win). Every package's test programs are built with it.
#       CORE links the core's parts the program calls (support, reloc, bootstrap: the targets
#       below), rather than compiling their sources into it. DEBUG compiles the program with
#       HEAPHOOK_DEBUG=1 and links the parts' debug build, heaphook::<part>_debug (the same
#       sources with HEAPHOOK_DEBUG=1 whatever the project's HEAPHOOK_DEBUG, built once per
#       project and only when a program links it): a release build's unit test still runs the
#       debug assertions and the lock-rank checks (heaphook/lockrank.h). STATIC links the
#       program -static (a process no preload library can enter, as ucm-hooks' watch -p must
#       refuse): the C library's static archive must be installed (libc6-dev has it), which
#       the caller checks first (check_c_source_compiles with -static), and CORE parts cannot
#       go with it (they call dlsym and dl_iterate_phdr on a dynamic process).
#
# Variables:
#   HEAPHOOK_OUTPUT_DIR  where libraries and programs go. Default: CMAKE_LIBRARY_OUTPUT_DIRECTORY
#                        when set (cmake-js sets it to <out>/Release), else
#                        ${CMAKE_BINARY_DIR}/Release.
#   HEAPHOOK_DEBUG       ON: -Og -g3 and the core's debug assertions (hh_assert) and checks of
#                        every block the backend returns. Default: ON for CMAKE_BUILD_TYPE Debug,
#                        else OFF (then -O2 -g).
#   HEAPHOOK_CORE_DIR    set by this module: the @heaphook/core package directory.
#   HEAPHOOK_PRELOAD_FLAGS, HEAPHOOK_PRELOAD_DEFINITIONS
#                        what heaphook_add_backend compiles with: -O2 -g (-Og -g3 with
#                        HEAPHOOK_DEBUG), -fPIC, hidden visibility, initial-exec TLS, no
#                        malloc-family builtins, -Wall -Wextra, C++ without exceptions or RTTI;
#                        _GNU_SOURCE and HEAPHOOK_DEBUG=1 when it is on. For static libraries
#                        that go into a preload library (tlsf's, aix-plugin's plug-ins).
#   HEAPHOOK_INTERPOSER_FLAGS
#                        HEAPHOOK_PRELOAD_FLAGS plus -fno-builtin -fno-stack-protector, for a
#                        library that defines the malloc family itself (heaptrack, agent,
#                        rtcheck; with HEAPHOOK_PRELOAD_DEFINITIONS).
include_guard(GLOBAL)

get_filename_component(HEAPHOOK_CORE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

enable_language(C)
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
endif()
find_package(Threads REQUIRED)

if(CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(_heaphook_debug_default ON)
else()
  set(_heaphook_debug_default OFF)
endif()
option(HEAPHOOK_DEBUG "heaphook: debug build with assertions" ${_heaphook_debug_default})

if(NOT DEFINED HEAPHOOK_OUTPUT_DIR)
  if(CMAKE_LIBRARY_OUTPUT_DIRECTORY)
    set(HEAPHOOK_OUTPUT_DIR "${CMAKE_LIBRARY_OUTPUT_DIRECTORY}")
  else()
    set(HEAPHOOK_OUTPUT_DIR "${CMAKE_BINARY_DIR}/Release")
  endif()
endif()

# What heaphook::support holds, and the interposition every backend adds to it.
set(HEAPHOOK_SUPPORT_SOURCES
    ${HEAPHOOK_CORE_DIR}/native/config.c ${HEAPHOOK_CORE_DIR}/native/log.c
    ${HEAPHOOK_CORE_DIR}/native/os.c ${HEAPHOOK_CORE_DIR}/native/lockrank.c
    ${HEAPHOOK_CORE_DIR}/native/fork_once.c)
set(HEAPHOOK_RELOC_SOURCES ${HEAPHOOK_CORE_DIR}/native/reloc_object.c
                           ${HEAPHOOK_CORE_DIR}/native/reloc_patch.c)
set(HEAPHOOK_BOOTSTRAP_SOURCES ${HEAPHOOK_CORE_DIR}/native/bootstrap.c)
set(HEAPHOOK_CORE_SOURCES
    ${HEAPHOOK_CORE_DIR}/native/fork.c
    ${HEAPHOOK_CORE_DIR}/native/init.c
    ${HEAPHOOK_CORE_DIR}/native/attach.c
    ${HEAPHOOK_CORE_DIR}/native/agent_loader.c
    ${HEAPHOOK_CORE_DIR}/native/stats.c)
# The malloc family itself: its own object library, since a backend with DIRECT entry points
# compiles it into its library instead (heaphook_add_backend).
set(HEAPHOOK_INTERPOSE_SOURCES ${HEAPHOOK_CORE_DIR}/native/interpose.c)
set(HEAPHOOK_CXX_ADAPTER ${HEAPHOOK_CORE_DIR}/native/cxx_adapter.cpp)
set(HEAPHOOK_VERSION_SCRIPT ${HEAPHOOK_CORE_DIR}/native/exports.map)
set(HEAPHOOK_CONFORMANCE_SOURCE ${HEAPHOOK_CORE_DIR}/test/native/conformance.c)

# Flags of all code that goes into a preload library.
if(HEAPHOOK_DEBUG)
  set(_heaphook_optimisation -Og -g3)
else()
  set(_heaphook_optimisation -O2 -g)
endif()
set(_heaphook_preload_flags
    ${_heaphook_optimisation}
    -fPIC
    -fvisibility=hidden
    -ftls-model=initial-exec
    # gcc turns malloc + memset into calloc and the like: inside calloc that is recursion.
    -fno-builtin-malloc
    -fno-builtin-calloc
    -fno-builtin-realloc
    -fno-builtin-free
    -Wall
    -Wextra
    $<$<COMPILE_LANGUAGE:CXX>:-fno-exceptions>
    $<$<COMPILE_LANGUAGE:CXX>:-fno-rtti>
    $<$<COMPILE_LANGUAGE:CXX>:-fno-threadsafe-statics>
    $<$<COMPILE_LANGUAGE:CXX>:-fvisibility-inlines-hidden>)
# The same for a backend that uses the C++ standard library (CXX_STDLIB, tier4's functions).
set(_heaphook_preload_flags_cxx_stdlib ${_heaphook_preload_flags})
list(FILTER _heaphook_preload_flags_cxx_stdlib EXCLUDE REGEX
     "fno-exceptions|fno-rtti|fno-threadsafe-statics")
set(_heaphook_preload_definitions _GNU_SOURCE $<$<BOOL:${HEAPHOOK_DEBUG}>:HEAPHOOK_DEBUG=1>)

# ---- Flags for a package's own targets, and its test programs ----------------------------------------------------------

# The flags of preload code, for a package's own targets: HEAPHOOK_PRELOAD_FLAGS and
# HEAPHOOK_PRELOAD_DEFINITIONS are what heaphook_add_backend compiles with (a static library
# going into a backend, such as tlsf's and aix-plugin's, uses them too); HEAPHOOK_INTERPOSER_FLAGS
# are for a library that defines the malloc family itself and forwards to the allocator after
# it (heaptrack, agent, rtcheck): no builtins at all, since gcc's knowledge of what malloc,
# free and memset do must not rewrite the functions that implement them, and no stack
# protector, since a hook runs on every allocation of the program.
set(HEAPHOOK_PRELOAD_FLAGS ${_heaphook_preload_flags})
set(HEAPHOOK_PRELOAD_DEFINITIONS ${_heaphook_preload_definitions})
set(HEAPHOOK_INTERPOSER_FLAGS ${HEAPHOOK_PRELOAD_FLAGS} -fno-builtin -fno-stack-protector)

# heaphook_add_test_program(<name> <sources>... [DEBUG] [STATIC] [CORE <part>...]
#                           [INCLUDES <dir>...] [OPTIONS <flag>...])
function(heaphook_add_test_program name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "DEBUG;STATIC" "" "CORE;INCLUDES;OPTIONS")
  if(ARG_STATIC AND ARG_CORE)
    message(FATAL_ERROR "heaphook_add_test_program(${name}): STATIC and CORE do not go "
                        "together (the core's parts need a dynamic process)")
  endif()
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  if(ARG_STATIC)
    target_link_options(${name} PRIVATE -static)
  endif()
  # OPTIONS come last, so -O1 or -fomit-frame-pointer there win over the defaults.
  target_compile_options(${name} PRIVATE -O2 -g -fno-builtin -Wall -Wextra ${ARG_OPTIONS})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE $<$<BOOL:${ARG_DEBUG}>:HEAPHOOK_DEBUG=1>)
  target_include_directories(${name} PRIVATE ${ARG_INCLUDES} ${HEAPHOOK_CORE_DIR}/include)
  set(parts)
  foreach(part ${ARG_CORE})
    if(ARG_DEBUG)
      _heaphook_core_part_variant(${part} debug OPTIONS ${_heaphook_preload_flags} -Og -g3
                                  DEFINITIONS HEAPHOOK_DEBUG=1)
      list(APPEND parts heaphook::${part}_debug)
    else()
      list(APPEND parts heaphook::${part})
    endif()
  endforeach()
  target_link_libraries(${name} PRIVATE ${parts} Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(${name} PROPERTIES C_STANDARD 11 C_EXTENSIONS ON
                                           RUNTIME_OUTPUT_DIRECTORY ${HEAPHOOK_OUTPUT_DIR})
endfunction()

# heaphook_add_addon(<target> <sources>... [CXX] [INCLUDES <dir>...])
# A Node-API addon of a package, built by cmake-js (call it only when CMAKE_JS_INC is set):
# <target>.node in HEAPHOOK_OUTPUT_DIR, Node-API version 8, C11 with GNU extensions, -O2 -g
# -Wall -Wextra, linked with what cmake-js gives. CXX: the addon is written against
# node-addon-api (C++17, exceptions off), whose headers are found through node from the
# package's folder, where npm installed it. The caller adds its own libraries, options and
# properties with target_* calls after it (a later -O3 wins over the -O2).
function(heaphook_add_addon target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "CXX" "" "INCLUDES")
  if(NOT CMAKE_JS_INC)
    message(FATAL_ERROR "heaphook_add_addon(${target}): not a cmake-js build (no CMAKE_JS_INC)")
  endif()
  add_library(${target} SHARED ${ARG_UNPARSED_ARGUMENTS} ${CMAKE_JS_SRC})
  set_target_properties(${target} PROPERTIES PREFIX "" SUFFIX ".node" C_STANDARD 11
                        C_EXTENSIONS ON LIBRARY_OUTPUT_DIRECTORY ${HEAPHOOK_OUTPUT_DIR})
  target_include_directories(${target} PRIVATE ${ARG_INCLUDES} ${CMAKE_JS_INC})
  target_compile_definitions(${target} PRIVATE NAPI_VERSION=8 _GNU_SOURCE)
  target_compile_options(${target} PRIVATE -O2 -g -Wall -Wextra)
  target_link_libraries(${target} PRIVATE ${CMAKE_JS_LIB})
  if(ARG_CXX)
    execute_process(
      COMMAND node -p "require('node-addon-api').include"
      WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
      OUTPUT_VARIABLE addon_api_dir
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(REPLACE "\"" "" addon_api_dir "${addon_api_dir}")
    if(NOT EXISTS "${addon_api_dir}/napi.h")
      message(FATAL_ERROR "heaphook_add_addon(${target}): node-addon-api's napi.h not found "
                          "from ${CMAKE_CURRENT_SOURCE_DIR}: run npm ci at the repository's root")
    endif()
    set_target_properties(${target} PROPERTIES CXX_STANDARD 17)
    target_include_directories(${target} PRIVATE ${addon_api_dir})
    target_compile_definitions(${target} PRIVATE NAPI_DISABLE_CPP_EXCEPTIONS)
  endif()
endfunction()

# heaphook_<part>_<variant> (heaphook::<part>_<variant>): a part of the core (support, reloc,
# bootstrap) compiled again with its own OPTIONS and DEFINITIONS (a debug build, a sanitizer),
# once per project and only when a program links it. reloc and bootstrap bring support's
# variant with them (their assertions log, the patcher's lock has a rank).
function(_heaphook_core_part_variant part variant)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "OPTIONS;DEFINITIONS")
  set(target heaphook_${part}_${variant})
  if(TARGET ${target})
    return()
  endif()
  string(TOUPPER ${part} upper)
  if(NOT part MATCHES "^(support|reloc|bootstrap)$" OR NOT DEFINED HEAPHOOK_${upper}_SOURCES)
    message(FATAL_ERROR "heaphook: CORE ${part}: the core's parts are support, reloc and "
                        "bootstrap (include heaphook.cmake first)")
  endif()
  add_library(${target} STATIC EXCLUDE_FROM_ALL ${HEAPHOOK_${upper}_SOURCES})
  target_compile_options(${target} PRIVATE ${arg_OPTIONS})
  target_compile_definitions(${target} PRIVATE _GNU_SOURCE ${arg_DEFINITIONS})
  target_include_directories(${target} PUBLIC ${HEAPHOOK_CORE_DIR}/include
                             PRIVATE ${HEAPHOOK_CORE_DIR}/native)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 11
                                             C_EXTENSIONS ON)
  target_link_libraries(${target} INTERFACE Threads::Threads ${CMAKE_DL_LIBS})
  if(NOT part STREQUAL "support")
    _heaphook_core_part_variant(support ${variant} OPTIONS ${arg_OPTIONS}
                                DEFINITIONS ${arg_DEFINITIONS})
    target_link_libraries(${target} INTERFACE heaphook_support_${variant})
  endif()
  add_library(heaphook::${part}_${variant} ALIAS ${target})
endfunction()

# The core, compiled once per project and only when a target uses it (EXCLUDE_FROM_ALL): object
# files for the preload libraries (every object must be linked, interpose.o in particular, so a
# static archive would not do), and the same objects as libheaphook_core.a for test programs
# that want single functions (the parsers). The support objects are shared by both and by
# heaphook::support.
function(_heaphook_core_object_library target)
  add_library(${target} OBJECT EXCLUDE_FROM_ALL ${ARGN})
  target_include_directories(${target} PUBLIC ${HEAPHOOK_CORE_DIR}/include)
  target_compile_options(${target} PRIVATE ${_heaphook_preload_flags})
  target_compile_definitions(${target} PRIVATE ${_heaphook_preload_definitions})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 11
                                             C_EXTENSIONS ON)
  target_link_libraries(${target} INTERFACE Threads::Threads ${CMAKE_DL_LIBS})
endfunction()

# A static library of the given object libraries' objects, named heaphook::<alias>.
function(_heaphook_core_archive target alias)
  list(TRANSFORM ARGN REPLACE "(.+)" "$<TARGET_OBJECTS:\\1>" OUTPUT_VARIABLE objects)
  add_library(${target} STATIC EXCLUDE_FROM_ALL ${objects})
  target_include_directories(${target} PUBLIC ${HEAPHOOK_CORE_DIR}/include)
  target_link_libraries(${target} INTERFACE Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE C)
  add_library(heaphook::${alias} ALIAS ${target})
endfunction()

if(NOT TARGET heaphook_core_objects)
  _heaphook_core_object_library(heaphook_support_objects ${HEAPHOOK_SUPPORT_SOURCES})
  _heaphook_core_archive(heaphook_support support heaphook_support_objects)
  if(NOT CMAKE_SYSTEM_NAME STREQUAL "AIX")
    _heaphook_core_object_library(heaphook_reloc_objects ${HEAPHOOK_RELOC_SOURCES})
    _heaphook_core_object_library(heaphook_bootstrap_objects ${HEAPHOOK_BOOTSTRAP_SOURCES})
    _heaphook_core_object_library(heaphook_core_objects ${HEAPHOOK_CORE_SOURCES})
    _heaphook_core_object_library(heaphook_interpose_objects ${HEAPHOOK_INTERPOSE_SOURCES})
    _heaphook_core_archive(heaphook_reloc reloc heaphook_reloc_objects)
    # A debug build's patcher checks its lock's rank (lockrank.c, in support).
    target_link_libraries(heaphook_reloc INTERFACE heaphook_support)
    _heaphook_core_archive(heaphook_bootstrap bootstrap heaphook_bootstrap_objects)
    _heaphook_core_archive(heaphook_core core heaphook_support_objects heaphook_reloc_objects
                           heaphook_bootstrap_objects heaphook_core_objects
                           heaphook_interpose_objects)
    set_target_properties(heaphook_core PROPERTIES ARCHIVE_OUTPUT_DIRECTORY ${HEAPHOOK_OUTPUT_DIR})
  endif()
endif()

function(heaphook_add_backend name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "C_API;CXX_STDLIB" "TARGET;DIRECT" "EXPORTS")
  set(sources ${ARG_UNPARSED_ARGUMENTS})
  if(NOT sources)
    message(FATAL_ERROR "heaphook_add_backend(${name}): no sources")
  endif()
  set(target heaphook_${name})
  if(ARG_TARGET)
    set(target ${ARG_TARGET})
  endif()
  set_property(GLOBAL PROPERTY HEAPHOOK_BACKEND_TARGET_${name} ${target})
  add_library(${target} SHARED ${sources})
  if(NOT ARG_C_API)
    if(NOT CMAKE_CXX_COMPILER)
      message(FATAL_ERROR "heaphook_add_backend(${name}): a C++ backend needs a C++ compiler "
                          "(or pass C_API for a backend written against heaphook/backend.h)")
    endif()
    target_sources(${target} PRIVATE ${HEAPHOOK_CXX_ADAPTER})
  endif()
  target_link_libraries(${target} PRIVATE heaphook_core_objects heaphook_bootstrap_objects
                                           heaphook_support_objects heaphook_reloc_objects)
  if(ARG_DIRECT)
    # malloc and free call <DIRECT>_alloc and <DIRECT>_dealloc by name, compiled and optimised
    # at link time with the backend's sources, so that its fast paths are inlined into them.
    target_sources(${target} PRIVATE ${HEAPHOOK_INTERPOSE_SOURCES})
    target_compile_definitions(${target} PRIVATE HEAPHOOK_DIRECT_ALLOC=${ARG_DIRECT}_alloc
                                                 HEAPHOOK_DIRECT_DEALLOC=${ARG_DIRECT}_dealloc)
    set_property(TARGET ${target} PROPERTY INTERPROCEDURAL_OPTIMIZATION TRUE)
  else()
    target_link_libraries(${target} PRIVATE heaphook_interpose_objects)
  endif()
  set(flags ${_heaphook_preload_flags})
  set(linker_language C)
  if(ARG_CXX_STDLIB)
    set(flags ${_heaphook_preload_flags_cxx_stdlib})
    set(linker_language CXX)
  endif()
  target_compile_options(${target} PRIVATE ${flags})
  target_compile_definitions(
    ${target} PRIVATE ${_heaphook_preload_definitions} HEAPHOOK_BACKEND_NAME="${name}"
                      $<$<BOOL:${ARG_CXX_STDLIB}>:HEAPHOOK_CXX_STDLIB=1>)
  # The core's version script, plus the backend's own EXPORTS when it has any (written only
  # when its content changes, so that configuring again does not relink).
  set(version_script ${HEAPHOOK_VERSION_SCRIPT})
  if(ARG_EXPORTS)
    file(READ ${HEAPHOOK_VERSION_SCRIPT} map)
    list(JOIN ARG_EXPORTS "; " extra)
    string(REPLACE "heaphook_get_stats;" "heaphook_get_stats;\n    ${extra};" map "${map}")
    set(version_script ${CMAKE_CURRENT_BINARY_DIR}/heaphook_${name}_exports.map)
    file(WRITE ${version_script}.new "${map}")
    configure_file(${version_script}.new ${version_script} COPYONLY)
  endif()
  # --as-needed drops the libstdc++ CMake adds for mixed C/C++ targets: nothing references it
  # (unless CXX_STDLIB, where the C++ driver links it and the backend uses it).
  target_link_options(${target} PRIVATE "-Wl,--version-script=${version_script}"
                      -Wl,--no-undefined -Wl,--as-needed -Wl,-z,now -Wl,-z,relro)
  set_target_properties(
    ${target}
    PROPERTIES LINKER_LANGUAGE ${linker_language}
               C_STANDARD 11
               C_EXTENSIONS ON
               CXX_STANDARD 17
               CXX_EXTENSIONS OFF
               LIBRARY_OUTPUT_DIRECTORY ${HEAPHOOK_OUTPUT_DIR}
               LINK_DEPENDS ${version_script})
endfunction()

function(heaphook_add_backend_test name)
  get_property(backend GLOBAL PROPERTY HEAPHOOK_BACKEND_TARGET_${name})
  if(NOT backend OR NOT TARGET ${backend})
    message(FATAL_ERROR "heaphook_add_backend_test(${name}): call heaphook_add_backend(${name} ...) first")
  endif()
  set(target heaphook_conformance_${name})
  add_executable(${target} ${HEAPHOOK_CONFORMANCE_SOURCE} ${ARGN})
  # -fno-builtin: otherwise gcc deletes malloc/free pairs and folds the very calls under test.
  target_compile_options(${target} PRIVATE -O2 -g -fno-builtin -Wall -Wextra)
  target_compile_definitions(${target} PRIVATE _GNU_SOURCE HEAPHOOK_CONFORMANCE_BACKEND="${name}")
  target_include_directories(${target} PRIVATE ${HEAPHOOK_CORE_DIR}/include)
  target_link_options(${target} PRIVATE -Wl,--no-as-needed)
  target_link_libraries(${target} PRIVATE ${backend} Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(
    ${target}
    PROPERTIES C_STANDARD 11
               C_EXTENSIONS ON
               RUNTIME_OUTPUT_DIRECTORY ${HEAPHOOK_OUTPUT_DIR}
               BUILD_WITH_INSTALL_RPATH ON
               INSTALL_RPATH "$ORIGIN")
  if(BUILD_TESTING)
    add_test(NAME ${target} COMMAND ${target} ${name})
  endif()
endfunction()

# tier4/heaphook's build_library() and test_library(), over the functions above.
include(${CMAKE_CURRENT_LIST_DIR}/heaphook_tier4.cmake)
