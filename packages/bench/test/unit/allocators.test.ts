import { describe, expect, it } from 'vitest';

import {
  allocatorEnv,
  discoverAllocators,
  filterByName,
  parseCustom,
  parseVariant,
} from '../../src/allocators.js';
import { selectWorkloads } from '../../src/workloads.js';

const noDeb = () => undefined;
const backends = [
  {
    name: 'example',
    packageName: '@heaphook/core',
    libraryPath: '/ws/core/libheaphook_example.so',
    built: true,
    nxProject: 'core',
  },
  {
    name: 'tlsf',
    packageName: '@heaphook/tlsf',
    libraryPath: '/ws/tlsf/libheaphook_tlsf.so',
    built: true,
    nxProject: 'tlsf',
  },
];

describe('discoverAllocators: the skip path', () => {
  it('reports a missing system allocator as "skipped: install <package>", never an error', () => {
    const d = discoverAllocators({
      backends: [],
      exists: () => false,
      which: () => null,
      debianVersion: noDeb,
    });
    const byName = new Map(d.allocators.map((a) => [a.name, a]));
    expect(byName.get('glibc')!.status).toBe('ready');
    expect(byName.get('jemalloc')).toMatchObject({
      status: 'skipped',
      reason: 'install libjemalloc2',
    });
    expect(byName.get('mimalloc')).toMatchObject({
      status: 'skipped',
      reason: 'install libmimalloc2.0',
    });
    expect(byName.get('tcmalloc')).toMatchObject({
      status: 'skipped',
      reason: 'install libtcmalloc-minimal4',
    });
    const tracers = new Map(d.tracers.map((t) => [t.name, t]));
    expect(tracers.get('kde-heaptrack')).toMatchObject({
      status: 'skipped',
      reason: 'install heaptrack',
    });
    expect(tracers.get('heaphook-heaptrack')!.status).toBe('skipped');
    expect(tracers.get('heaphook-heaptrack')!.reason).toMatch(
      /no heaphook backend named heaptrack/,
    );
  });

  it('finds a system allocator in the multiarch folder and preloads it', () => {
    const present = new Set([
      '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
      '/usr/lib/libmimalloc.so.2',
    ]);
    const d = discoverAllocators({
      backends: [],
      libDirs: ['/usr/lib/x86_64-linux-gnu', '/usr/lib'],
      exists: (p) => present.has(p),
      which: () => null,
      debianVersion: (pkg) => (pkg === 'libjemalloc2' ? '5.3.0-1' : undefined),
    });
    const jemalloc = d.allocators.find((a) => a.name === 'jemalloc')!;
    expect(jemalloc).toMatchObject({
      status: 'ready',
      preload: ['/usr/lib/x86_64-linux-gnu/libjemalloc.so.2'],
      version: '5.3.0-1',
    });
    expect(d.allocators.find((a) => a.name === 'mimalloc')!.preload).toEqual([
      '/usr/lib/libmimalloc.so.2',
    ]);
  });

  it("measures each library once: another name of a backend (tier4's preloaded_tlsf) is no column", () => {
    const d = discoverAllocators({
      backends: [
        ...backends,
        {
          name: 'preloaded_tlsf',
          packageName: '@heaphook/tlsf',
          libraryPath: '/ws/tlsf/libpreloaded_tlsf.so',
          built: true,
          aliasOf: 'tlsf',
        },
      ],
      exists: () => false,
      which: () => null,
      debianVersion: noDeb,
    });
    const names = [...d.allocators, ...d.tracers].map((a) => a.name);
    expect(names).toContain('tlsf');
    expect(names).not.toContain('preloaded_tlsf');
  });

  it('lists every workspace backend, says how to build one that is not built, and adds tlsf-rt', () => {
    const d = discoverAllocators({
      backends: [backends[0]!, { ...backends[1]!, built: false }],
      exists: () => false,
      which: () => null,
      debianVersion: noDeb,
    });
    const names = d.allocators.map((a) => a.name);
    expect(names.slice(0, 4)).toEqual(['glibc', 'example', 'tlsf', 'tlsf-rt']);
    expect(d.allocators.find((a) => a.name === 'example')).toMatchObject({
      status: 'ready',
      preload: ['/ws/core/libheaphook_example.so'],
    });
    expect(d.allocators.find((a) => a.name === 'tlsf')).toMatchObject({
      status: 'skipped',
      reason: 'not built: run npx nx build tlsf',
    });
    expect(d.allocators.find((a) => a.name === 'tlsf-rt')!.status).toBe('skipped');
  });

  it('measures aix-plugin only as the host of the TLSF plug-in (aix-tlsf), never as a column of its own', () => {
    const aix = {
      name: 'aix-plugin',
      packageName: '@heaphook/aix-plugin',
      libraryPath: '/ws/aix/build/Release/libheaphook_aix_emul.so',
      built: true,
    };
    const d = discoverAllocators({
      backends: [...backends, aix],
      exists: () => false,
      which: () => null,
      debianVersion: noDeb,
    });
    expect(d.allocators.map((a) => a.name)).not.toContain('aix-plugin');
    const variant = d.allocators.find((a) => a.name === 'aix-tlsf')!;
    expect(variant.status).toBe('ready');
    const [churn] = selectWorkloads({ profile: 'quick', threads: [1], only: ['churn'] });
    expect(allocatorEnv(variant, churn!)).toEqual({
      MALLOCTYPE: 'user:libheaphook_aix_tlsf.a',
      LIBPATH: '/ws/aix/build/Release',
      LD_PRELOAD: '/ws/aix/build/Release/libheaphook_aix_emul.so',
    });
  });

  it('sizes the real-time TLSF pool per workload and pre-faults it', () => {
    const d = discoverAllocators({
      backends,
      exists: () => false,
      which: () => null,
      debianVersion: noDeb,
    });
    const rt = d.allocators.find((a) => a.name === 'tlsf-rt')!;
    const [frag] = selectWorkloads({ profile: 'default', threads: [2], only: ['fragmentation'] });
    expect(allocatorEnv(rt, frag!)).toEqual({
      INITIAL_MEMPOOL_SIZE: String(160 * 1024 * 1024),
      HEAPHOOK_TLSF_PREFAULT: '1',
      LD_PRELOAD: '/ws/tlsf/libheaphook_tlsf.so',
    });
  });

  it('tlsf-rec needs the heaptrack backend and runs only workloads with a recommended pool', () => {
    const without = discoverAllocators({
      backends,
      exists: () => false,
      which: () => null,
      debianVersion: noDeb,
    });
    expect(without.allocators.find((a) => a.name === 'tlsf-rec')).toMatchObject({
      status: 'skipped',
      reason: 'needs the heaphook backend heaptrack, not in this workspace',
    });
    const ht = {
      name: 'heaptrack',
      packageName: '@heaphook/heaptrack',
      libraryPath: '/ws/ht/libheaphook_heaptrack.so',
      built: false,
    };
    const unbuilt = discoverAllocators({
      backends: [...backends, ht],
      exists: () => false,
      which: () => null,
      debianVersion: noDeb,
    });
    expect(unbuilt.allocators.find((a) => a.name === 'tlsf-rec')).toMatchObject({
      status: 'skipped',
      reason: 'not built: run npx nx build heaptrack',
    });
    const d = discoverAllocators({
      backends: [...backends, { ...ht, built: true }],
      exists: () => false,
      which: () => null,
      debianVersion: noDeb,
    });
    const rec = d.allocators.find((a) => a.name === 'tlsf-rec')!;
    expect(rec.status).toBe('ready');
    expect(rec.preload).toEqual(['/ws/tlsf/libheaphook_tlsf.so']);
    const [frag] = selectWorkloads({ profile: 'default', threads: [1], only: ['fragmentation'] });
    const [churn] = selectWorkloads({ profile: 'default', threads: [1], only: ['churn'] });
    expect(frag!.recommendPool).toBe(true);
    expect(churn!.recommendPool).toBeUndefined();
    // before the recommendation is made (or when it failed) the column runs nothing
    expect(rec.appliesTo!(frag!)).toBe(false);
    const env = { INITIAL_MEMPOOL_SIZE: '128974848', HEAPHOOK_TLSF_THREAD_HEAPS: '0' };
    const withRec = { ...frag!, recommendedEnv: env };
    expect(rec.appliesTo!(withRec)).toBe(true);
    // the recommendation's environment as it is: no PREFAULT, the pool is touched lazily
    expect(allocatorEnv(rec, withRec)).toEqual({
      ...env,
      LD_PRELOAD: '/ws/tlsf/libheaphook_tlsf.so',
    });
  });

  it('treats a heaptrack backend as a tracer, alone and stacked over tlsf', () => {
    const ht = {
      name: 'heaptrack',
      packageName: '@heaphook/heaptrack',
      libraryPath: '/ws/ht/libheaphook_heaptrack.so',
      built: true,
    };
    const d = discoverAllocators({
      backends: [...backends, ht],
      exists: () => false,
      which: (c) => (c === 'heaptrack' ? '/usr/bin/heaptrack' : null),
      debianVersion: noDeb,
    });
    expect(d.allocators.map((a) => a.name)).not.toContain('heaptrack');
    const t = new Map(d.tracers.map((x) => [x.name, x]));
    expect(t.get('kde-heaptrack')).toMatchObject({
      status: 'ready',
      baseline: 'glibc',
      wrap: ['/usr/bin/heaptrack', '-o', '{dir}/heaptrack'],
    });
    expect(t.get('heaphook-heaptrack')).toMatchObject({
      status: 'ready',
      preload: ['/ws/ht/libheaphook_heaptrack.so'],
      baseline: 'glibc',
    });
    expect(t.get('heaphook-heaptrack-nostacks')).toMatchObject({
      status: 'ready',
      preload: ['/ws/ht/libheaphook_heaptrack.so'],
      env: { HEAPHOOK_STACKS: '0' },
      baseline: 'glibc',
    });
    expect(t.get('heaphook-heaptrack+tlsf')).toMatchObject({
      status: 'ready',
      preload: ['/ws/ht/libheaphook_heaptrack.so', '/ws/tlsf/libheaphook_tlsf.so'],
      baseline: 'tlsf',
    });
  });
});

