// heaphook-inject (native/inject) through its TypeScript API: a library loaded into a running
// target with ptrace and a function of it called there, on an idle, a busy and an 8-thread
// target, each of which must go on working and exit normally afterwards; and every refusal,
// with its exit code, the target left untouched.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { findProcesses, injectCall, InjectRefusal, injectorPath } from '../../src/inject.js';
import { AARCH64_PYTHON, settledValue, unmet } from '../../src/testing.js';
import { built } from '../helpers/native.js';

const TARGET = built('heaphook_inject_target');
const PROBE = built('libheaphook_inject_probe.so');

interface Target {
  readonly child: ChildProcessWithoutNullStreams;
  readonly pid: number;
  output(): string;
  /** Resolves when stdout holds `text`. */
  waitFor(text: string): Promise<void>;
  /** The exit status once it ends. */
  readonly ended: Promise<number | null>;
}

const running: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  for (const child of running.splice(0)) child.kill('SIGKILL');
});

async function startTarget(command: string, args: string[]): Promise<Target> {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  running.push(child);
  let out = '';
  const waiters: Array<() => void> = [];
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    for (const wake of waiters.splice(0)) wake();
  });
  const ended = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const waitFor = async (text: string): Promise<void> => {
    while (!out.includes(text)) {
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  await waitFor('ready');
  return { child, pid: child.pid ?? 0, output: () => out, waitFor, ended };
}

/** The target's remaining work after the injections: one round of allocations, then exit 0. */
async function stillWorks(target: Target): Promise<void> {
  target.child.kill('SIGUSR1');
  await target.waitFor('done 1000');
  target.child.kill('SIGTERM');
  expect(await target.ended).toBe(0);
  expect(target.output()).toContain('bye');
}

/**
 * Waits until process pid has run in user space after its "ready" line: until then the thread
 * may still be at the exit of that write (a syscall outside the allocator, where the injector
 * rightly takes it, as it did under load); afterwards a spinning target makes no syscall.
 */
async function spinningInUserSpace(pid: number): Promise<void> {
  const userTicks = (): number => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[11]); // utime, field 14
  };
  const first = userTicks();
  while (userTicks() < first + 2) await new Promise((resolve) => setTimeout(resolve, 5));
}

/**
 * Waits until process pid has exec'ed program (its path is mapped): a spawned child is node's
 * fork until then, and under load that can take longer than any fixed sleep.
 */
