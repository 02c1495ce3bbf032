// The TypeScript entry point and the package's declaration as a heaphook backend.
import { existsSync, readFileSync } from 'node:fs';

import { findBackend, runWith } from '@heaphook/core';
import { describe, expect, it } from 'vitest';

import { env, libraryPath, packageDir } from '../../src/index.js';

describe('@heaphook/tlsf', () => {
  it('libraryPath() names the built preload library', () => {
    expect(libraryPath()).toBe(`${packageDir}/build/Release/libheaphook_tlsf.so`);
    expect(existsSync(libraryPath())).toBe(true);
  });

  it('ships its native files in platform packages, not itself (no build/ path in exports)', () => {
    const pkg = JSON.parse(readFileSync(`${packageDir}/package.json`, 'utf8')) as {
      version: string;
      exports: Record<string, unknown>;
      optionalDependencies: Record<string, string>;
      heaphook: { nativeFiles: string[] };
    };
    expect(JSON.stringify(pkg.exports)).not.toMatch(/build\//);
    expect(pkg.optionalDependencies).toEqual({
      '@heaphook/tlsf-linux-x64-gnu': pkg.version,
      '@heaphook/tlsf-linux-arm64-gnu': pkg.version,
    });
    expect(pkg.heaphook.nativeFiles).toEqual([
      'libheaphook_tlsf.so',
      'libpreloaded_tlsf.so',
      'tlsf_addon.node',
    ]);
  });

  it('declares itself a heaphook backend, found by the core', () => {
    const pkg = JSON.parse(readFileSync(`${packageDir}/package.json`, 'utf8')) as {
      heaphook: { backends: Record<string, string> };
    };
    expect(pkg.heaphook.backends).toEqual({
      tlsf: 'build/Release/libheaphook_tlsf.so',
      preloaded_tlsf: 'build/Release/libpreloaded_tlsf.so', // tier4/heaphook's name
    });
    const info = findBackend('tlsf', { from: packageDir });
    expect(info.libraryPath).toBe(libraryPath());
    expect(info.built).toBe(true);
    expect(info.nxProject).toBe('tlsf');
  });

  it('env() maps options to the environment variables', () => {
    expect(env()).toEqual({});
    expect(
      env({
        initialPoolSize: '64M',
        additionalPoolSize: 1_000_000,
        prefault: true,
        mlock: false,
        check: true,
        threadHeaps: false,
        cache: 0,
        release: false,
        trimThreshold: '1M',
        logLevel: 'info',
        onGrow: 'abort',
        stats: true,
        compat: 'tier4',
      }),
    ).toEqual({
      INITIAL_MEMPOOL_SIZE: '64M',
      ADDITIONAL_MEMPOOL_SIZE: '1000000',
      HEAPHOOK_TLSF_PREFAULT: '1',
      HEAPHOOK_TLSF_MLOCK: '0',
      HEAPHOOK_TLSF_CHECK: '1',
      HEAPHOOK_TLSF_THREAD_HEAPS: '0',
      HEAPHOOK_TLSF_CACHE: '0',
      HEAPHOOK_TLSF_RELEASE: '0',
      HEAPHOOK_TLSF_TRIM_THRESHOLD: '1M',
      HEAPHOOK_LOG_LEVEL: 'info',
      HEAPHOOK_TLSF_ON_GROW: 'abort',
      HEAPHOOK_TLSF_STATS: '1',
      HEAPHOOK_TLSF_COMPAT: 'tier4',
    });
    expect(() => env({ initialPoolSize: -1 })).toThrow(RangeError);
    expect(() => env({ onGrow: 'sometimes' as 'warn' })).toThrow();
    expect(() => env({ cache: 65001 })).toThrow(RangeError);
    expect(() => env({ cacheBytes: true as unknown as string })).toThrow(TypeError);
  });

  it('runs a program through the core with env() options (heaphook run -b tlsf)', async () => {
    const r = await runWith('tlsf', 'sh', ['-c', 'seq 1 1000 | sort -n | tail -1'], {
      from: packageDir,
      env: env({ initialPoolSize: '1M', additionalPoolSize: '1M', logLevel: 'info' }),
      baseEnv: {},
    });
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe('1000');
  });
});
