/**
 * /debug/pprof/heap and /debug/pprof/allocs: a gzip'd profile.proto with the sample types a Go
 * service's heap profile has (alloc_objects, alloc_space, inuse_objects, inuse_space), so
 * `go tool pprof`, Parca and Pyroscope read it as they read Go's. Functions are named by
 * addr2line on the process's modules (inlined frames as extra lines, innermost first); an
 * address in no module (JIT code) or without a symbol shows as its hex value.
 */
import { gzipSync } from 'node:zlib';

import {
  Function as PFunction,
  Line,
  Location,
  Mapping,
  Profile,
  Sample,
  StringTable,
  ValueType,
} from 'pprof-format';

import type { ProcessProfile } from './store.js';

export type ProfileKind = 'heap' | 'allocs';

/** The names of every return address in p's stacks: from the process's SYMBOL frames, else
 * addr2line on its modules (innermost inlined function first). */
async function namesOf(
  p: ProcessProfile,
): Promise<Map<bigint, { names: string[]; module: string }>> {
  const pcs = new Set<bigint>();
  for (const stack of p.stacks.values()) for (const pc of stack.pcs) pcs.add(pc);
  const out = new Map<bigint, { names: string[]; module: string }>();
  const ask: number[] = [];
  for (const pc of pcs) {
    const sym = p.symbols.get(pc);
    if (sym !== undefined) out.set(pc, { names: [sym.name], module: sym.module });
    else ask.push(Number(pc));
  }
  if (p.symbolizer !== undefined && ask.length > 0) {
    const frames = await p.symbolizer.symbolize(ask);
    for (const [pc, list] of frames) {
      const names = list.map((f) => f.function).filter((n) => n !== '??');
      out.set(BigInt(pc), { names, module: list[0]?.module ?? '' });
    }
  }
  return out;
}

export async function buildProfile(
  p: ProcessProfile,
  kind: ProfileKind,
  nowMs = Date.now(),
): Promise<Profile> {
  const named = await namesOf(p);
  const strings = new StringTable();
  const str = (s: string): number => strings.dedup(s);
  const mappings = new Map<string, Mapping>();
  const functions = new Map<string, PFunction>();
  const locations = new Map<bigint, Location>();
  const mappingOf = (module: string): Mapping => {
    let m = mappings.get(module);
    if (m === undefined) {
      m = new Mapping({ id: mappings.size + 1, filename: str(module), hasFunctions: true });
      mappings.set(module, m);
    }
    return m;
  };
  const locationOf = (pc: bigint): Location => {
    let loc = locations.get(pc);
    if (loc !== undefined) return loc;
    const known = named.get(pc);
    const names =
      known !== undefined && known.names.length > 0 ? known.names : [`0x${pc.toString(16)}`];
    const module = known?.module ?? '';
    const line = names.map((name) => {
      const key = `${name}\0${module}`;
      let fn = functions.get(key);
      if (fn === undefined) {
        fn = new PFunction({
          id: functions.size + 1,
          name: str(name),
          systemName: str(name),
          filename: str(module),
        });
        functions.set(key, fn);
      }
      return new Line({ functionId: fn.id });
    });
    loc = new Location({
      id: locations.size + 1,
      address: pc,
      mappingId: module !== '' ? mappingOf(module).id : 0,
      line,
    });
    locations.set(pc, loc);
    return loc;
  };
  const samples: Sample[] = [];
  for (const stack of p.stacks.values()) {
    const values = [
      Math.round(stack.allocObjects),
      Math.round(stack.allocSpace),
      Math.round(stack.inuseObjects),
      Math.round(stack.inuseSpace),
    ];
    if (kind === 'heap' && values[2] === 0 && values[0] === 0) continue;
    const locationId = stack.pcs.length > 0 ? stack.pcs.map((pc) => locationOf(pc).id) : [];
    if (locationId.length === 0) {
      /* "[other]": stacks beyond the agent's limit for this process */
      const fn = new PFunction({ id: functions.size + 1, name: str('[other stacks]') });
      functions.set(`[other]${functions.size}`, fn);
      const loc = new Location({ id: locations.size + 1, line: [new Line({ functionId: fn.id })] });
      locations.set(BigInt(-1 - locations.size), loc);
      locationId.push(loc.id);
    }
    samples.push(new Sample({ locationId, value: values }));
  }
  const type = (t: string, unit: string): ValueType =>
    new ValueType({ type: str(t), unit: str(unit) });
  const sampleType = [
    type('alloc_objects', 'count'),
    type('alloc_space', 'bytes'),
    type('inuse_objects', 'count'),
    type('inuse_space', 'bytes'),
  ];
  return new Profile({
    sampleType,
    sample: samples,
    mapping: [...mappings.values()],
    location: [...locations.values()],
    function: [...functions.values()],
    stringTable: strings,
    timeNanos: BigInt(nowMs) * 1_000_000n,
    periodType: type('space', 'bytes'),
    period: p.sampleBytes,
    defaultSampleType: kind === 'allocs' ? str('alloc_space') : str('inuse_space'),
    comment: [str(`heaphook agent: pid ${p.pid} (${p.comm}), backend ${p.backend}`)],
  });
}

export function encodeProfile(profile: Profile): Buffer {
  return gzipSync(profile.encode());
}