async function mapped(pid: number, program: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  const maps = (): string => {
    try {
      return readFileSync(`/proc/${pid}/maps`, 'utf8');
    } catch {
      return '';
    }
  };
  while (!maps().includes(program)) {
    if (Date.now() > deadline) throw new Error(`process ${pid} never mapped ${program}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function refusal(promise: Promise<number>): Promise<InjectRefusal> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InjectRefusal);
  return error as InjectRefusal;
}

/** inject_probe_call(argument) in process pid: strlen(argument) (-1 for none) + 1000 * calls. */
function probe(pid: number, argument?: string): Promise<number> {
  return injectCall({ pid, library: PROBE, symbol: 'inject_probe_call', argument });
}

/** The syscall number /proc shows thread tid of pid in ('' when running or gone). */
function syscallOf(pid: number, tid = pid): string {
  try {
    return readFileSync(`/proc/${pid}/task/${tid}/syscall`, 'utf8').split(' ')[0]!;
  } catch {
    return '';
  }
}

/**
 * heaphook-inject run directly, killed by SIGKILL at a moment: with `dieAt`, the moment it names
 * (HEAPHOOK_INJECT_DIE_AT: picking, seized, started, report); with `afterMs`, that long after it
 * started. Resolves once it is gone.
 */
function killedInjector(
  pid: number,
  symbol: string,
  argument: string,
  moment: { dieAt: string } | { afterMs: number },
): Promise<NodeJS.Signals | number | null> {
  const env =
    'dieAt' in moment ? { ...process.env, HEAPHOOK_INJECT_DIE_AT: moment.dieAt } : process.env;
  const child = spawn(injectorPath(), [String(pid), PROBE, symbol, argument], {
    stdio: 'ignore',
    env,
  });
  if ('afterMs' in moment) setTimeout(() => child.kill('SIGKILL'), moment.afterMs);
  return new Promise((resolve) => child.on('close', (code, signal) => resolve(signal ?? code)));
}

function loaded(pid: number): boolean {
  const maps = spawnSync('cat', [`/proc/${pid}/maps`], { encoding: 'utf8' }).stdout;
  return maps.includes('libheaphook_inject_probe.so');
}

/** Makes the probe in pid send SIGUSR2 (12) to its own process from inside the injected call. */
function raiseSigusr2In(pid: number): Promise<number> {
  return injectCall({ pid, library: PROBE, symbol: 'inject_probe_raise', argument: '12' });
}

describe('injectCall', () => {
  it('calls a function in an idle target, reuses the loaded copy, and the target goes on', async () => {
    const target = await startTarget(TARGET, ['wait']);
    // inject_probe_call returns strlen(argument) (-1 for NULL) + 1000 * calls so far.
    expect(await probe(target.pid, 'hello')).toBe(1005);
    expect(await probe(target.pid)).toBe(1999);
    expect(await probe(target.pid, '')).toBe(3000);
    expect(loaded(target.pid)).toBe(true);
    await stillWorks(target);
  });

  it("never takes a thread waiting for room in the tracer's ring (it is inside malloc)", async () => {
    const target = await startTarget(TARGET, ['ringwait']);
    // Until it is in the futex wait, the thread may still be at the exit of its "ready" write,
    // a syscall outside the allocator where taking it is right.
    while (!readFileSync(`/proc/${target.pid}/syscall`, 'utf8').startsWith('202 '))
      await new Promise((resolve) => setTimeout(resolve, 5));
    const error = await refusal(probe(target.pid));
    expect(error.reason).toBe('busy');
    expect(loaded(target.pid)).toBe(false);
    expect(target.child.exitCode).toBeNull(); // still waiting, untouched
  });

  it('traces a busy target to a syscall outside the allocator', async () => {
    const target = await startTarget(TARGET, ['busy']);
    for (let round = 1; round <= 3; round++) {
      expect(await probe(target.pid, 'ab')).toBe(1000 * round + 2);
    }
    target.child.kill('SIGTERM');
    expect(await target.ended).toBe(0);
  });

  it('injects while 8 threads allocate', async () => {
    const target = await startTarget(TARGET, ['threads', '8']);
    for (let round = 1; round <= 5; round++) {
      expect(await probe(target.pid, 'abc')).toBe(1000 * round + 3);
    }
    await stillWorks(target);
  });

  it('reports a library that does not load, a missing function and a call that faults', async () => {
    const target = await startTarget(TARGET, ['wait']);
    const missing = await refusal(
      injectCall({ pid: target.pid, library: '/nonexistent/libx.so', symbol: 'f' }),
    );
    expect(missing.reason).toBe('dlopen-failed');
    expect(missing.exitCode).toBe(19);
    expect(missing.message).toContain('cannot open shared object file');
    const noSymbol = await refusal(
      injectCall({ pid: target.pid, library: PROBE, symbol: 'no_such_function' }),
    );
    expect(noSymbol.reason).toBe('no-symbol');
    expect(noSymbol.exitCode).toBe(20);
    const crashed = await refusal(
      injectCall({ pid: target.pid, library: PROBE, symbol: 'inject_probe_crash' }),
    );
    expect(crashed.reason).toBe('call-crashed');
    expect(crashed.exitCode).toBe(21);
    // The fault was the injected call's: the target's registers were restored and it goes on.
    await stillWorks(target);
  });
});

describe('the thread given back, and the target surviving a killed injector', () => {
  it('gives the thread back exactly: every register, the vector state, errno; the read goes on', async () => {
    // It reads stdin by a raw syscall with known values in the registers and errno = 4321; a
    // SIGUSR2 handler with SA_RESTART counts signals.
    const target = await startTarget(TARGET, ['registers']);
    expect(await settledValue(() => syscallOf(target.pid), '0')).toBe('0'); // in read(0, ...)
    expect(await probe(target.pid, 'abc')).toBe(1003);
    target.child.stdin.write('x');
    await target.waitFor('read x handled');
    expect(target.output()).toContain('read x handled 0: registers kept');
    // A signal that comes during the call (the probe sends SIGUSR2 to its own process) is
    // handled once the thread is back; the read, interrupted, restarts (SA_RESTART).
    expect(await settledValue(() => syscallOf(target.pid), '0')).toBe('0');
    expect(await raiseSigusr2In(target.pid)).toBe(2000);
    target.child.stdin.write('y');
    await target.waitFor('read y handled');
    expect(target.output()).toContain('read y handled 1: registers kept');
    target.child.stdin.end();
    expect(await target.ended).toBe(0);
  });

  it('a handler run for a signal that came during the call ends pause() with EINTR, as the kernel does', async () => {
    const target = await startTarget(TARGET, ['pause']);
    expect(await settledValue(() => syscallOf(target.pid), '34')).toBe('34'); // pause
    expect(await raiseSigusr2In(target.pid)).toBe(1000);
    await target.waitFor('pause EINTR 1');
  });

  it('the target survives the injector killed at any moment, and the call completes without it', async () => {
    const target = await startTarget(TARGET, ['threads', '8']);
    // The main thread, in sigwaitinfo (rt_sigtimedwait, 128), is the one taken; back in it, it
    // has given itself back.
    const backInSigwait = async (what: string): Promise<void> => {
      expect(await settledValue(() => syscallOf(target.pid), '128'), `after ${what}`).toBe('128');
    };
    await backInSigwait('start');
    let calls = 0;
    // Before the thread's registers change: nothing happens in the target. After: the
    // trampoline makes the call and returns on its own.
    for (const [dieAt, called] of [
      ['picking', false],
      ['seized', false],
      ['started', true],
      ['report', true],
    ] as const) {
      expect(await killedInjector(target.pid, 'inject_probe_call', 'x', { dieAt })).toBe('SIGKILL');
      if (called) calls++;
      await backInSigwait(dieAt);
      expect(loaded(target.pid)).toBe(calls > 0);
    }
    expect(await probe(target.pid, 'ab')).toBe(1000 * ++calls + 2);
    // Killed from outside while the call (50 ms long) runs, or before it: a spread of moments.
    for (const afterMs of [0, 1, 2, 4, 8, 15, 30, 45, 60]) {
      const end = await killedInjector(target.pid, 'inject_probe_slow', '50', { afterMs });
      expect([0, 'SIGKILL']).toContain(end);
      await backInSigwait(`a kill ${afterMs} ms after the start`);
    }
    await stillWorks(target);
  });

  it('a busy target survives the injector killed while it follows its threads or runs the call', async () => {
    const target = await startTarget(TARGET, ['busy']);
    for (const dieAt of ['picking', 'started', 'report'])
      expect(await killedInjector(target.pid, 'inject_probe_call', 'x', { dieAt })).toBe('SIGKILL');
    // The call made once each after the start (2): the next one is the third.
    expect(await probe(target.pid, 'ab')).toBe(3002);
    target.child.kill('SIGTERM');
    expect(await target.ended).toBe(0);
  });
});

describe('injectCall refusals (the target left untouched)', () => {
  const work = mkdtempSync(join(tmpdir(), 'heaphook-inject-'));
  const source = join(work, 'pause.c');
  writeFileSync(source, '#include <unistd.h>\nint main(void) { for (;;) pause(); }\n');

  function compile(name: string, flags: string[]): string | undefined {
    const output = join(work, name);
    const result = spawnSync('gcc', [...flags, '-o', output, source], { encoding: 'utf8' });
    return result.status === 0 ? output : undefined;
  }

  it('no such process', async () => {
    // pid_max itself is never a process id.
    const pid = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
    const error = await refusal(injectCall({ pid, library: PROBE, symbol: 'f' }));
    expect(error.reason).toBe('no-such-process');
    expect(error.exitCode).toBe(10);
  });

  it('a statically linked target', async (ctx) => {
    const why = unmet('gcc-static');
    if (why !== undefined) ctx.skip(why);
    const program = compile('pause-static', ['-static']);
    const target = spawn(program ?? '', [], { stdio: 'ignore' });
    running.push(target as ChildProcessWithoutNullStreams);
    await mapped(target.pid ?? 0, program ?? '');
    const error = await refusal(probe(target.pid ?? 0));
    expect(error.reason).toBe('static');
    expect(error.exitCode).toBe(13);
    expect(error.message).toContain('statically linked');
    expect(target.exitCode).toBeNull();
  });

  // A freestanding i386 program (pause() through int 0x80): gcc -m32 needs no 32-bit C
  // library for it (gcc-multilib would conflict with the arm64 cross compilers on Debian).
  const pauseI386 = (): string => {
    const source = join(work, 'pause32.c');
    writeFileSync(
      source,
      'void _start(void) {\n  for (;;) __asm__ volatile("int $0x80" : : "a"(29) : "memory");\n}\n',
    );
    const program = join(work, 'pause-i386');
    const built32 = spawnSync(
      'gcc',
      ['-m32', '-nostdlib', '-static', '-ffreestanding', '-fno-pic', '-o', program, source],
      { encoding: 'utf8' },
    );
    expect(built32.stderr).toBe('');
    return program;
  };

  it('a target of another architecture: an i386 program the kernel runs itself', async (ctx) => {
    // Kernels without IA32 emulation (some microVMs) cannot run it at all; the next test
    // proves the same refusal with the i386 code run by qemu-i386, which any kernel runs.
    const why = unmet('i386-execution');
    if (why !== undefined) ctx.skip(why);
    const program = pauseI386();
    const target = spawn(program, [], { stdio: 'ignore' });
    running.push(target as ChildProcessWithoutNullStreams);
    await mapped(target.pid ?? 0, program);
    const error = await refusal(probe(target.pid ?? 0));
    expect(error.reason).toBe('architecture');
    expect(error.exitCode).toBe(15);
    expect(error.message).toContain('i386');
    expect(error.message).toContain('32-bit ELF');
    expect(target.exitCode).toBeNull();
  });

  it('a target of another architecture: i386 and aarch64 code under qemu-user', async (ctx) => {
    // Under qemu-user /proc/PID/exe is qemu (an x86-64 program): the guest's mapped code says.
    const why = unmet('qemu-i386', 'qemu-aarch64', 'arm64-libc', 'arm64-python');
    if (why !== undefined) ctx.skip(why);
    const program = pauseI386();
    const i386 = spawn('qemu-i386', [program], { stdio: 'ignore' });
    running.push(i386 as ChildProcessWithoutNullStreams);
    await mapped(i386.pid ?? 0, program);
    const error = await refusal(probe(i386.pid ?? 0));
    expect(error.reason).toBe('architecture');
    expect(error.exitCode).toBe(15);
    expect(error.message).toContain('runs i386 code');
    expect(i386.exitCode).toBeNull();

    const guest = await startTarget('qemu-aarch64', [
      AARCH64_PYTHON,
      '-c',
      'import time; print("ready", flush=True); time.sleep(60)',
    ]);
    const emulated = await refusal(probe(guest.pid));
    expect(emulated.reason).toBe('architecture');
    expect(emulated.message).toContain('aarch64');
  });

  it('a target already traced (under strace)', async (ctx) => {
    const why = unmet('strace');
    if (why !== undefined) ctx.skip(why);
    const traced = await startTarget('strace', ['-o', '/dev/null', TARGET, 'wait']);
    const pid = Number(/ready (\d+)/.exec(traced.output())?.[1]);
    const error = await refusal(probe(pid));
    expect(error.reason).toBe('already-traced');
    expect(error.exitCode).toBe(14);
    expect(error.message).toContain('strace');
    // Killing strace (afterEach) would leave the traced target running.
    process.kill(pid, 'SIGKILL');
  });

  const AS_NOBODY = ['--reuid=nobody', '--regid=nogroup', '--clear-groups'];

  it("another user's process without CAP_SYS_PTRACE (the injector as nobody)", async (ctx) => {
    // root: to run the injector as nobody against a root-owned target
    const why = unmet('root', 'setpriv');
    if (why !== undefined) ctx.skip(why);
    const target = await startTarget(TARGET, ['wait']);
    const result = spawnSync(
      'setpriv',
      [...AS_NOBODY, injectorPath(), String(target.pid), PROBE, 'inject_probe_call'],
      { encoding: 'utf8' },
    );
    expect(result.status).toBe(11);
    expect(result.stderr).toMatch(/belongs to root .* without CAP_SYS_PTRACE/);
    expect(loaded(target.pid)).toBe(false);
    await stillWorks(target);
  });

  // This machine has no Yama (no /proc/sys/kernel/yama): HEAPHOOK_INJECT_YAMA_FILE stands in for
  // its ptrace_scope file. Scopes 2 and 3 are decided before any ptrace call; scope 1 only
  // explains an EPERM from PTRACE_SEIZE, which a kernel without Yama never gives here.
  it('kernel.yama.ptrace_scope 3, and 2 without CAP_SYS_PTRACE', async (ctx) => {
    // root: to run the injector and a target as nobody
    const why = unmet('root', 'setpriv');
    if (why !== undefined) ctx.skip(why);
    const scopeFile = (scope: number): string => {
      const file = join(work, `ptrace_scope_${scope}`);
      writeFileSync(file, `${scope}\n`);
      chmodSync(file, 0o644);
      return file;
    };
    const target = await startTarget('setpriv', [...AS_NOBODY, TARGET, 'wait']);
    const pid = Number(/ready (\d+)/.exec(target.output())?.[1]);
    const asRoot = spawnSync(injectorPath(), [String(pid), PROBE, 'inject_probe_call'], {
      encoding: 'utf8',
      env: { ...process.env, HEAPHOOK_INJECT_YAMA_FILE: scopeFile(3) },
    });
    expect(asRoot.status).toBe(12);
    expect(asRoot.stderr).toContain('kernel.yama.ptrace_scope = 3');
    chmodSync(work, 0o755);
    /** The injector run as nobody, with Yama's scope read from a file saying `scope`. */
    const injectAsNobody = (scope: number, ...argument: string[]) =>
      spawnSync(
        'setpriv',
        [...AS_NOBODY, injectorPath(), String(pid), PROBE, 'inject_probe_call', ...argument],
        { encoding: 'utf8', env: { ...process.env, HEAPHOOK_INJECT_YAMA_FILE: scopeFile(scope) } },
      );
    const asNobody = injectAsNobody(2);
    expect(asNobody.status).toBe(12);
    expect(asNobody.stderr).toContain('kernel.yama.ptrace_scope = 2');
    // Scope 0: nobody may trace its own process.
    const allowed = injectAsNobody(0, 'x');
    expect(allowed.stderr).toBe('');
    expect(allowed.stdout).toBe('1001\n');
    await stillWorks(target);
  });

  it('a process that exits during the attach', async () => {
    // It spins in malloc/free without a syscall for 600 ms, then exits: the injector is still
    // waiting for a thread outside the allocator.
    const target = await startTarget(TARGET, ['spin', '600']);
    await spinningInUserSpace(target.pid);
    const error = await refusal(probe(target.pid));
    expect(error.reason).toBe('exited');
    expect(error.exitCode).toBe(16);
    expect(await target.ended).toBe(0);
  });
});

describe('findProcesses', () => {
  it('finds processes by executable or argv[0] basename, never heaphook itself', async () => {
    const first = await startTarget(TARGET, ['wait']);
    const second = await startTarget(TARGET, ['wait']);
    const found = findProcesses('heaphook_inject_target');
    expect(found).toEqual(expect.arrayContaining([first.pid, second.pid]));
    expect(found).not.toContain(process.pid);
    expect(findProcesses(TARGET)).toEqual(expect.arrayContaining([first.pid, second.pid]));
    expect(findProcesses('no-such-program-name')).toEqual([]);
    await stillWorks(first);
    await stillWorks(second);
  });
});
