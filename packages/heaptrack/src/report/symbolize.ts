/**
 * Symbolising return addresses with the module map of a log: each address is mapped to its
 * module and module-relative address, then resolved to function, file and line by
 * `addr2line -f -C -i -a` (ELF symbols and DWARF, inlined frames included), one process per
 * module and batch, results cached.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

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

  private run(module: ModuleRecord, file: string, pcs: number[]): Promise<Map<number, Frame[]>> {
    // Return addresses point after the call: look up the call instruction itself.
    const offsets = pcs.map((pc) => pc - 1 - module.base);
    return new Promise((resolve) => {
      const child = spawn(this.addr2line, ['-f', '-C', '-i', '-a', '-e', file], {
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      let text = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      const unresolved = (): Map<number, Frame[]> =>
        new Map(
          pcs.map((pc, i) => [
            pc,
            [{ pc, function: '??', module: module.path, offset: offsets[i]!, inlined: false }],
          ]),
        );
      child.on('error', () => resolve(unresolved()));
      child.on('close', () => {
        const result = new Map<number, Frame[]>();
        const lines = text.split('\n');
        let i = 0;
        for (let k = 0; k < pcs.length; k++) {
          const pc = pcs[k]!;
          while (i < lines.length && !lines[i]!.startsWith('0x')) i++;
          i++; // the address line
          const frames: Frame[] = [];
          while (i + 1 < lines.length && !lines[i]!.startsWith('0x')) {
            const fn = lines[i]!;
            const where = lines[i + 1]!;
            i += 2;
            const colon = where.lastIndexOf(':');
            const file = colon > 0 ? where.slice(0, colon) : where;
            const line = Number.parseInt(where.slice(colon + 1), 10);
            frames.push({
              pc,
              function: fn === '' ? '??' : fn,
              ...(file !== '??' ? { file } : {}),
              ...(Number.isFinite(line) && line > 0 ? { line } : {}),
              module: module.path,
              offset: offsets[k]!,
              inlined: false,
            });
          }
          // addr2line -i lists the innermost (inlined) function first
          result.set(
            pc,
            frames.length > 0
              ? frames.map((f, j) => ({ ...f, inlined: j < frames.length - 1 }))
              : unresolved().get(pc)!,
          );
        }
        resolve(result);
      });
      child.stdin.end(offsets.map((o) => `0x${o.toString(16)}`).join('\n') + '\n');
    });
  }
}

/** One line for a frame: `function (file:line) [module+0xoffset]`. */
export function formatFrame(frame: Frame): string {
  const where =
    frame.file !== undefined ? ` (${frame.file}${frame.line ? `:${frame.line}` : ''})` : '';
  const module = frame.module !== '' ? ` [${frame.module}+0x${frame.offset.toString(16)}]` : '';
  return `${frame.function}${where}${module}`;
}
