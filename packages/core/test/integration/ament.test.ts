// The ament_cmake package (ros/heaphook) in a ROS 2-style workspace, for real: a temporary
// workspace holds a symbolic link to the package and a user package with an allocator of its
// own, built with build_library() and tested with test_library() after find_package(heaphook);
// `colcon build`, `colcon test`, then the user's library preloaded into python3. Needs the Debian
// packages colcon, python3-colcon-cmake, python3-colcon-ros, ament-cmake and googletest
// (tools/install-system-packages.sh); skipped, saying so, without them.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { unmet } from '../../src/testing.js';
import { run } from '../helpers/native.js';

const amentPackage = fileURLToPath(new URL('../../../../ros/heaphook', import.meta.url));

const missing = unmet('colcon', 'ament-cmake', 'googletest');

const USER_PACKAGE_XML = `<?xml version="1.0"?>
<package format="3">
  <name>my_heap</name>
  <version>0.0.1</version>
  <description>An allocator of a heaphook user's own.</description>
  <maintainer email="user@example.invalid">user</maintainer>
  <license>Apache-2.0</license>
  <buildtool_depend>ament_cmake</buildtool_depend>
  <depend>heaphook</depend>
  <export><build_type>ament_cmake</build_type></export>
</package>
`;

const USER_CMAKELISTS = `cmake_minimum_required(VERSION 3.16)
project(my_heap C CXX)
find_package(ament_cmake REQUIRED)
find_package(heaphook REQUIRED)
build_library(preloaded_my_heap src/my_heap.cpp)
if(BUILD_TESTING)
  test_library(test_my_heap src/my_heap.cpp)
endif()
ament_package()
`;

// tier4-style: GlobalAllocator, hook_types.hpp, forwarding to glibc.
const USER_ALLOCATOR = `#include <dlfcn.h>
#include "heaphook/heaphook.hpp"
#include "heaphook/hook_types.hpp"
extern "C" void *__libc_malloc(size_t);
extern "C" void *__libc_memalign(size_t, size_t);
extern "C" void __libc_free(void *);
using namespace heaphook;
class MyHeap : public GlobalAllocator {
  malloc_usable_size_type usable_ =
      reinterpret_cast<malloc_usable_size_type>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  void *do_alloc(size_t size, size_t align) override {
    return align == 1 ? __libc_malloc(size) : __libc_memalign(align, size);
  }
  void do_dealloc(void *ptr) override { __libc_free(ptr); }
  size_t do_get_block_size(void *ptr) override { return usable_(ptr); }
};
GlobalAllocator &GlobalAllocator::get_instance() {
  static MyHeap heap;
  return heap;
}
`;

let workspace: string;
// ament runs python3 from PATH and needs the system one (ament_package is a Debian module).
const env = { ...process.env, PATH: `/usr/bin:/bin:${process.env.PATH ?? ''}` };

function colcon(args: string[]): string {
  return execFileSync('colcon', [...args, '--event-handlers', 'console_direct-'], {
    cwd: workspace,
    env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 64 * 1024 * 1024,
  });
}

beforeAll(() => {
  if (missing) return;
  workspace = mkdtempSync(join(tmpdir(), 'heaphook-colcon-'));
  mkdirSync(join(workspace, 'src/my_heap/src'), { recursive: true });
  symlinkSync(amentPackage, join(workspace, 'src/heaphook'));
  writeFileSync(join(workspace, 'src/my_heap/package.xml'), USER_PACKAGE_XML);
  writeFileSync(join(workspace, 'src/my_heap/CMakeLists.txt'), USER_CMAKELISTS);
  writeFileSync(join(workspace, 'src/my_heap/src/my_heap.cpp'), USER_ALLOCATOR);
});

afterAll(() => {
  if (workspace) rmSync(workspace, { recursive: true, force: true });
});

