// Frames of the agent's protocol (native/frames.h), built byte by byte for the tests, and the
// seeded generator their fuzzing replays from.
export function header(type: number, length: number): Buffer {
  const b = Buffer.alloc(length);
  b.writeUInt16LE(type, 0);
  b.writeUInt32LE(length, 4);
  return b;
}

export function hello(comm = 'prog', backend = 'tlsf'): Buffer {
  const b = header(1, 72);
  b.writeUInt32LE(1, 8);
  b.writeBigUInt64LE(524288n, 16);
  b.write(comm, 24, 15, 'latin1');
  b.write(backend, 40, 31, 'latin1');
  return b;
}

export function alloc(address: bigint, size: number, pcs: bigint[]): Buffer {
  const b = header(2, 32 + pcs.length * 8);
  b.writeBigUInt64LE(address, 8);
  b.writeBigUInt64LE(BigInt(size), 16);
  b.writeUInt32LE(pcs.length, 24);
  pcs.forEach((pc, i) => b.writeBigUInt64LE(pc, 32 + i * 8));
  return b;
}

export function symbol(pc: bigint, name: string, module: string): Buffer {
  const text = 32 + name.length + module.length;
  const b = header(4, (text + 7) & ~7);
  b.writeBigUInt64LE(pc, 8);
  b.writeUInt16LE(name.length, 24);
  b.writeUInt16LE(module.length, 26);
  b.write(name + module, 32, 'latin1');
  return b;
}

/** xorshift32: the fuzzing below replays from its seed. */
export function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}
