/** Just enough ELF reading to find a file's GNU build id (NT_GNU_BUILD_ID in a PT_NOTE). */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

function readAt(fd: number, offset: number, length: number): Buffer {
  const buf = Buffer.alloc(length);
  const n = readSync(fd, buf, 0, length, offset);
  return buf.subarray(0, n);
}

/** The build id of an ELF file as hex, '' when it has none, undefined when unreadable. */
export function readBuildId(path: string): string | undefined {
  let fd: number;
  try {
    // The path comes from a log, which may name anything: a FIFO must not block the open.
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const eh = readAt(fd, 0, 64);
    if (eh.length < 64 || eh.readUInt32BE(0) !== 0x7f454c46) return undefined;
    if (eh[4] !== 2 || eh[5] !== 1) return undefined; // 64-bit little endian only
    const phoff = Number(eh.readBigUInt64LE(32));
    const phentsize = eh.readUInt16LE(54);
    const phnum = eh.readUInt16LE(56);
    if (phentsize < 56 || phentsize > 64) return undefined; // Elf64_Phdr is 56 bytes
    const ph = readAt(fd, phoff, phentsize * phnum);
    for (let i = 0; i < phnum; i++) {
      const at = i * phentsize;
      if (ph.readUInt32LE(at) !== 4) continue; // PT_NOTE
      const offset = Number(ph.readBigUInt64LE(at + 8));
      const size = Number(ph.readBigUInt64LE(at + 32));
      const align = Number(ph.readBigUInt64LE(at + 48)) >= 8 ? 8 : 4;
      const notes = readAt(fd, offset, Math.min(size, 1 << 16));
      let p = 0;
      while (p + 12 <= notes.length) {
        const namesz = notes.readUInt32LE(p);
        const descsz = notes.readUInt32LE(p + 4);
        const type = notes.readUInt32LE(p + 8);
        const name = p + 12;
        const desc = name + Math.ceil(namesz / align) * align;
        if (type === 3 && namesz === 4 && notes.toString('latin1', name, name + 3) === 'GNU') {
          return notes.subarray(desc, desc + descsz).toString('hex');
        }
        p = desc + Math.ceil(descsz / align) * align;
      }
    }
    return '';
  } finally {
    closeSync(fd);
  }
}
