/**
 * Sessions: `heaphook record` through a pyenv-style shim (a shell script that forks helpers,
 * then execs `env`, which execs python) writes one log per image and a session manifest that
 * marks python's as the program's own; `report`, `recommend` and `dump` given the folder read
 * that log, or the one `--pid` names, or all of them with `--all`.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  assignRoles,
  reserveSession,
  resolveLogs,
  SESSION_FILE_PATTERN,
  writeSession,
  type Session,
} from '../../src/decode/session.js';
import { heaphookBin, logsIn, python3, scratch, workload } from '../helpers.js';

function heaphook(args: readonly string[], env: NodeJS.ProcessEnv = process.env) {
  return spawnSync(process.execPath, [heaphookBin, ...args], {
    encoding: 'utf8',
    env,
    timeout: 120_000,
    maxBuffer: 256 * 1024 * 1024,
  });
}

/** A folder with a `python3` shim in the manner of pyenv's. */
function shimFolder(): string {
  const bin = join(scratch('session-shim'), 'bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'python3'),
    [
      '#!/usr/bin/env bash',
      '# looks its version up with helper processes, then execs the real interpreter',
      'set -e',
      "version=$(echo 3.11 | tr -d '\\n')",
      '[ -n "$(ls / | head -1)" ]',
      `exec /usr/bin/env ${python3} "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'python3'), 0o755);
  return bin;
}

const PROGRAM = 'import json; print(len(json.dumps([{"k": i} for i in range(5000)])))';

describe('a session recorded through a shim', () => {
  const bin = shimFolder();
  const dir = scratch('session');
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` };
  const rec = heaphook(['record', '-o', dir, '--', 'python3', '-c', PROGRAM], env);
  const manifestFile = readdirSync(dir).find((f) => /^heaphook-session\.\d+\.json$/.test(f));

  it("writes a manifest that marks python's log as the program's own", () => {
    expect(rec.status, rec.stderr).toBe(0);
    expect(rec.stdout).toBe('63890\n');
    expect(manifestFile).toBeDefined();
    const session = JSON.parse(readFileSync(join(dir, manifestFile!), 'utf8')) as Session;
    expect(session.logs.length).toBe(logsIn(dir).length);
    expect(session.logs.length).toBeGreaterThan(4); // the shim, its helpers, env, python
    const program = session.logs.filter((l) => l.role === 'program');
    expect(program).toHaveLength(1);
    expect(program[0]!.file).toBe(session.program);
    expect(program[0]!.argv).toEqual([python3, '-c', PROGRAM]);
    // The shim and env are the same process's earlier images; the helpers are children.
    const chain = session.logs.filter((l) => l.role === 'exec-chain');
    expect(chain.length).toBeGreaterThanOrEqual(2);
    for (const l of chain) expect(l.pid).toBe(program[0]!.pid);
    expect(session.logs.filter((l) => l.role === 'child').map((l) => l.argv[0])).toEqual(
      expect.arrayContaining(['tr', 'ls']),
    );
    // record starts the command itself (its parent), the collector beside it
    expect(session.parentPid).toBe(program[0]!.ppid);
    expect(session.recorderPid).not.toBe(session.parentPid);
    expect(manifestFile).toBe(`heaphook-session.${session.recorderPid}.json`);
    expect(session.status).toBe(0);
  });

  it("ends by naming the program's log, why, and the next command", () => {
    const program = session().program!.replace(/\./g, '\\.');
    expect(rec.stderr).toMatch(
      new RegExp(
        `^heaphook record: \\d+ logs in .*; report .* reads .*${program}: python3 \\(pid \\d+\\) is the program record started`,
        'm',
      ),
    );
    expect(rec.stderr).toMatch(new RegExp(`^next: npx heaphook report ${dir}`, 'm'));
  });

  function session(): Session {
    return JSON.parse(readFileSync(join(dir, manifestFile!), 'utf8')) as Session;
  }

  it('report DIR reports the program, --pid another process, --all every log', () => {
    const r = heaphook(['report', dir, '--json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as { log: string; argv: string[] };
    expect(json.log).toBe(join(dir, session().program!));
    expect(json.argv).toEqual([python3, '-c', PROGRAM]);

    const tr = session().logs.find((l) => l.argv[0] === 'tr')!;
    const byPid = JSON.parse(
      heaphook(['report', dir, '--json', '--pid', String(tr.pid)]).stdout,
    ) as {
      argv: string[];
    };
    expect(byPid.argv[0]).toBe('tr');

    const all = JSON.parse(heaphook(['report', dir, '--json', '--all']).stdout) as Array<{
      log: string;
    }>;
    expect(all.map((a) => a.log).sort()).toEqual(logsIn(dir));
  });

  it("recommend DIR and dump DIR read the program's log too", () => {
    const rec2 = heaphook(['recommend', dir, '--json']);
    expect(rec2.status, rec2.stderr).toBe(0);
    expect(JSON.parse(rec2.stdout)).toMatchObject({ log: join(dir, session().program!) });
    const dump = heaphook(['dump', dir, '--json']);
    expect(dump.status, dump.stderr).toBe(0);
    const records = dump.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { type: string; argv?: string[] });
    expect(records[0]).toMatchObject({ type: 'process', argv: [python3, '-c', PROGRAM] });
    expect(records.filter((r) => r.type === 'event').length).toBeGreaterThan(1000);
    expect(records.at(-1)?.type).toBe('end');
  });

  it('a pid the session does not have, or --pid on one log, is one line naming the fix', () => {
    const none = heaphook(['report', dir, '--pid', '1']);
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/no log of pid 1 in .* \(its pids: [\d, ]+\)/);
    const onFile = heaphook(['report', logsIn(dir)[0]!, '--pid', '1']);
    expect(onFile.status).toBe(2);
    expect(onFile.stderr).toMatch(/give its folder/);
  });
});

