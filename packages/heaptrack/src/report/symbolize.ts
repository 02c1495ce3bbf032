/**
 * Symbolising return addresses with the module map of a log: each address is mapped to its
 * module and module-relative address, then resolved to function, file and line by
 * `addr2line -f -C -i -a` (ELF symbols and DWARF, inlined frames included), one process per
 * module and batch, results cached. The names come from the program's binaries and may hold
 * anything but NUL, newlines included: each address asked is followed by a random fence
 * address whose answer closes it (splitAnswers), so no name can move a frame to another
 * address. Frame keeps the names raw; formatFrame and StackNames.functions give them for
 * display.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { displayText } from '@heaphook/core';

import { readBuildId } from './elf.js';
import type { ModuleRecord } from '../decode/records.js';

export interface Frame {
  /** The return address as recorded. */
  readonly pc: number;
  /** Demangled function name, '??' when unknown. */
  readonly function: string;
  readonly file?: string;
  readonly line?: number;
  /** Module path, '' when the address is in no module (JIT code). */
  readonly module: string;
  /** Address inside the module (ELF virtual address of the call instruction). */
  readonly offset: number;
  /** True for a function inlined into the next frame. */
  readonly inlined: boolean;
}

export interface SymbolizerOptions {
  /** The addr2line program (default: `addr2line` on PATH). */
  readonly addr2line?: string;
  /** Where separate debug files are looked up by build id (default /usr/lib/debug). */
  readonly debugDir?: string;
}

/**
 * The file to symbolise a module with: separate debug info found by build id
 * (<debugDir>/.build-id/ab/cdef....debug, as Debian's -dbgsym packages install), else the
 * module itself when its build id is the one recorded; undefined when neither fits (the file
 * changed since the run, or is gone).
 */
export function symbolFileFor(
  module: ModuleRecord,
  debugDir = '/usr/lib/debug',
): string | undefined {
  if (module.buildId.length > 2) {
    const debug = join(
      debugDir,
      '.build-id',
      module.buildId.slice(0, 2),
      `${module.buildId.slice(2)}.debug`,
    );
    if (existsSync(debug)) return debug;
  }
  if (!existsSync(module.path)) return undefined;
  const onDisk = readBuildId(module.path);
  if (onDisk === undefined) return undefined;
  if (module.buildId !== '' && onDisk !== '' && onDisk !== module.buildId) return undefined;
  return module.path;
}

export class Symbolizer {
  private readonly modules: ModuleRecord[];
  private readonly cache = new Map<number, Frame[]>();
  private readonly addr2line: string;
  private readonly debugDir: string | undefined;
  private readonly files = new Map<ModuleRecord, string | undefined>();

  constructor(modules: readonly ModuleRecord[], options: SymbolizerOptions = {}) {
    this.debugDir = options.debugDir;
    // Later records win for the same range (a library loaded where another was unloaded).
    this.modules = [...modules].reverse();
    this.addr2line = options.addr2line ?? 'addr2line';
  }

  moduleOf(pc: number): ModuleRecord | undefined {
    return this.modules.find((m) => pc >= m.start && pc < m.end);
  }

  /** Frames of each address (several when functions were inlined), innermost first. */
  async symbolize(pcs: Iterable<number>): Promise<Map<number, Frame[]>> {
    const byModule = new Map<ModuleRecord | undefined, number[]>();
    for (const pc of new Set(pcs)) {
      if (this.cache.has(pc)) continue;
      const module = this.moduleOf(pc);
      const list = byModule.get(module) ?? [];
      list.push(pc);
      byModule.set(module, list);
    }
    for (const [module, list] of byModule) {
      let file: string | undefined;
      if (module !== undefined) {
        if (!this.files.has(module)) this.files.set(module, symbolFileFor(module, this.debugDir));
        file = this.files.get(module);
      }
      if (module === undefined || file === undefined) {
        for (const pc of list) {
          this.cache.set(pc, [
            {
              pc,
              function: '??',
              module: module?.path ?? '',
              offset: module ? pc - 1 - module.base : pc,
              inlined: false,
            },
          ]);
        }
        continue;
      }
      const resolved = await this.run(module, file, list);
      for (const [pc, frames] of resolved) this.cache.set(pc, frames);
    }
    const out = new Map<number, Frame[]>();
    for (const pc of pcs) out.set(pc, this.cache.get(pc) ?? []);
    return out;
  }

