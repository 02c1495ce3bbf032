// The emulation drives a plug-in the way AIX does: the probe (threads + forks) checks the entry
// points from inside, the exit reports (the emulation's and the bump plug-in's own counters)
// from outside; every refusal is one line and status 78 before main.
import { spawnSync } from 'node:child_process';
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { archives, fields, release, requireBuilt, runEmul, tempDir } from '../helpers/run.js';

const probe = join(release, 'aix_probe');
const userName = join(release, 'aix_user_name');
let scratch = '';

beforeAll(() => {
  requireBuilt();
  scratch = tempDir();
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe.each([
  ['TLSF plug-in', archives.tlsf],
  ['bump plug-in (not ours)', archives.bump],
  ['bump plug-in without __posix_memalign__', archives.bumpNoMemalign],
])('a forking, multi-threaded program with the %s', (_name, archive) => {
  it('runs correctly; init once after threading began, the fork pair around each fork', () => {
    const r = runEmul(probe, ['25'], { archive });
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^aix_probe: ok /);
    expect(r.status).toBe(0);
    const main = r.reports.find((x) => Number(x.threads) === 4)!;
    expect(main.init).toBe(1);
    expect(main.start).toBe(1);
    expect(main.prefork).toBe(25);
    expect(main.postfork_parent).toBe(25);
    expect(main.postfork_child).toBe(0);
    expect(Number(main.before_init)).toBeGreaterThan(0);
    // Children _exit: no report of their own. Only the parent's line.
    expect(r.reports).toHaveLength(1);
  });
});

describe('a backend that allocates in its own init (malloc before the subsystem is ready)', () => {
  it("is served by the plug-in's arena, and the program runs", () => {
    const r = runEmul(probe, ['5'], {
      archive: archives.early,
      env: { HEAPHOOK_LOG_LEVEL: 'debug' },
    });
    expect(r.stdout).toMatch(/^aix_probe: ok /);
    expect(r.status).toBe(0);
    const line = /aix plug-in: backend tlsf-early ready \((\d+) bytes of the plug-in's arena/.exec(
      r.stderr,
    );
    expect(line).not.toBeNull();
    expect(Number(line![1])).toBeGreaterThan(4000);
  });
});

describe('the bump plug-in counts what it was asked', () => {
  it('start once, init once, every entry point used, the fork pair balanced', () => {
    const r = runEmul(probe, ['10'], { archive: archives.bump });
    expect(r.status).toBe(0);
    expect(r.bump).toHaveLength(1);
    const c = fields(r.bump[0]!);
    expect(c.start).toBe(1);
    expect(c.init).toBe(1);
    expect(c.malloc).toBeGreaterThan(1000);
    expect(c.free).toBeGreaterThan(1000);
    expect(c.calloc).toBeGreaterThan(1000);
    expect(c.prefork).toBe(10);
    expect(c.postfork).toBe(10);
    expect(c.before_init).toBeGreaterThan(0);
  });

  it('serves python3 (threads, json, a subprocess) with the same output as glibc', () => {
    const script = join(scratch, 'bump.py');
    writeFileSync(
      script,
      'import threading, json, subprocess\n' +
        'out = []\n' +
        't = threading.Thread(target=lambda: out.append(json.dumps({"k": list(range(1000))})))\n' +
        't.start(); t.join()\n' +
        'print(len(out[0]), subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())\n',
    );
    const glibc = spawnSync('python3', [script], { encoding: 'utf8' });
    const r = runEmul('python3', [script], { archive: archives.bump });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(glibc.stdout);
    expect(r.stdout).toMatch(/^\d+ child\n$/);
    // The python process itself (the one that created a thread) used the plug-in.
    const py = r.reports.find((x) => Number(x.threads) > 0)!;
    expect(py.backend).toBe('aix:libaix_bump');
    expect(py.init).toBe(1);
    expect(Number(py.malloc)).toBeGreaterThan(1000);
    const pyBump = r.bump.map(fields).find((c) => c.init === 1)!;
    expect(pyBump.malloc).toBeGreaterThan(1000);
  });
});

describe('_malloc_user_defined_name in the program', () => {
  it('selects the plug-in when MALLOCTYPE is unset', () => {
    const r = runEmul(userName, [], { archive: null, env: { LIBPATH: release } });
    expect(r.stdout).toBe('user-defined malloc ok\n');
    expect(r.status).toBe(0);
    expect(r.reports[0]!.backend).toBe('aix:libaix_bump');
    expect(fields(r.bump[0]!).malloc).toBeGreaterThan(0);
  });
});

describe('refusals: one line, status 78, before main', () => {
  const cases: [string, () => Record<string, string>, string, RegExp][] = [
    [
      'a path in MALLOCTYPE',
      () => ({ MALLOCTYPE: `user:${join(release, archives.bump)}` }),
      userName,
      /contains a path .*e\.g\. MALLOCTYPE=user:libaix_bump\.a LIBPATH=/,
    ],
    [
      'an empty name',
      () => ({ MALLOCTYPE: 'user:' }),
      userName,
      /names no archive.*e\.g\. MALLOCTYPE=user:libheaphook_aix_tlsf\.a/,
    ],
    [
      'a name that is not an archive',
      () => ({ MALLOCTYPE: 'user:libaix_bump', LIBPATH: release }),
      userName,
      /is not an archive name; expected <name>\.a, e\.g\./,
    ],
    [
      'an archive not on LIBPATH or LD_LIBRARY_PATH',
      () => ({ MALLOCTYPE: 'user:libnothere.a', LIBPATH: scratch }),
      userName,
      /archive libnothere\.a not found on LIBPATH .* e\.g\. LIBPATH=/,
    ],
    [
      'a missing required entry point',
      () => ({ MALLOCTYPE: `user:${archives.incomplete}`, LIBPATH: release }),
      userName,
      /member mem64\.o of .*libaix_incomplete\.a does not export __mallopt__; .*e\.g\. linked with -bE:mem\.exp/,
    ],
    [
      'an archive without mem64.o',
      () => {
        const dir = join(scratch, 'nomember');
        spawnSync('mkdir', ['-p', dir]);
        copyFileSync(join(release, 'aix', 'bump', 'mem64.o'), join(dir, 'mem32.o'));
        spawnSync('ar', ['rcS', 'libonly32.a', 'mem32.o'], { cwd: dir });
        return { MALLOCTYPE: 'user:libonly32.a', LIBPATH: dir };
      },
      userName,
      /has no member mem64\.o \(members: mem32\.o\); a 64-bit process needs mem64\.o, e\.g\./,
    ],
    [
      'a file that is not an ar archive',
      () => {
        writeFileSync(join(scratch, 'libtext.a'), 'not an archive\n');
        return { MALLOCTYPE: 'user:libtext.a', LIBPATH: scratch };
      },
      userName,
      /libtext\.a is not an ar archive; expected one made by ar with member mem64\.o/,
    ],
    [
      'a member that is not a shared module',
      () => {
        const dir = join(scratch, 'notso');
        spawnSync('mkdir', ['-p', dir]);
        writeFileSync(join(dir, 'mem64.o'), 'text, not ELF\n');
        spawnSync('ar', ['rcS', 'libnotso.a', 'mem64.o'], { cwd: dir });
        return { MALLOCTYPE: 'user:libnotso.a', LIBPATH: dir };
      },
      userName,
      /member mem64\.o of .*libnotso\.a cannot be loaded: /,
    ],
    [
      'a path in _malloc_user_defined_name',
      () => ({ LIBPATH: release }),
      join(release, 'aix_user_name_path'),
      /_malloc_user_defined_name contains a path .*e\.g\. char \*_malloc_user_defined_name = "libaix_bump\.a"/,
    ],
  ];
  it.each(cases)('%s', (_name, makeEnv, program, message) => {
    const r = runEmul(program, [], { archive: null, env: makeEnv() });
    expect(r.status).toBe(78);
    expect(r.stdout).toBe(''); // main never ran
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^heaphook aix emulation: /);
    expect(lines[0]).toMatch(message);
  });
});
