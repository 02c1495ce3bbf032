/** `heaphook dump`: one text line per event, beginning with the function's name. */
import { terminalText } from '@heaphook/core';

import { decodeLogBatches } from '../decode/events.js';
import type {
  EventRecord,
  LogRecord,
  ModuleRecord,
  StackNodeRecord,
  VmRecord,
} from '../decode/records.js';
import { framesOf } from './summary.js';
import { formatFrame, Symbolizer, type Frame } from './symbolize.js';

const hex = (n: number): string => `0x${n.toString(16)}`;

/** The dump line of an event (without a trailing newline). */
export function formatEvent(e: EventRecord): string {
  const t = (e.time / 1e9).toFixed(9);
  const parts = [e.op, `t=${t}`, `tid=${e.tid}`];
  switch (e.op) {
    case 'realloc':
    case 'reallocarray':
      parts.push(`old=${hex(e.oldPtr)}`, `ptr=${hex(e.ptr)}`);
      if (e.op === 'reallocarray') parts.push(`count=${e.count}`);
      parts.push(`size=${e.size}`);
      break;
    case 'calloc':
      parts.push(`ptr=${hex(e.ptr)}`, `count=${e.count}`, `size=${e.size}`);
      break;
    case 'free':
      parts.push(`ptr=${hex(e.ptr)}`);
      break;
    case 'posix_memalign':
    case 'memalign':
    case 'aligned_alloc':
      parts.push(`ptr=${hex(e.ptr)}`, `align=${e.align}`, `size=${e.size}`);
      break;
    default:
      parts.push(`ptr=${hex(e.ptr)}`, `size=${e.size}`);
  }
  if (e.stack !== 0) parts.push(`stack=${e.stack}`);
  if (e.duration !== undefined) parts.push(`duration=${e.duration}ns`);
  if (e.weight !== undefined) parts.push(`weight=${e.weight}`);
  return parts.join(' ');
}

/** The dump line of a mapped-memory event: `vm_mapped` or `vm_unmapped`, then its fields. */
export function formatVm(r: VmRecord): string {
  const parts = [`vm_${r.kind}`, `t=${(r.time / 1e9).toFixed(9)}`, `tid=${r.tid}`];
  parts.push(`address=${hex(r.address)}`, `size=${r.size}`);
  if (r.stack !== 0) parts.push(`stack=${r.stack}`);
  return parts.join(' ');
}

/** A `#` line of a declaration (terminalText: its exe, argv and paths are the program's). */
function formatOther(r: LogRecord): string | undefined {
  const line = declarationLine(r);
  return line === undefined ? undefined : terminalText(line);
}

function declarationLine(r: LogRecord): string | undefined {
  switch (r.type) {
    case 'process':
      return `# process pid=${r.pid} ppid=${r.ppid} exe=${r.exe} argv=${JSON.stringify(r.argv)} stacks=${r.stacks} timing=${r.timing} sample_bytes=${r.sampleBytes}${r.vmEvents ? ' vm_events' : ''}${r.forkChild ? ' fork_child' : ''}`;
    case 'module':
      return `# module ${hex(r.start)}-${hex(r.end)} base=${hex(r.base)} build_id=${r.buildId || '-'} ${r.path}`;
    case 'rt_violation':
      return `# rt_violation site=${r.site} call=${r.call} count=${r.count} tid=${r.tid} thread=${JSON.stringify(r.threadName)} policy=${r.policy} priority=${r.priority} stack=${r.stack} t=${(r.time / 1e9).toFixed(9)}`;
    case 'end':
      return `# end reason=${r.reason} dropped=${r.dropped} events=${r.events} t=${(r.time / 1e9).toFixed(9)}`;
    default:
      return undefined;
  }
}

export interface DumpOptions {
  /** Print each event's stack under it, symbolised. */
  readonly stacks?: boolean;
  /** Also print the process, module and end records as `#` lines. */
  readonly headers?: boolean;
  readonly write?: (text: string) => void;
}

export async function dump(path: string, options: DumpOptions = {}): Promise<void> {
  const write = options.write ?? ((text: string) => process.stdout.write(text));
  const stacks = new Map<number, StackNodeRecord>();
  const modules: ModuleRecord[] = [];
  let symbolizer: Symbolizer | undefined;
  for await (const batch of decodeLogBatches(path)) {
    const pcs = new Set<number>();
    for (const r of batch) {
      if (r.type === 'stack') stacks.set(r.id, r);
      else if (r.type === 'module') {
        modules.push(r);
        symbolizer = undefined;
      } else if ((r.type === 'event' || r.type === 'vm') && options.stacks === true) {
        for (const pc of framesOf(stacks, r.stack)) pcs.add(pc);
      }
    }
    let frames = new Map<number, Frame[]>();
    if (pcs.size > 0) {
      symbolizer ??= new Symbolizer(modules);
      frames = await symbolizer.symbolize(pcs);
    }
    let out = '';
    for (const r of batch) {
      if (r.type === 'event' || r.type === 'vm') {
        if (r.type === 'event' && r.op === 'realloc_done') continue;
        out += `${r.type === 'vm' ? formatVm(r) : formatEvent(r)}\n`;
        if (options.stacks === true) {
          for (const pc of framesOf(stacks, r.stack)) {
            for (const f of frames.get(pc) ?? []) out += `    ${formatFrame(f)}\n`;
          }
        }
      } else if (options.headers !== false) {
        const line = formatOther(r);
        if (line !== undefined) out += `${line}\n`;
      }
    }
    write(out);
  }
}
