/**
 * What a test reads of another process's state through /proc, and a wait for a state the
 * process reaches a moment after the event the test waited for. A thread that has finished its
 * work (a detach's tracer thread, say) still has to be scheduled to leave the kernel's thread
 * list, which on a loaded two-core machine can take milliseconds after the tool that ended it
 * has exited: a test asserts where the state settles, not a snapshot taken in that window.
 * And, for a wait that runs out, what every process of a tree was doing (processStates).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';

/** The names (comm, at most 15 bytes) of pid's threads, in /proc's order. */
export function threadNames(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) =>
    readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(),
  );
}

/** Polling period of settledValue: short against the waits it covers, long against a read. */
const SETTLE_POLL_MS = 5;

/**
 * Reads read() until its value deep-equals expected or timeoutMs has passed, and returns the
 * last value read: the test then asserts on it (`expect(await settledValue(...)).toEqual(...)`),
 * so a state that never settles fails with what it was.
 */
export async function settledValue<T>(read: () => T, expected: T, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (isDeepStrictEqual(value, expected) || Date.now() >= deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, SETTLE_POLL_MS));
  }
}

/**
 * What every process under root (root included) is doing, thread by thread: its command line,
 * then per thread its name, state, wait channel, system call number and the top of its kernel
 * stack, and the user-space stacks of our own programs (gdb, where installed). For the message
 * of a wait that took too long, so that a hang seen once in a loaded CI run says where each
 * process stood. `group`: the processes of process group root instead, which keeps those whose
 * parent has exited (a detached heaphook record's collector and command).
 */
export function processStates(root: number, select: 'tree' | 'group' = 'tree'): string {
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid=,pgid='], { encoding: 'utf8' }).stdout ?? '';
  const children = new Map<number, number[]>();
  const group: number[] = [];
  for (const line of ps.split('\n')) {
    const [pid, ppid, pgid] = line.trim().split(/\s+/).map(Number);
    if (pid === undefined || ppid === undefined || Number.isNaN(pid)) continue;
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
    if (pgid === root) group.push(pid);
  }
  const tree: number[] = [];
  for (const queue = [root]; queue.length > 0;) {
    const pid = queue.shift()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  const chosen = select === 'group' ? group : tree;
  if (chosen.length === 0) return `no process ${select === 'group' ? 'in group ' : ''}${root}\n`;
  const script = chosen
    .map(
      (pid) =>
        `if [ -d /proc/${pid} ]; then ` +
        `echo "process ${pid}: $(tr '\\0' ' ' < /proc/${pid}/cmdline 2>/dev/null)"; ` +
        `for t in /proc/${pid}/task/*; do ` +
        `echo "  thread \${t##*/} $(cat $t/comm 2>/dev/null) $(grep State $t/status 2>/dev/null) ` +
        `wchan=$(cat $t/wchan 2>/dev/null) syscall=$(cut -d' ' -f1 $t/syscall 2>/dev/null) ` +
        `kernel: $(head -n 3 $t/stack 2>/dev/null | sed 's/^\\[<[0-9a-f]*>\\] //' | tr '\\n' ' ')"; done; ` +
        // the user-space stacks of our own programs (not node's): where a hang waits
        `case "$(cat /proc/${pid}/comm)" in node) ;; *) command -v gdb >/dev/null && ` +
        `timeout 20 gdb -p ${pid} -batch -nx -ex 'thread apply all bt 12' 2>/dev/null | grep -E '^(Thread|#)' ;; esac; fi`,
    )
    .join('; ');
  return spawnSync('sh', ['-c', script], { encoding: 'utf8' }).stdout ?? '';
}

/**
 * The promise's value, or a failure with explain()'s text when it takes longer than ms: every
 * wait of these tests is on a condition with such a watchdog, never a bare sleep (the suite runs
 * on loaded 2-core machines), and a watchdog that fires says why (processStates).
 */
export async function withinOrExplain<T>(
  promise: Promise<T>,
  ms: number,
  explain: () => string,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(explain())), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
