# Cross-compiling heaphook's native libraries and tools for 64-bit Arm Linux (glibc) on an x86-64
# machine, with Debian's cross toolchain (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu; its
# libraries and loader live under /usr/aarch64-linux-gnu). The same CMakeLists build both
# architectures; only this file differs:
#
#   cmake -S packages/tlsf -B packages/tlsf/build-arm64 \
#         -DCMAKE_TOOLCHAIN_FILE=packages/core/cmake/toolchains/aarch64-linux-gnu.cmake
#
# Node addons are not built (cmake-js is not involved, CMAKE_JS_INC is unset): they need an
# arm64 node to load them, which this machine does not run. Programs built here run under
# user-mode emulation: qemu-aarch64 -L /usr/aarch64-linux-gnu <program>.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(HEAPHOOK_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${HEAPHOOK_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${HEAPHOOK_CROSS_TRIPLE}-g++)

# Headers and libraries of the target come from the cross sysroot and from Debian's multiarch
# arm64 packages (zlib1g-dev:arm64 for heaptrack, in /usr/lib/aarch64-linux-gnu: see
# tools/install-system-packages.sh); programs (cmake's own helpers, node) from the build machine.
set(CMAKE_LIBRARY_ARCHITECTURE ${HEAPHOOK_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH /usr/${HEAPHOOK_CROSS_TRIPLE} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# try_run and tests run the target's programs through qemu.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${HEAPHOOK_CROSS_TRIPLE})