describe('command-line allocator specs', () => {
  it('parses --variant NAME=BACKEND:KEY=VALUE,...', () => {
    expect(
      parseVariant('tlsf-1g=tlsf:INITIAL_MEMPOOL_SIZE=1G,HEAPHOOK_TLSF_PREFAULT=1'),
    ).toMatchObject({
      name: 'tlsf-1g',
      backend: 'tlsf',
      env: { INITIAL_MEMPOOL_SIZE: '1G', HEAPHOOK_TLSF_PREFAULT: '1' },
    });
    expect(parseVariant('plain=tlsf').env).toEqual({});
    expect(() => parseVariant('nobackend')).toThrow(/NAME=BACKEND/);
  });

  it('parses --preload NAME=PATH', () => {
    expect(parseCustom('mine=/opt/lib/libmine.so')).toEqual({
      name: 'mine',
      path: '/opt/lib/libmine.so',
    });
    expect(() => parseCustom('/opt/lib/libmine.so')).toThrow(/NAME=/);
  });

  it('filters by name, always keeps glibc, and names the known ones on a typo', () => {
    const items = [{ name: 'glibc' }, { name: 'tlsf' }, { name: 'jemalloc' }];
    expect(filterByName(items, ['jemalloc'], 'allocator', ['glibc']).map((i) => i.name)).toEqual([
      'glibc',
      'jemalloc',
    ]);
    expect(filterByName(items, undefined, 'allocator').map((i) => i.name)).toEqual([
      'glibc',
      'tlsf',
      'jemalloc',
    ]);
    expect(() => filterByName(items, ['jemaloc'], 'allocator')).toThrow(
      /unknown allocator 'jemaloc'; known: glibc, tlsf, jemalloc/,
    );
  });
});