describe('choosing logs without a session manifest', () => {
  it('a folder with one log gives it; with several, asks for one or --all', () => {
    const one = scratch('session-none');
    const rec = spawnSync(workload, ['counts'], {
      env: {
        ...process.env,
        LD_PRELOAD: join(workload, '..', 'libheaphook_heaptrack.so'),
        HEAPHOOK_LOG_DIR: one,
      },
      encoding: 'utf8',
    });
    expect(rec.status, rec.stderr).toBe(0);
    const [log] = logsIn(one);
    expect(resolveLogs(one)).toEqual([log]);
    copyFileSync(log!, join(one, 'heaplog.1.log'));
    expect(() => resolveLogs(one)).toThrow(/2 logs and no session manifest.*--all/);
    expect(resolveLogs(one, { all: true })).toHaveLength(2);
  });
});

describe('writing the manifest', () => {
  const run = { command: 'true', args: [], recorderPid: 4242, parentPid: 4241, status: 7 };

  it('into the room reserved before the run: the JSON alone, the reservation gone', async () => {
    const dir = scratch('session-write');
    const reserved = reserveSession(dir)!;
    expect(statSync(reserved).size).toBe(64 * 1024);
    expect(readdirSync(dir).filter((f) => SESSION_FILE_PATTERN.test(f))).toEqual([]);
    await writeSession(dir, run, [], reserved);
    expect(readdirSync(dir)).toEqual(['heaphook-session.4242.json']);
    const text = readFileSync(join(dir, 'heaphook-session.4242.json'), 'utf8');
    expect(JSON.parse(text)).toMatchObject({ status: 7, recorderPid: 4242, parentPid: 4241 });
    expect(text.endsWith('}\n')).toBe(true);
  });

  it('one that cannot be written is said, and leaves no part of a file behind', async () => {
    const dir = scratch('session-write-fails');
    mkdirSync(join(dir, 'heaphook-session.4242.json')); // in the way of the rename
    const reserved = reserveSession(dir)!;
    await expect(writeSession(dir, run, [], reserved)).rejects.toThrow(
      new RegExp(`^cannot write the session manifest ${dir}/heaphook-session\\.4242\\.json: `),
    );
    await expect(writeSession(dir, run, [])).rejects.toThrow(/cannot write the session manifest/);
    expect(readdirSync(dir)).toEqual(['heaphook-session.4242.json']); // the folder in the way
  });
});

describe('roles', () => {
  const base = { exe: '', argv: [], forkChild: false };
  it('the last image of the process record started is the program; its earlier images the chain', () => {
    const roles = assignRoles(
      [
        { ...base, file: 'a', pid: 10, ppid: 9, startTimeMs: 1 },
        { ...base, file: 'b', pid: 11, ppid: 10, startTimeMs: 2 },
        { ...base, file: 'c', pid: 10, ppid: 9, startTimeMs: 3 },
        { ...base, file: 'd', pid: 12, ppid: 9, startTimeMs: 4, forkChild: true },
      ],
      9,
    );
    expect(roles.map((r) => [r.file, r.role])).toEqual([
      ['a', 'exec-chain'],
      ['b', 'child'],
      ['c', 'program'],
      ['d', 'child'],
    ]);
  });

  it('no log of that process: no program', () => {
    const roles = assignRoles([{ ...base, file: 'b', pid: 11, ppid: 10, startTimeMs: 2 }], 9);
    expect(roles.map((r) => r.role)).toEqual(['child']);
  });
});

describe('choosing what record traces', () => {
  const bin = shimFolder();
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` };
  const script =
    "import subprocess; subprocess.run(['ls', '/'], capture_output=True, check=True); print('ok')";

  function sessionOf(dir: string): Session {
    const file = readdirSync(dir).find((f) => /^heaphook-session\.\d+\.json$/.test(f))!;
    return JSON.parse(readFileSync(join(dir, file), 'utf8')) as Session;
  }

  it("--no-follow records the command's exec chain, not the processes it starts", () => {
    const dir = scratch('session-no-follow');
    const r = heaphook(
      ['record', '-q', '-o', dir, '--no-follow', '--', 'python3', '-c', script],
      env,
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('ok\n');
    const s = sessionOf(dir);
    expect(s.logs.map((l) => l.role).sort()).toEqual(
      expect.arrayContaining(['exec-chain', 'program']),
    );
    expect(s.logs.filter((l) => l.role === 'child')).toEqual([]);
    expect(s.logs.find((l) => l.role === 'program')?.argv[0]).toBe(python3);
  });

  it('--only NAME records that program alone, through a shim', () => {
    const dir = scratch('session-only');
    const r = heaphook(
      ['record', '-q', '-o', dir, '--only', 'python3', '--', 'python3', '-c', script],
      env,
    );
    expect(r.status, r.stderr).toBe(0);
    const s = sessionOf(dir);
    expect(s.logs).toHaveLength(1);
    expect(s.logs[0]).toMatchObject({ role: 'program', argv: [python3, '-c', script] });
  });

  it('a bad HEAPHOOK_TRACE_PARENT stops the program before main with one line', () => {
    const r = spawnSync(python3, ['-c', 'print(1)'], {
      env: {
        ...process.env,
        LD_PRELOAD: join(workload, '..', 'libheaphook_heaptrack.so'),
        HEAPHOOK_TRACE_PARENT: 'abc',
      },
      encoding: 'utf8',
    });
    expect(r.status).toBe(78);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^heaphook: HEAPHOOK_TRACE_PARENT="abc" is not an integer .*\n$/);
  });
});
