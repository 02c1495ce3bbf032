/**
 * pprof export: a gzipped profile.proto (encoded with the pprof-format package) with one
 * sample per allocation stack and the sample types alloc_objects/alloc_space (everything
 * allocated), inuse_objects/inuse_space (still live at the end of the log) and peak_space (the
 * site's live bytes at the heap's peak: its contribution to the peak; they add up to the
 * peak heap). Locations
 * carry their mapping (from the MODULE records, with build ids) and symbolised functions,
 * inlined frames as extra lines, so `go tool pprof` and speedscope need no binaries.
 */
import { gzipSync } from 'node:zlib';

import {
  Function as PFunction,
  Location,
  Mapping,
  Profile,
  Sample,
  StringTable,
  ValueType,
  Line,
} from 'pprof-format';

import type { ReportModel } from './model.js';
import type { StackNames } from './symbols.js';

export function pprofProfile(model: ReportModel, names: StackNames): Profile {
  const strings = new StringTable();
  const str = (s: string): number => strings.dedup(s);
  const mappings: Mapping[] = [];
  const mappingOf = new Map<string, number>();
  model.modules.forEach((m) => {
    const key = `${m.start}:${m.path}`;
    if (mappingOf.has(key)) return;
    const id = mappings.length + 1;
    mappingOf.set(key, id);
    mappings.push(
      new Mapping({
        id,
        memoryStart: m.start,
        memoryLimit: m.end,
        fileOffset: Math.max(0, m.start - m.base),
        filename: str(m.path),
        buildId: str(m.buildId),
        hasFunctions: true,
        hasFilenames: true,
        hasLineNumbers: true,
        hasInlineFrames: true,
      }),
    );
  });
  const functions: PFunction[] = [];
  const functionOf = new Map<string, number>();
  const locations: Location[] = [];
  const locationOf = new Map<number, number>();
  const locationFor = (pc: number): number => {
    const known = locationOf.get(pc);
    if (known !== undefined) return known;
    const module = model.modules.findLast((m) => pc >= m.start && pc < m.end);
    const lines = names.framesOfPc(pc).map((f) => {
      const name = f.function === '??' ? `0x${pc.toString(16)}` : f.function;
      const key = `${name}\0${f.file ?? ''}`;
      let fid = functionOf.get(key);
      if (fid === undefined) {
        fid = functions.length + 1;
        functionOf.set(key, fid);
        functions.push(
          new PFunction({
            id: fid,
            name: str(name),
            systemName: str(name),
            filename: str(f.file ?? ''),
          }),
        );
      }
      return new Line({ functionId: fid, line: f.line ?? 0 });
    });
    const id = locations.length + 1;
    locations.push(
      new Location({
        id,
        mappingId: module ? (mappingOf.get(`${module.start}:${module.path}`) ?? 0) : 0,
        address: pc,
        line: lines,
      }),
    );
    locationOf.set(pc, id);
    return id;
  };
  const samples: Sample[] = [];
  for (const site of model.sites) {
    if (site.allocations === 0) continue;
    const pcs = names.pcs(site.stack);
    samples.push(
      new Sample({
        locationId: pcs.map(locationFor),
        value: [site.allocations, site.bytes, site.liveBlocks, site.liveBytes, site.peakBytes],
      }),
    );
  }
  const valueType = (type: string, unit: string): ValueType =>
    new ValueType({ type: str(type), unit: str(unit) });
  const startMs = model.process?.startTimeMs ?? 0;
  return new Profile({
    sampleType: [
      valueType('alloc_objects', 'count'),
      valueType('alloc_space', 'bytes'),
      valueType('inuse_objects', 'count'),
      valueType('inuse_space', 'bytes'),
      valueType('peak_space', 'bytes'),
    ],
    sample: samples,
    mapping: mappings,
    location: locations,
    function: functions,
    stringTable: strings,
    timeNanos: BigInt(startMs) * 1_000_000n,
    durationNanos: model.lastTimeNs,
    periodType: valueType('space', 'bytes'),
    period: 1,
    defaultSampleType: str('inuse_space'),
  });
}

/** The gzipped profile.proto. */
export function pprofBytes(model: ReportModel, names: StackNames): Buffer {
  return gzipSync(pprofProfile(model, names).encode());
}