  private async run(
    module: ModuleRecord,
    file: string,
    pcs: number[],
  ): Promise<Map<number, Frame[]>> {
    // Return addresses point after the call: look up the call instruction itself.
    const offsets = pcs.map((pc) => pc - 1 - module.base);
    const unresolvedFrame = (k: number): Frame => ({
      pc: pcs[k]!,
      function: '??',
      module: module.path,
      offset: offsets[k]!,
      inlined: false,
    });
    const answers = await this.ask(['-f', '-C', '-i', '-a', '-e', file], offsets);
    if (answers === undefined) return new Map(pcs.map((pc, k) => [pc, [unresolvedFrame(k)]]));
    // A name with a newline puts an answer out of step: ask for those addresses' places alone
    // (no -f), which tells how many of the answer's last lines are the place.
    const outOfStep = answers.flatMap((a, k) => (paired(a) ? [] : [k]));
    const places =
      outOfStep.length > 0
        ? await this.ask(
            ['-i', '-a', '-e', file],
            outOfStep.map((k) => offsets[k]!),
          )
        : undefined;
    const result = new Map<number, Frame[]>();
    answers.forEach((answer, k) => {
      const place = places?.[outOfStep.indexOf(k)];
      const frames = framesOfAnswer(answer, place).map((f, j, all): Frame => ({
        pc: pcs[k]!,
        function: f.function === '' ? '??' : f.function,
        ...(f.file !== undefined ? { file: f.file } : {}),
        ...(f.line !== undefined ? { line: f.line } : {}),
        module: module.path,
        offset: offsets[k]!,
        // addr2line -i lists the innermost (inlined) function first
        inlined: j < all.length - 1,
      }));
      result.set(pcs[k]!, frames.length > 0 ? frames : [unresolvedFrame(k)]);
    });
    return result;
  }

  /** addr2line's answer to each offset (splitAnswers), or undefined when it gave none. */
  private ask(
    args: readonly string[],
    offsets: readonly number[],
  ): Promise<string[][] | undefined> {
    const fence = fenceAddress();
    return new Promise((resolve) => {
      const child = spawn(this.addr2line, args, { stdio: ['pipe', 'pipe', 'ignore'] });
      let text = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      child.on('error', () => resolve(undefined));
      // addr2line gone before it read every address (a file it cannot open): the close below.
      child.stdin.on('error', () => {});
      child.on('close', () => resolve(splitAnswers(text, offsets, fence, args.includes('-f'))));
      child.stdin.end(
        offsets.map((o) => `0x${o.toString(16)}\n0x${fence.toString(16)}\n`).join(''),
      );
    });
  }
}

/**
 * The address asked after each real one: its answer ends the real one's. Random per batch
 * (60 bits: no name can know it) and outside any module: the top bits set, and
 * in its low 32 bits too, for a 32-bit ELF file (whose addresses addr2line cuts to 32 bits).
 */
function fenceAddress(): bigint {
  return randomBytes(8).readBigUInt64LE() | 0xc0000000c0000000n;
}

/** addr2line -a's address line (`0x` and 8 or 16 hex digits) names `value`, cut to its width. */
function isAddressLine(line: string | undefined, value: bigint): boolean {
  const m = /^0x([0-9a-f]{1,16})$/.exec(line ?? '');
  if (m === null) return false;
  const mask = (1n << BigInt(4 * m[1]!.length)) - 1n;
  return BigInt(`0x${m[1]}`) === (value & mask);
}

