// node-json: a real program, run as-is: Node.js building a document, then serialising it to JSON
// and parsing it back, a few rounds, each round working on the copy the previous one parsed; the
// text also goes through a Buffer (UTF-8 encode/decode, memory from malloc).
//
// Usage: node json_roundtrip.mjs [--size N] [--seed S]    (N: records in the document)
//
// Verifies every round trip and prints one JSON line
// {"workload":"node-json","ok":true,"ops":...,"bytes":...,"checksum":"<sha256 prefix>","elapsed_ns":...}
// or exits 2 with "verification failed: ..." on stderr.
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';

const ROUNDS = 4;
const WORDS = [
  'alpha',
  'bravo',
  'charlie',
  'delta',
  'echo',
  'foxtrot',
  'golf',
  'hotel',
  'india',
  'juliett',
];

function rng(seed) {
  // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function main(argv) {
  let size = 20000;
  let seed = 42;
  for (let i = 0; i < argv.length; i++) {
    const [key, inline] = argv[i].split('=', 2);
    const val = inline ?? argv[++i];
    if (key === '--size') size = Number(val);
    else if (key === '--seed') seed = Number(val);
    else if (key === '--threads') continue;
    else {
      process.stderr.write(
        `usage: json_roundtrip.mjs [--size N] [--seed S]  (bad argument: ${argv[i]})\n`,
      );
      return 64;
    }
  }
  const t0 = process.hrtime.bigint();
  const r = rng(seed);
  const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
  const records = [];
  for (let i = 0; i < size; i++) {
    records.push({
      id: i,
      name: Array.from(
        { length: int(5, 40) },
        () => 'abcdefghijklmnopqrstuvwxyz '[int(0, 26)],
      ).join(''),
      tags: Array.from({ length: int(0, 8) }, () => WORDS[int(0, WORDS.length - 1)]),
      score: r() * 1000,
      active: r() < 0.5,
      pose: { x: r() * 100 - 50, y: r() * 100 - 50, theta: r() * 6.28 - 3.14 },
      samples: Array.from({ length: int(0, 24) }, () => int(-100000, 100000)),
      note: r() < 0.7 ? null : 'x'.repeat(int(100, 4000)),
    });
  }
  let doc = { version: 1, records };
  let total = 0;
  let text = '';
  for (let round = 0; round < ROUNDS; round++) {
    const buf = Buffer.from(JSON.stringify(doc), 'utf8');
    text = buf.toString('utf8');
    const back = JSON.parse(text);
    if (!isDeepStrictEqual(back, doc)) {
      process.stderr.write(`verification failed: node-json: round ${round} changed the document\n`);
      return 2;
    }
    total += buf.length;
    doc = back;
  }
  if (doc.records.length !== size || doc.records[size - 1].id !== size - 1) {
    process.stderr.write('verification failed: node-json: records lost\n');
    return 2;
  }
  const checksum = createHash('sha256').update(text).digest('hex').slice(0, 16);
  const elapsed = Number(process.hrtime.bigint() - t0);
  process.stdout.write(
    JSON.stringify({
      workload: 'node-json',
      ok: true,
      ops: size * ROUNDS,
      bytes: total,
      checksum,
      elapsed_ns: elapsed,
    }) + '\n',
  );
  return 0;
}

process.exitCode = main(process.argv.slice(2));
