/**
 * The memory-event hooks section: parsing the native program's line, the skip paths (no
 * libucm, nothing built), the summary (costs over the baseline, ratios, count checks), the
 * table; and the real program under the preloaded heaphook library with exact counts.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { nativeProgram, packageDir } from '../../src/paths.js';
import { renderText, ucmHooksTable } from '../../src/report.js';
import { validateResults, type Results } from '../../src/results.js';
import {
  parseUcmOutput,
  runUcmHooks,
  summarizeUcm,
  ucmColumns,
  ucmLibraryPath,
  type UcmColumnName,
  type UcmRun,
} from '../../src/ucmhooks.js';

const line = (impl: string, mode: string, ns: number, mapped = 100, hooks = true, base = 100) =>
  JSON.stringify({
    impl,
    mode,
    hooks,
    iters: 100,
    reps: 1,
    ok: true,
    loops: [
      {
        name: 'mmap_munmap_4k',
        calls: 200,
        base_ns_per_call: base,
        ns_per_call: ns,
        events: { vm_mapped: hooks ? mapped : 0, vm_unmapped: hooks ? 100 : 0, mmap: 0, munmap: 0 },
        expected: { vm_mapped: hooks ? 100 : 0, vm_unmapped: hooks ? 100 : 0, mmap: 0, munmap: 0 },
        match: !hooks || mapped === 100,
      },
    ],
  });

const run = (column: UcmColumnName, seq: number, text: string): UcmRun => {
  const reported = parseUcmOutput(text);
  return { seq, column, rep: 0, status: 'ok', mode: reported.mode, reported };
};

describe('memory-event hooks: parsing, skips, summary', () => {
  it('parses the last JSON line and rejects other output', () => {
    const r = parseUcmOutput(`noise\n${line('heaphook', 'preload', 12.5)}\n`);
    expect(r.mode).toBe('preload');
    expect(r.loops[0]!.ns_per_call).toBe(12.5);
    expect(() => parseUcmOutput('no json here')).toThrow(/no JSON line/);
    expect(() => parseUcmOutput('{"x":1}')).toThrow(/not a ucm_cost report/);
  });

  it('skips libucm with "install libucx-dev" and the section when nothing is built', () => {
    const cols = ucmColumns({ libucm: '/nonexistent/ucm_cost_libucm' });
    const ucm = cols.find((c) => c.name === 'libucm')!;
    expect(ucm).toMatchObject({ status: 'skipped', reason: 'install libucx-dev' });
    const none = ucmColumns({ heaphook: '/nonexistent/a', libucm: '/nonexistent/b' });
    const s = runUcmHooks({ runs: 1, iters: 10, reps: 1, timeoutS: 10, columns: none });
    expect(s.status).toBe('skipped');
    expect(s.reason).toMatch(/not built/);
    expect(ucmHooksTable(s)).toBeNull();
  });

  it('subtracts the baseline, divides by libucm, checks the counts', () => {
    const cols = ucmColumns({
      heaphook: process.execPath,
      libucm: process.execPath,
      library: process.execPath,
    });
    const raw = [
      run('heaphook-preload', 1, line('heaphook', 'preload', 110)),
      run('heaphook-reloc', 2, line('heaphook', 'reloc', 130, 99)),
      run('heaphook-bistro', 3, line('heaphook', 'bistro', 120)),
      run('libucm', 4, line('libucm', 'libucm', 140, 100, true, 130)),
      run('libucm-reloc', 5, line('libucm', 'libucm', 180)),
      run('libucm-off', 6, line('libucm', 'none', 100, 0, false, 100)),
    ];
    const [l] = summarizeUcm(cols, raw);
    expect(l!.columns['heaphook-preload']!.cost_ns).toBe(10);
    // libucm's baseline is the libucm-off run (its in-process one already has the hooks)
    expect(l!.columns.libucm!.cost_ns).toBe(40);
    expect(l!.ratios['heaphook-preload']).toBe(0.25);
    expect(l!.ratios['heaphook-reloc']).toBe(0.75);
    expect(l!.ratios['heaphook-bistro']).toBe(0.5);
    // and against libucm in reloc mode (cost 80 ns)
    expect(l!.ratios_reloc).toEqual({
      'heaphook-preload': 0.125,
      'heaphook-reloc': 0.375,
      'heaphook-bistro': 0.25,
    });
    expect(l!.same_counts['heaphook-preload']).toBe(true);
    expect(l!.same_counts['heaphook-reloc']).toBe(false);
    expect(l!.columns['heaphook-reloc']!.match).toBe(false);
    const t = ucmHooksTable({
      status: 'ok',
      runs: 1,
      iters: 100,
      reps: 1,
      library: null,
      columns: cols,
      loops: [l!],
      raw,
    })!;
    const text = renderText(t);
    expect(text).toMatch(
      /mmap_munmap_4k\s+100 ns\s+10 ns \*\s+30 ns\s+20 ns\s+40 ns\s+80 ns\s+0\.25× \/ 0\.75× \/ 0\.50×\s+0\.13× \/ 0\.38× \/ 0\.25×/,
    );
    expect(text).toMatch(/wrong: heaphook-reloc; differ from libucm: heaphook-reloc/);
  });
});

const prog = nativeProgram('ucm_cost_heaphook');
const built = existsSync(prog) && existsSync(ucmLibraryPath());

describe.skipIf(!built)('ucm_cost under the preloaded heaphook library', () => {
  it('counts exactly the events each loop implies', () => {
    const r = spawnSync(prog, ['--iters=300', '--reps=2'], {
      encoding: 'utf8',
      env: { ...process.env, LD_PRELOAD: ucmLibraryPath() },
      timeout: 30_000,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const rep = parseUcmOutput(r.stdout);
    expect(rep).toMatchObject({ impl: 'heaphook', mode: 'preload', hooks: true, ok: true });
    const byName = Object.fromEntries(rep.loops.map((l) => [l.name, l]));
    expect(byName.mmap_munmap_4k!.events).toEqual({
      vm_mapped: 300,
      vm_unmapped: 300,
      mmap: 300,
      munmap: 300,
    });
    expect(byName.mremap_grow_shrink!.events).toEqual({
      vm_mapped: 600,
      vm_unmapped: 600,
      mmap: 0,
      munmap: 0,
    });
    expect(byName.madvise_dontneed!.events).toEqual({
      vm_mapped: 0,
      vm_unmapped: 300,
      mmap: 0,
      munmap: 0,
    });
    for (const l of rep.loops) {
      expect(l.events).toEqual(l.expected);
      expect(l.match).toBe(true);
      expect(l.ns_per_call).toBeGreaterThan(0);
    }
  });
});

describe.skipIf(!built)('compare --only-ucm-hooks (the CLI)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'bench-ucm-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  it('prints the section and writes it into latest.json and latest.md', () => {
    const r = spawnSync(
      process.execPath,
      [
        join(packageDir, 'dist', 'cli.js'),
        'compare',
        '--quick',
        '--only-ucm-hooks',
        '--ucm-runs',
        '1',
        '--no-progress',
        '--out',
        tmp,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/Memory-event hooks: ns per hooked call/);
    const doc = JSON.parse(readFileSync(join(tmp, 'latest.json'), 'utf8')) as Results;
    expect(validateResults(doc)).toEqual([]);
    const u = doc.ucm_hooks!;
    expect(u.status).toBe('ok');
    expect(u.loops.map((l) => l.name)).toContain('shmat_shmdt');
    for (const l of u.loops) expect(l.columns['heaphook-preload']!.match).toBe(true);
    if (u.columns.find((c) => c.name === 'libucm')!.status === 'skipped')
      expect(r.stdout).toMatch(/libucm: skipped: install libucx-dev/);
    expect(readFileSync(join(tmp, 'latest.md'), 'utf8')).toMatch(/### Memory-event hooks/);
  });
});
