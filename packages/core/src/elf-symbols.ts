/**
 * What names a report can give the frames of an ELF file: whether it carries DWARF line
 * information (.debug_info), a full symbol table (.symtab) or only its exported symbols
 * (.dynsym), and whether a separate debug file for it is installed (found by build id under
 * /usr/lib/debug/.build-id, as addr2line and gdb look for it). 64-bit little-endian ELF only
 * (the platforms heaphook runs on); anything else reads as undefined.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';

export interface ElfSymbols {
  readonly debugInfo: boolean;
  readonly symtab: boolean;
  /** The build id, hex, when the file has a .note.gnu.build-id section. */
  readonly buildId?: string;
  /** The separate debug file installed for that build id, if any. */
  readonly debugFile?: string;
}

const ELF_MAGIC = Buffer.from([0x7f, 0x45, 0x4c, 0x46]);
const ELFCLASS64 = 2;
const ELFDATA2LSB = 1;
const SECTION_HEADER_SIZE = 64;
const NT_GNU_BUILD_ID = 3;
/** Where Debian, Fedora and others install debug files by build id. */
export const DEBUG_ROOT = '/usr/lib/debug/.build-id';

function readAt(fd: number, offset: number, length: number): Buffer {
  const buffer = Buffer.alloc(length);
  const n = readSync(fd, buffer, 0, length, offset);
  return buffer.subarray(0, n);
}

function buildIdOf(note: Buffer): string | undefined {
  let at = 0;
  while (at + 12 <= note.length) {
    const nameSize = note.readUInt32LE(at);
    const descSize = note.readUInt32LE(at + 4);
    const type = note.readUInt32LE(at + 8);
    const nameAt = at + 12;
    const descAt = nameAt + ((nameSize + 3) & ~3);
    if (descAt + descSize > note.length) return undefined;
    if (type === NT_GNU_BUILD_ID && note.toString('latin1', nameAt, nameAt + 3) === 'GNU')
      return note.subarray(descAt, descAt + descSize).toString('hex');
    at = descAt + ((descSize + 3) & ~3);
  }
  return undefined;
}

/** The symbol sources of the ELF file at `path`, or undefined when it is not a 64-bit LE ELF. */
export function readElfSymbols(path: string, debugRoot = DEBUG_ROOT): ElfSymbols | undefined {
  const fd = openSync(path, 'r');
  try {
    const header = readAt(fd, 0, 64);
    if (header.length < 64 || !header.subarray(0, 4).equals(ELF_MAGIC)) return undefined;
    if (header[4] !== ELFCLASS64 || header[5] !== ELFDATA2LSB) return undefined;
    const sectionsAt = Number(header.readBigUInt64LE(0x28));
    const count = header.readUInt16LE(0x3c);
    const namesIndex = header.readUInt16LE(0x3e);
    const fileSize = fstatSync(fd).size;
    if (sectionsAt + count * SECTION_HEADER_SIZE > fileSize || namesIndex >= count)
      return undefined;
    const table = readAt(fd, sectionsAt, count * SECTION_HEADER_SIZE);
    const field = (i: number, at: number): number =>
      Number(table.readBigUInt64LE(i * SECTION_HEADER_SIZE + at));
    const names = readAt(fd, field(namesIndex, 0x18), Math.min(field(namesIndex, 0x20), 1 << 20));
    let debugInfo = false;
    let symtab = false;
    let buildId: string | undefined;
    for (let i = 0; i < count; i++) {
      const nameAt = table.readUInt32LE(i * SECTION_HEADER_SIZE);
      const end = names.indexOf(0, nameAt);
      const name = names.toString('latin1', nameAt, end < 0 ? names.length : end);
      if (name === '.debug_info') debugInfo = true;
      else if (name === '.symtab') symtab = true;
      else if (name === '.note.gnu.build-id')
        buildId = buildIdOf(readAt(fd, field(i, 0x18), Math.min(field(i, 0x20), 4096)));
    }
    const candidate =
      buildId !== undefined && buildId.length > 2
        ? join(debugRoot, buildId.slice(0, 2), `${buildId.slice(2)}.debug`)
        : undefined;
    return {
      debugInfo,
      symtab,
      ...(buildId !== undefined ? { buildId } : {}),
      ...(candidate !== undefined && existsSync(candidate) ? { debugFile: candidate } : {}),
    };
  } finally {
    closeSync(fd);
  }
}

/** One phrase: what a report can show for frames in that file. */
export function describeSymbols(symbols: ElfSymbols): string {
  if (symbols.debugInfo) return 'debug info in the file: functions, files and lines';
  if (symbols.debugFile !== undefined)
    return `debug file ${symbols.debugFile}: functions, files and lines`;
  if (symbols.symtab) return 'symbol table, no debug info: function names without file:line';
  return 'stripped, no debug file installed: exported functions only';
}
