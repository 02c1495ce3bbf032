// `heaphook record -p` keeps the collector's manifests in a scratch folder of the temporary
// folder, named heaphook-attach-*, with an owner file ("<pid> <start time>"). A run killed
// before it could remove its folder leaves it behind; the next run removes it.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { removeStaleScratch } from '../../src/record/running.js';

/** This process's "<pid> <start time>", as the owner file holds it. */
function ownIdentity(): string {
  const stat = readFileSync(`/proc/${process.pid}/stat`, 'utf8');
  return `${process.pid} ${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}`;
}

function folder(root: string, name: string, owner?: string): string {
  const path = join(root, name);
  mkdirSync(path);
  writeFileSync(join(path, 'logs.1.tsv'), '');
  if (owner !== undefined) writeFileSync(join(path, 'owner'), `${owner}\n`);
  return path;
}

describe('the scratch folders of killed record -p runs', () => {
  it('are removed when their owner is gone; a live owner, a reused pid and other folders are told apart', () => {
    const root = mkdtempSync(join(tmpdir(), 'scratch-root-'));
    const own = ownIdentity();
    const live = folder(root, 'heaphook-attach-live', own);
    // the same pid, another start time: a later process given the pid of a dead run
    const reused = folder(root, 'heaphook-attach-reused', `${process.pid} 1`);
    const dead = folder(root, 'heaphook-attach-dead', '2147483647 5');
    const making = folder(root, 'heaphook-attach-making'); // no owner file yet
    const other = folder(root, 'unrelated-folder', '2147483647 5');
    expect(removeStaleScratch(root).sort()).toEqual([dead, reused].sort());
    expect([live, making, other].every((p) => existsSync(p))).toBe(true);
    expect([dead, reused].some((p) => existsSync(p))).toBe(false);
  });
});
