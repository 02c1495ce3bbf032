/**
 * Mapped memory (issue 7, part 5): with ucm-hooks loaded, the tracer records VM_MAPPED and
 * VM_UNMAPPED events beside the allocation events, and the report charts memory mapped next to
 * the heap. The mapper program maps in a known sequence and prints what the log must show.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { libraryPath as tlsfLibraryPath } from '@heaphook/tlsf';
import { libraryPath as ucmLibraryPath } from '@heaphook/ucm-hooks';
import { describe, expect, it } from 'vitest';

import {
  decodeLog,
  framesOf,
  memoryEventsLibrary,
  record,
  report,
  Symbolizer,
  type ModuleRecord,
  type ProcessRecord,
  type StackNodeRecord,
  type VmRecord,
} from '../../src/index.js';
import { heaphookBin, logsIn, python3, release, scratch, traced, tracer } from '../helpers.js';

const mapper = join(release, 'hh_test_mapper');
const ucm = ucmLibraryPath();
const tlsf = tlsfLibraryPath();
const MIB = 1024 * 1024;

interface MapperExpected {
  mapped: number;
  unmapped: number;
  mappedBytes: number;
  unmappedBytes: number;
  peakBytes: number;
  finalBytes: number;
}

interface Decoded {
  process: ProcessRecord | undefined;
  vm: VmRecord[];
  stacks: Map<number, StackNodeRecord>;
  modules: ModuleRecord[];
}

async function decode(log: string): Promise<Decoded> {
  const out: Decoded = { process: undefined, vm: [], stacks: new Map(), modules: [] };
  for await (const r of decodeLog(log)) {
    if (r.type === 'process') out.process ??= r;
    else if (r.type === 'vm') out.vm.push(r);
    else if (r.type === 'stack') out.stacks.set(r.id, r);
    else if (r.type === 'module') out.modules.push(r);
  }
  return out;
}

async function functionsOf(d: Decoded, stack: number): Promise<string[]> {
  const pcs = framesOf(d.stacks, stack);
  const frames = await new Symbolizer(d.modules).symbolize(pcs);
  return pcs.flatMap((pc) => (frames.get(pc) ?? []).map((f) => f.function));
}

/** Runs the mapper with ucm-hooks and the tracer preloaded: what it expects, and its log. */
function runMapper(name: string): { expected: MapperExpected; log: string; dir: string } {
  const dir = scratch(name);
  const run = traced(dir, mapper, [], {}, [ucm, tracer]);
  expect(run.status, run.stderr).toBe(0);
  return { expected: JSON.parse(run.stdout) as MapperExpected, log: logsIn(dir)[0]!, dir };
}

/** The one log of the process whose program matches `exe`. */
async function logOf(dir: string, exe: RegExp): Promise<string> {
  for (const log of logsIn(dir)) if (exe.test((await decode(log)).process?.exe ?? '')) return log;
  throw new Error(`no log of ${exe} in ${dir}`);
}