/**
 * addr2line's output cut into one answer per address asked (its lines after the address
 * line), by the fence after each: a function or file name may hold newlines and anything
 * that looks like an address line, so counting lines or looking for `0x` could give one
 * address's frames to another. The fence's own answer is `??:0`, after `??` with -f
 * (`withFunctions`). Undefined when the output is not that shape (then nothing of the batch
 * is believed).
 */
export function splitAnswers(
  text: string,
  offsets: readonly number[],
  fence: bigint,
  withFunctions = true,
): string[][] | undefined {
  const lines = text.split('\n');
  const answers: string[][] = [];
  let i = 0;
  for (const offset of offsets) {
    if (!isAddressLine(lines[i], BigInt(offset))) return undefined;
    const answer: string[] = [];
    for (i++; i < lines.length && !isAddressLine(lines[i], fence); i++) answer.push(lines[i]!);
    i++;
    if (withFunctions && lines[i++] !== '??') return undefined;
    if (!/^\?\?:[0?]$/.test(lines[i++] ?? '')) return undefined;
    answers.push(answer);
  }
  return i === lines.length - 1 && lines[i] === '' ? answers : undefined;
}

/** `file:line` (line `?` when unknown, with a DWARF discriminator at times). */
const WHERE = /^(.*):(\d+|\?)(?: \(discriminator \d+\))?$/s;

interface AnswerFrame {
  readonly function: string;
  readonly file?: string;
  readonly line?: number;
}

function whereOf(text: string): { file?: string; line?: number } {
  const m = WHERE.exec(text);
  const file = m === null ? text : m[1]!;
  const n = m === null ? NaN : Number.parseInt(m[2]!, 10);
  return {
    ...(file !== '??' && file !== '' ? { file } : {}),
    ...(Number.isFinite(n) && n > 0 ? { line: n } : {}),
  };
}

/** An answer of -f: pairs of a function line and a `file:line` line (no name had a newline). */
function paired(answer: readonly string[]): boolean {
  return answer.length % 2 === 0 && answer.every((line, j) => j % 2 === 0 || WHERE.test(line));
}

/**
 * The frames of one address's answer: pairs of function and `file:line` lines (inlined
 * functions first). A newline in a name puts the pairs out of step; then the answer is one
 * frame: when `place` (the answer without -f: the place's lines) ends it, the function is the
 * lines before them and the place those lines, exact for a newline in either; otherwise the
 * function is every line but the last and the place the last line. Newlines are kept (shown
 * as \x0a), and nothing leaves this address's frames.
 */
export function framesOfAnswer(
  answer: readonly string[],
  place?: readonly string[],
): AnswerFrame[] {
  if (answer.length === 0) return [];
  if (paired(answer)) {
    const frames: AnswerFrame[] = [];
    for (let j = 0; j < answer.length; j += 2) {
      frames.push({ function: answer[j]!, ...whereOf(answer[j + 1]!) });
    }
    return frames;
  }
  const n =
    place !== undefined &&
    place.length > 0 &&
    place.length < answer.length &&
    place.every((line, j) => answer[answer.length - place.length + j] === line)
      ? place.length
      : 1;
  return [
    {
      function: answer.slice(0, -n).join('\n'),
      ...whereOf(answer.slice(-n).join('\n')),
    },
  ];
}

/**
 * One line for a frame, for display: `function (file:line) [module+0xoffset]`, through
 * displayText (the names come from the program's binaries: a control character shows as
 * `\xNN`, a leading `::` cannot be a CI command).
 */
export function formatFrame(frame: Frame): string {
  const where =
    frame.file !== undefined ? ` (${frame.file}${frame.line ? `:${frame.line}` : ''})` : '';
  const module = frame.module !== '' ? ` [${frame.module}+0x${frame.offset.toString(16)}]` : '';
  const inlined = frame.inlined ? ' [inlined]' : '';
  return displayText(`${frame.function}${inlined}${where}${module}`);
}