describe.skipIf(missing)('the ament_cmake package in a colcon workspace', () => {
  it('colcon build installs the libraries, the CMake module, and a user package builds with it', () => {
    colcon(['build']);
    const lib = join(workspace, 'install/heaphook/lib');
    expect(existsSync(join(lib, 'libheaphook_tlsf.so'))).toBe(true);
    expect(existsSync(join(lib, 'libheaphook_heaptrack.so'))).toBe(true);
    // tier4/heaphook's names for the same libraries
    expect(realpathSync(join(lib, 'libpreloaded_tlsf.so'))).toBe(
      realpathSync(join(lib, 'libheaphook_tlsf.so')),
    );
    expect(realpathSync(join(lib, 'libpreloaded_heaptrack.so'))).toBe(
      realpathSync(join(lib, 'libheaphook_heaptrack.so')),
    );
    expect(
      existsSync(
        join(workspace, 'install/heaphook/share/heaphook/core/cmake/heaphook_tier4.cmake'),
      ),
    ).toBe(true);
    expect(existsSync(join(workspace, 'install/heaphook/include/heaphook/hook_types.hpp'))).toBe(
      true,
    );
    expect(existsSync(join(workspace, 'install/my_heap/lib/libpreloaded_my_heap.so'))).toBe(true);
  }, 600_000);

  it('colcon test runs test_library (GoogleTest + the conformance suite) in both packages', () => {
    colcon(['test']);
    // ctest's record of each package's run (what colcon test-result reads).
    for (const [pkg, test] of [
      ['heaphook', 'test_heaphook_tier4_tlsf'],
      ['my_heap', 'test_my_heap'],
    ]) {
      const testing = join(workspace, `build/${pkg}/Testing`);
      const dated = readdirSync(testing).find((entry) =>
        existsSync(join(testing, entry, 'Test.xml')),
      );
      const xml = readFileSync(join(testing, dated!, 'Test.xml'), 'utf8');
      expect(xml).toMatch(new RegExp(`<Test Status="passed">\\s*<Name>${test}</Name>`));
    }
    const summary = execFileSync('colcon', ['test-result', '--all'], {
      cwd: workspace,
      env,
      encoding: 'utf8',
    });
    expect(summary).toMatch(/Summary: 2 tests, 0 errors, 0 failures, 0 skipped/);
  }, 600_000);

  it("the user's library, preloaded into python3, serves its heap", () => {
    const result = run(
      'python3',
      [
        '-c',
        'import ctypes; f = ctypes.CDLL(None).heaphook_active_backend; f.restype = ctypes.c_char_p; print(f().decode(), sum(range(10**5)))',
      ],
      { preload: join(workspace, 'install/my_heap/lib/libpreloaded_my_heap.so') },
    );
    expect(result.stdout).toBe('preloaded_my_heap 4999950000\n');
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it("the TLSF library installed by the package runs python3 under tier4's name and variables", () => {
    const result = run('python3', ['-c', 'print(len(str(list(range(10**5)))))'], {
      preload: join(workspace, 'install/heaphook/lib/libpreloaded_tlsf.so'),
      env: { INITIAL_MEMPOOL_SIZE: '50000000', ADDITIONAL_MEMPOOL_SIZE: '50000000' },
    });
    expect(result.stdout).toBe('688890\n');
    expect(result.status).toBe(0);
  });

  it("the same launch line runs node: tier4's name, its two variables, the pool serving", () => {
    const result = run(
      process.execPath,
      [
        '-e',
        "const m = new Map(); for (let i = 0; i < 100000; i++) m.set('k' + i, [i]); console.log(`${m.size} ${JSON.stringify([...m]).length}`)",
      ],
      {
        preload: join(workspace, 'install/heaphook/lib/libpreloaded_tlsf.so'),
        env: {
          INITIAL_MEMPOOL_SIZE: '50000000',
          ADDITIONAL_MEMPOOL_SIZE: '50000000',
          HEAPHOOK_LOG_LEVEL: 'debug',
        },
      },
    );
    expect(result.stdout).toBe('100000 1877781\n');
    expect(result.stderr).toMatch(/debug: backend tlsf ready/);
    expect(result.status).toBe(0);
  });
});