describe('mapped memory from ucm-hooks', () => {
  it('has the built libraries it needs', () => {
    expect(existsSync(ucm), `build ucm-hooks first: ${ucm}`).toBe(true);
    expect(existsSync(mapper)).toBe(true);
  });

  it('records every mapping of the program exactly, with its stack, and nothing of its own', async () => {
    const { expected, log } = runMapper('vm-exact');
    const d = await decode(log);
    expect(d.process?.vmEvents).toBe(true);
    const mapped = d.vm.filter((r) => r.kind === 'mapped');
    const unmapped = d.vm.filter((r) => r.kind === 'unmapped');
    expect(mapped).toHaveLength(expected.mapped);
    expect(unmapped).toHaveLength(expected.unmapped);
    expect(mapped.reduce((n, r) => n + r.size, 0)).toBe(expected.mappedBytes);
    expect(unmapped.reduce((n, r) => n + r.size, 0)).toBe(expected.unmappedBytes);
    // In call order: 20 map/unmap pairs, the kept 3 MiB, the thread's 4 MiB, the mremap ...
    expect(d.vm.slice(0, 4).map((r) => `${r.kind} ${r.size / MIB}`)).toEqual([
      'mapped 1',
      'unmapped 1',
      'mapped 1',
      'unmapped 1',
    ]);
    expect(d.vm.slice(40).map((r) => `${r.kind} ${r.size / MIB}`)).toEqual([
      'mapped 3',
      'mapped 4',
      'unmapped 4',
      'unmapped 3',
      'mapped 5',
      'unmapped 1',
      'unmapped 1',
    ]);
    // The thread's mapping is on another thread; the rest on the main one.
    const mainTid = d.process!.pid;
    expect(d.vm[41]!.tid).not.toBe(mainTid);
    expect(d.vm.filter((r) => r.tid === mainTid)).toHaveLength(
      expected.mapped + expected.unmapped - 2,
    );
    // Stacks start at the program's frames (ucm-hooks' and the tracer's own are left out).
    expect((await functionsOf(d, d.vm[0]!.stack))[0]).toBe('map');
    expect(await functionsOf(d, d.vm[0]!.stack)).toContain('map_and_unmap');
    expect(await functionsOf(d, d.vm[40]!.stack)).toContain('map_kept');
    expect(await functionsOf(d, d.vm[41]!.stack)).toContain('mapping_thread');
    expect((await functionsOf(d, d.vm[1]!.stack))[0]).toBe('map_and_unmap'); // munmap's caller
  });

  it('the report sums mapped memory up, charts it beside the heap and names the sites', async () => {
    const { expected, log, dir } = runMapper('vm-report');
    const out = join(dir, 'report');
    const { json, text, model } = await report(log, { outputDir: out });
    expect(json.mappedMemory).not.toBeNull();
    const m = json.mappedMemory!;
    expect(m.mappedEvents).toBe(expected.mapped);
    expect(m.unmappedEvents).toBe(expected.unmapped);
    expect(m.mappedBytes).toBe(expected.mappedBytes);
    expect(m.unmappedBytes).toBe(expected.unmappedBytes);
    expect(m.peakBytes).toBe(expected.peakBytes);
    expect(m.finalBytes).toBe(expected.finalBytes);
    // The peak is the thread's mapping on top of the kept one.
    const peakEvent = (await decode(log)).vm[41]!;
    expect(m.peakTimeNs).toBe(peakEvent.time);
    // Sites: the loop's stack mapped 20 MiB in 20 mappings, first.
    expect(m.topSites[0]).toMatchObject({ mappings: 20, bytes: 20 * MIB });
    expect(m.topSites[0]!.stack.join('\n')).toContain('map_and_unmap');
    expect(text).toContain('mapped memory (VM events): peak 7.00 MiB');
    expect(text).toContain('top mapping sites:');
    // VM events are not allocation events: the heap figures are the program's 16 blocks (and
    // the C library's own few: pthread_create, stdio), as many as the log's END counts.
    expect(json.allocations).toBeGreaterThanOrEqual(16);
    expect(json.allocations).toBeLessThan(24);
    expect(json.events).toBe(model.end!.events);
    expect(model.mapped?.series.length).toBeGreaterThan(0);
    // The chart: a second, dashed line with its peak marked where the model says.
    const svg = readFileSync(join(out, 'heap.svg'), 'utf8');
    expect(svg).toContain('id="mapped-line"');
    expect(svg).toMatch(/id="mapped-legend"[^>]*>memory mapped \(VM events\), peak 7\.00 MiB/);
    const marker =
      /id="mapped-peak-marker" cx="([\d.]+)" cy="([\d.]+)"[^>]*data-bytes="(\d+)"/.exec(svg);
    expect(Number(marker?.[3])).toBe(expected.peakBytes);
    const plot =
      /id="plot-area" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"[^>]*data-y-max="(\d+)"/.exec(
        svg,
      )!;
    const [, , top, , height, yMax] = plot.map(Number);
    expect(Number(marker![2])).toBeCloseTo(
      top! + height! - (expected.peakBytes / yMax!) * height!,
      1,
    );
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    expect(html).toContain('<h2>Memory mapped by the program</h2>');
    expect(html).toContain('id="mapped-sites"');
    expect(html).toContain('peak mapped memory');
  });

  it('a forked child logs its own mappings, and the parent keeps its own', async () => {
    const dir = scratch('vm-fork');
    const run = traced(dir, mapper, ['fork'], {}, [ucm, tracer]);
    expect(run.status, run.stderr).toBe(0);
    const logs = await Promise.all(logsIn(dir).map(decode));
    expect(logs).toHaveLength(2);
    const child = logs.find((d) => d.process?.forkChild === true)!;
    const parent = logs.find((d) => d.process?.forkChild === false)!;
    expect(child.vm.map((r) => `${r.kind} ${r.size}`)).toEqual([`mapped ${2 * MIB}`]);
    expect(parent.vm).toHaveLength(47);
  });

  it('HEAPHOOK_TRACE_VM=no leaves them out; =yes without ucm-hooks stops before main', async () => {
    const dir = scratch('vm-config');
    const off = traced(dir, mapper, [], { HEAPHOOK_TRACE_VM: 'no' }, [ucm, tracer]);
    expect(off.status, off.stderr).toBe(0);
    const d = await decode(logsIn(dir)[0]!);
    expect(d.process?.vmEvents).toBe(false);
    expect(d.vm).toHaveLength(0);
    const { json } = await report(logsIn(dir)[0]!);
    expect(json.mappedMemory).toBeNull();

    const refused = traced(scratch('vm-refused'), mapper, [], { HEAPHOOK_TRACE_VM: 'yes' });
    expect(refused.status).toBe(78);
    expect(refused.stdout).toBe('');
    const lines = refused.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('HEAPHOOK_TRACE_VM');
    expect(lines[0]).toContain('libheaphook_ucm.so');

    const bad = traced(scratch('vm-bad'), mapper, [], { HEAPHOOK_TRACE_VM: 'sometimes' }, [
      ucm,
      tracer,
    ]);
    expect(bad.status).toBe(78);
    expect(bad.stderr).toContain('HEAPHOOK_TRACE_VM');
  });

  it('sees the pool areas a heaphook backend maps (TLSF growing from a 1 MiB pool)', async () => {
    const dir = scratch('vm-tlsf');
    const script = 'x = [bytes(100000) for _ in range(300)]; print(len(x))';
    const run = traced(
      dir,
      python3,
      ['-c', script],
      { INITIAL_MEMPOOL_SIZE: '1M', ADDITIONAL_MEMPOOL_SIZE: '1M', PYTHONMALLOC: 'malloc' },
      [ucm, tracer, tlsf],
    );
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('300');
    const log = await logOf(dir, /\/python3[.\d]*$/);
    const { json } = await report(log);
    const m = json.mappedMemory!;
    // 300 x 100 kB live at once: the pool grew to hold them, and every area was seen mapped.
    expect(json.peakHeapBytes).toBeGreaterThan(30_000_000);
    expect(m.peakBytes).toBeGreaterThanOrEqual(json.peakHeapBytes);
    expect(m.topSites[0]!.stack.join('\n')).toMatch(/tlsf/);
  });

  it('heaphook record preloads ucm-hooks when it is installed: python3 arenas appear', async () => {
    expect(memoryEventsLibrary()).toBe(ucm);
    const dir = scratch('vm-record');
    const script = 'd = [{"k": i} for i in range(200000)]; print(len(d))';
    const result = await record(python3, ['-c', script], {
      outputDir: dir,
      quiet: true,
      stdio: 'pipe',
    });
    expect(result.status, result.stderr).toBe(0);
    const log = await logOf(dir, /\/python3[.\d]*$/);
    const { json } = await report(log);
    // 200,000 small dicts live in pymalloc's arenas, which malloc never sees.
    expect(json.mappedMemory!.peakBytes).toBeGreaterThan(2 * json.peakHeapBytes);
    expect(json.mappedMemory!.topSites[0]!.stack.join('\n')).toMatch(/PyObject_Malloc/);

    const without = await record(python3, ['-c', script], {
      outputDir: scratch('vm-record-off'),
      quiet: true,
      stdio: 'pipe',
      vm: false,
    });
    expect(without.status).toBe(0);
    const offLog = without.logs.find((l) => l.reason === 'exit')!;
    expect((await decode(offLog.path)).process?.vmEvents).toBe(false);
  });

  it('heaphook dump prints vm_mapped / vm_unmapped lines, and --summary the mapped figures', () => {
    const { log } = runMapper('vm-dump');
    const dump = spawnSync(process.execPath, [heaphookBin, 'dump', log], {
      encoding: 'utf8',
    });
    expect(dump.status, dump.stderr).toBe(0);
    const lines = dump.stdout.split('\n');
    expect(lines.filter((l) => l.startsWith('vm_mapped '))).toHaveLength(23);
    expect(lines.filter((l) => l.startsWith('vm_unmapped '))).toHaveLength(24);
    expect(lines.find((l) => l.startsWith('vm_mapped '))).toMatch(
      /^vm_mapped t=\d+\.\d{9} tid=\d+ address=0x[0-9a-f]+ size=1048576 stack=\d+$/,
    );
    expect(dump.stdout).toMatch(/^# process .* vm_events$/m);
    const summary = spawnSync(process.execPath, [heaphookBin, 'dump', '--summary', log], {
      encoding: 'utf8',
    });
    expect(summary.status, summary.stderr).toBe(0);
    expect(summary.stdout).toMatch(
      /^mapped: peak 7340032 bytes at \d+\.\d{6} s, 3145728 bytes at the end; 23 mapped \(\d+ bytes\), 24 unmapped/m,
    );
  });
});
