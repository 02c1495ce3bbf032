#!/usr/bin/env bash
# Debian packages heaphook's tests and benchmarks use, beyond Node, g++, cmake and python3:
#   peers the benchmark compares against: libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4,
#   LeakSanitizer built by clang (clang, libclang-rt-14-dev) and by gcc (liblsan0),
#   KDE heaptrack (tracer overhead and log size), UCX's libucm (libucx0, libucx-dev: the
#   memory-event hooks section compares heaphook's ucm-hooks with it), clang-format (npm run format);
#   build needs: zlib1g-dev (heaptrack's deflate fallback), binutils (addr2line, symbolising),
#   fonts-dejavu-core (text in the bench's PNG chart); heaptrack report tests: chromium (loads the
#   HTML report headless), poppler-utils (pdftotext reads the PDF chart), golang-go (`go tool
#   pprof` opens the report's profile); zstd (the heaplog decoder pipes zstd blocks through it:
#   much faster than the fzstd fallback); the sanitizer tier's runtimes (libasan8 libubsan1
#   libtsan2: gcc 12's AddressSanitizer, UndefinedBehaviorSanitizer and ThreadSanitizer); the
#   ament_cmake package ros/heaphook and its test (packages/core/test/ament.test.ts: colcon
#   build / colcon test of a ROS 2-style workspace): colcon python3-colcon-cmake
#   python3-colcon-ros ament-cmake, and googletest (Debian's GoogleTest sources, which
#   test_library() builds its test programs with); the arm64 tier (npm run build-arm64, the
#   test/arm64.test.ts files): Debian's cross toolchain (gcc-aarch64-linux-gnu
#   g++-aarch64-linux-gnu) and user-mode emulation (qemu-user), plus arm64 packages through
#   multiarch: libc6:arm64 (the loader qemu runs the programs with), zlib1g-dev:arm64 (heaptrack
#   links zlib), libpython3.11-minimal:arm64 and libexpat1:arm64 (the standard library and a
#   dependency of Debian's arm64 python3, whose interpreter is unpacked to /opt/heaphook-arm64:
#   its package cannot be installed beside the x86-64 one); valgrind (callgrind counts the
#   instructions of every TLSF malloc and free for the worst case the tlsf README states:
#   test/worst-case.test.ts); strace (packages/core/test/inject.test.ts: a target already traced
#   is refused by heaphook-inject); libxml2-utils (xmllint: packages/heaptrack/test/
#   hostile-text.test.ts checks that the JUnit XML and the SVG files stay well-formed XML when
#   the traced program's symbols hold control characters); sqlite3 (packages/heaptrack/test/
#   real-programs.test.ts records the sqlite3 shell, a program nobody here wrote, and
#   the heaptrack README measures its log size against KDE heaptrack's); prometheus (the
#   Prometheus server and promtool: packages/agent's tests scrape `heaphook agent` with it and
#   check its example alert rules).
# Without them the benchmark prints "skipped: install <package>" for the missing peers.
# Needs root (or sudo). Run it once per machine: tools/install-system-packages.sh
set -euo pipefail
packages=(liblsan0 clang libclang-rt-14-dev libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 heaptrack libucx0 libucx-dev clang-format
  zlib1g-dev binutils fonts-dejavu-core chromium poppler-utils golang-go zstd
  libasan8 libubsan1 libtsan2 colcon python3-colcon-cmake python3-colcon-ros ament-cmake googletest
  valgrind gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user strace libxml2-utils sqlite3
  prometheus)
arm64_packages=(libc6:arm64 zlib1g-dev:arm64 libpython3.11-minimal:arm64 libexpat1:arm64)
arm64_python=python3.11-minimal:arm64
arm64_root=/opt/heaphook-arm64
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "install-system-packages: run as root to install: ${packages[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" "${arm64_packages[@]}" >/dev/null
if [ ! -x "$arm64_root/usr/bin/python3.11" ]; then
  download=$(mktemp -d)
  chmod 777 "$download" # apt downloads as its own user (_apt)
  if ! (cd "$download" && apt-get download -qq "$arm64_python"); then
    echo "install-system-packages: cannot download $arm64_python (is arm64 in the apt sources?)" >&2
    exit 1
  fi
  $sudo mkdir -p "$arm64_root"
  $sudo dpkg-deb -x "$download"/python3.11-minimal_*_arm64.deb "$arm64_root"
  rm -rf "$download"
fi
echo "installed: ${packages[*]} ${arm64_packages[*]}; $arm64_python unpacked to $arm64_root"