describe('selectWorkloads', () => {
  it('makes one instance per thread count, folding counts that run the same program', () => {
    const names = selectWorkloads({
      profile: 'quick',
      threads: [1, 2],
      only: ['larson', 'xthread', 'churn'],
    }).map((w) => w.name);
    expect(names).toEqual(['churn', 'larson-t1', 'larson-t2', 'xthread-t2']);
  });

  it('passes size, seed and threads to the program', () => {
    const [w] = selectWorkloads({ profile: 'quick', threads: [2], only: ['larson-t2'], seed: 7 });
    expect(w!.args).toEqual(['--size=500000', '--seed=7', '--threads=2']);
  });

  it('gives the quick profile its knobs, and the full run none', () => {
    const quick = selectWorkloads({ profile: 'quick', threads: [2] });
    const args = (ws: typeof quick, name: string) => ws.find((w) => w.name === name)!.args;
    expect(args(quick, 'latency_b2b-t2')).toEqual([
      '--size=20000',
      '--seed=42',
      '--threads=2',
      '--slots=4000',
      '--probe-ms=50',
    ]);
    expect(args(quick, 'latency-t2')).toEqual([
      '--size=1000',
      '--seed=42',
      '--threads=2',
      '--probe-ms=50',
    ]);
    const full = selectWorkloads({ profile: 'default', threads: [1, 2] });
    expect(args(full, 'latency_b2b-t1')).toEqual(['--size=2000000', '--seed=42', '--threads=1']);
    expect(args(full, 'latency-t2')).toEqual(['--size=12000', '--seed=42', '--threads=2']);
  });

  it('traces three workloads with --quick (all named ones when --workloads is given), all in the full run', () => {
    const traced = (ws: ReturnType<typeof selectWorkloads>) =>
      ws.filter((w) => w.noTracers !== true).map((w) => w.name);
    expect(traced(selectWorkloads({ profile: 'quick', threads: [2] }))).toEqual([
      'churn',
      'xthread-t2',
      'python-json',
    ]);
    expect(
      traced(
        selectWorkloads({ profile: 'quick', threads: [2], only: ['larson', 'startup', 'churn'] }),
      ),
    ).toEqual(['churn', 'larson-t2']);
    // startup and latency_b2b are never traced
    expect(traced(selectWorkloads({ profile: 'default', threads: [1, 2] }))).toEqual([
      'churn',
      'larson-t1',
      'larson-t2',
      'xthread-t2',
      'false_sharing-t1',
      'false_sharing-t2',
      'realloc_growth',
      'fragmentation',
      'latency-t1',
      'latency-t2',
      'batch',
      'xmalloc-t2',
      'threads-t1',
      'threads-t2',
      'mixed',
      'python-json',
      'node-json',
    ]);
  });

  it('rejects an unknown workload name', () => {
    expect(() => selectWorkloads({ profile: 'quick', threads: [2], only: ['nope'] })).toThrow(
      /unknown workload 'nope'/,
    );
  });
});
