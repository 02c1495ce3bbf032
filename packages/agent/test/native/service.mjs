// A small HTTP service for the agent's tests: each GET /work?n=N builds N records, keeps the
// last 64 results (a heap that turns over but stays bounded), round-trips them through a
// Buffer (memory from malloc) and answers with a checksum. Prints {"port": P} once it listens.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';

const kept = [];
const server = createServer((req, res) => {
  const m = /\?n=(\d+)/.exec(req.url ?? '');
  const n = Math.max(1, Math.min(5000, m ? Number(m[1]) : 200));
  const doc = Array.from({ length: n }, (_, i) => ({
    id: i,
    name: 'x'.repeat(i % 97),
    tags: Array.from({ length: i % 7 }, (_, j) => String(j)),
  }));
  const text = Buffer.from(JSON.stringify(doc));
  kept.push(text);
  kept.splice(0, Math.max(0, kept.length - 64));
  const body = JSON.stringify({
    ok: true,
    n,
    sha: createHash('sha256').update(text).digest('hex').slice(0, 16),
  });
  res.writeHead(200, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
