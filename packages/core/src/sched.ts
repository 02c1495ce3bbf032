/**
 * Linux's scheduling policies by number (sched.h), as rtcheck's report and the heap report's
 * real-time violations name a thread's policy.
 */
const SCHED_POLICIES: Readonly<Record<number, string>> = {
  0: 'SCHED_OTHER',
  1: 'SCHED_FIFO',
  2: 'SCHED_RR',
  3: 'SCHED_BATCH',
  5: 'SCHED_IDLE',
  6: 'SCHED_DEADLINE',
};

/** The name of a policy number (`SCHED_FIFO`), or `policy N` for one Linux does not define. */
export function schedPolicyName(policy: number): string {
  return SCHED_POLICIES[policy] ?? `policy ${policy}`;
}
