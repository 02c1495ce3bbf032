/** `heaphook dump`: one text line per event, beginning with the function's name. */
import { terminalText } from '@heaphook/core';

import { blankEvent, decodeLogColumns, eventInto, forEachRecord } from '../decode/events.js';
import { OP_REALLOC_DONE } from '../decode/format.generated.js';
import type {
  EventRecord,
  LogRecord,
  ModuleRecord,
  StackNodeRecord,
  VmRecord,
} from '../decode/records.js';
import { framesOf } from './summary.js';
import { formatFrame, Symbolizer, type Frame } from './symbolize.js';

/** Below it, an address is a small integer to V8, whose hexadecimal it writes fast. */
const SMALL = 0x40000000;
const LOW_BITS = 0x1000000;

/** `0x` and the address in hexadecimal, as n.toString(16) writes it: above SMALL in two small
 * halves, which V8 converts ~4x faster than the whole double (dump writes millions). */
function hex(n: number): string {
  if (n < SMALL) return `0x${n.toString(16)}`;
  const high = Math.floor(n / LOW_BITS);
  const low = (n - high * LOW_BITS).toString(16);
  return `0x${high.toString(16)}${'000000'.slice(low.length)}${low}`;
}

/** The dump line of an event (without a trailing newline). */
export function formatEvent(e: EventRecord): string {
  let line = `${e.op} t=${(e.time / 1e9).toFixed(9)} tid=${e.tid}`;
  switch (e.op) {
    case 'realloc':
    case 'reallocarray':
      line += ` old=${hex(e.oldPtr)} ptr=${hex(e.ptr)}`;
      if (e.op === 'reallocarray') line += ` count=${e.count}`;
      line += ` size=${e.size}`;
      break;
    case 'calloc':
      line += ` ptr=${hex(e.ptr)} count=${e.count} size=${e.size}`;
      break;
    case 'free':
      line += ` ptr=${hex(e.ptr)}`;
      break;
    case 'posix_memalign':
    case 'memalign':
    case 'aligned_alloc':
      line += ` ptr=${hex(e.ptr)} align=${e.align} size=${e.size}`;
      break;
    default:
      line += ` ptr=${hex(e.ptr)} size=${e.size}`;
  }
  if (e.stack !== 0) line += ` stack=${e.stack}`;
  if (e.duration !== undefined) line += ` duration=${e.duration}ns`;
  if (e.weight !== undefined) line += ` weight=${e.weight}`;
  return line;
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

/** Reads the log by columns and formats each event through one reused record: no object per
 * event (a 10 M-event log makes none). */
export async function dump(path: string, options: DumpOptions = {}): Promise<void> {
  const write = options.write ?? ((text: string) => process.stdout.write(text));
  const stacks = new Map<number, StackNodeRecord>();
  const modules: ModuleRecord[] = [];
  const event = blankEvent();
  let symbolizer: Symbolizer | undefined;
  for await (const batch of decodeLogColumns(path, { reuseColumns: true })) {
    const { op, stack } = batch.events;
    const pcs = new Set<number>();
    const framesOfStack = (id: number): void => {
      if (options.stacks === true) for (const pc of framesOf(stacks, id)) pcs.add(pc);
    };
    forEachRecord(
      batch,
      (r) => {
        if (r.type === 'stack') stacks.set(r.id, r);
        else if (r.type === 'module') {
          modules.push(r);
          symbolizer = undefined;
        } else if (r.type === 'vm') framesOfStack(r.stack);
      },
      (k) => framesOfStack(stack[k]!),
    );
    let frames = new Map<number, Frame[]>();
    if (pcs.size > 0) {
      symbolizer ??= new Symbolizer(modules);
      frames = await symbolizer.symbolize(pcs);
    }
    let out = '';
    const stackLines = (id: number): void => {
      if (options.stacks !== true) return;
      for (const pc of framesOf(stacks, id)) {
        for (const f of frames.get(pc) ?? []) out += `    ${formatFrame(f)}\n`;
      }
    };
    forEachRecord(
      batch,
      (r) => {
        if (r.type === 'vm') {
          out += `${formatVm(r)}\n`;
          stackLines(r.stack);
        } else if (options.headers !== false) {
          const line = formatOther(r);
          if (line !== undefined) out += `${line}\n`;
        }
      },
      (k) => {
        if (op[k] === OP_REALLOC_DONE) return;
        out += `${formatEvent(eventInto(batch, k, event))}\n`;
        stackLines(stack[k]!);
      },
    );
    write(out);
  }
}
