// Time off the CPU, from a recording of the scheduler's switches (`perf record -e sched:sched_switch -g
// --switch-events`): a sched_switch sample is taken as its thread leaves the CPU, with the stack it left from (where
// it blocked, or was preempted); the thread's next SWITCH IN record says when it ran again. The time between is the
// thread's time off the CPU, charged to that stack. The SWITCH OUT record that follows the sample (a few microseconds
// later, once perf's own bookkeeping ran) says whether the thread was preempted (still runnable) or blocked.
//
// Records can be lost (perf's LOST records) or the recording can start or end with a thread off the CPU: a switch
// out with no switch in before the next switch out, and a switch in with no switch out before it, are counted, not
// guessed at; a thread still off the CPU when the recording ends is charged up to its end (`finish`). Pure: the
// caller gives events in time order, as the reader delivers them.

/** One stretch of a thread's time off the CPU, charged to the stack it left from. */
export interface OffCpuInterval<S> {
  pid: number;
  tid: number;
  stack: S;
  /** When it left the CPU, ns (the sample's time). */
  startNs: number;
  /** How long it stayed off, ns. */
  ns: number;
  /** Switched out while still runnable (waiting for a CPU, not for an event). */
  preempted: boolean;
  /** Still off the CPU when the recording ended: charged up to that end. */
  open: boolean;
}

export interface PairingCounts {
  /** Switch-outs whose switch in was never seen before the thread's next switch out (records lost): dropped. */
  unpaired: number;
  /** Switch-ins with no switch-out sample before them (the recording began with the thread off the CPU, or lost). */
  inWithoutOut: number;
  /**
   * Stretches of a thread preempted with no switch-out sample, as the recording samples only the switches of threads
   * that block (its SWITCH OUT record says preempted): not missing, left out.
   */
  preemptedUnsampled: number;
  /**
   * Stretches of a thread blocked with no switch-out sample, in a recording that takes the switches' stacks in
   * windows of time (`countUnsampled`): measured, their stacks not recorded.
   */
  unsampled: number;
  /**
   * Of those, threads still blocked when the recording ended: measured up to its end, as the stretches with a sample
   * are. (A thread that exits switches out for good, not preempted, as one that blocks: its EXIT record, which comes
   * first, rules that switch out.)
   */
  unsampledOpen: number;
}

export interface SwitchPairingOptions {
  /**
   * The recording takes the switch-out samples in windows of time (collect --switch-share): a thread's SWITCH OUT
   * with no sample, not preempted, starts a stretch blocked whose stack was not recorded, measured up to its switch in
   * (unsampledNs) unless shorter than `minUnsampledNs`. Otherwise such a switch in is counted with no partner.
   */
  countUnsampled?: boolean;
  minUnsampledNs?: number;
  /** Stretches with no sample this long or longer are measured apart too (unsampledLongNs). */
  longNs?: number;
}

interface Pending<S> {
  pid: number;
  stack: S;
  time: number;
  preempted: boolean;
}

/**
 * Threads tracked at once at most: a recording can name any number (forged or a fork bomb); past this many, a new
 * switch-out is dropped, counted as unpaired.
 */
const maxThreads = 1 << 20;

export class SwitchPairing<S> {
  private readonly pending = new Map<number, Pending<S>>();
  readonly counts: PairingCounts = {
    unpaired: 0,
    inWithoutOut: 0,
    preemptedUnsampled: 0,
    unsampled: 0,
    unsampledOpen: 0,
  };
  /** Threads preempted with no sample held, and when: their switch in ends a stretch left out. */
  private readonly preemptedOut = new Map<number, number>();
  /** Time threads spent preempted (runnable, waiting for a CPU) with no sample, by tid, ns. */
  readonly runnableNs = new Map<number, number>();
  /** Threads whose last switch out was dropped (see drop). */
  private readonly dropped = new Set<number>();
  /** Threads blocked with no sample held (countUnsampled), and when. */
  private readonly blockedOut = new Map<number, number>();
  /** Threads that exited, until a FORK record gives their id to a new thread. */
  private readonly gone = new Set<number>();
  /** Time threads spent blocked with no sample (countUnsampled), by tid, ns; and their process, by tid. */
  readonly unsampledNs = new Map<number, number>();
  /** The part of unsampledNs in stretches of options.longNs or longer. */
  readonly unsampledLongNs = new Map<number, number>();
  readonly pidOf = new Map<number, number>();

  constructor(private readonly options: SwitchPairingOptions = {}) {}

  /** A sched_switch sample: `tid` leaves the CPU at `time` from `stack`. */
  switchedOut(pid: number, tid: number, time: number, stack: S): void {
    this.preemptedOut.delete(tid);
    this.blockedOut.delete(tid);
    this.dropped.delete(tid);
    if (this.pending.has(tid)) this.counts.unpaired++;
    else if (this.pending.size >= maxThreads) {
      this.counts.unpaired++;
      return;
    }
    this.pending.set(tid, { pid, stack, time, preempted: false });
  }

  /**
   * A switch out of `tid` the caller could not keep (its stack): one held before is counted unpaired, and the
   * thread's next SWITCH records, out and in, end this stretch without a count (the caller counted it).
   */
  drop(tid: number): void {
    if (this.pending.delete(tid)) this.counts.unpaired++;
    this.preemptedOut.delete(tid);
    if (this.dropped.size < maxThreads) this.dropped.add(tid);
  }

  /** A SWITCH record of `tid`: out (saying whether preempted), or in, which ends its time off the CPU. */
  switched(tid: number, out: boolean, preempted: boolean, time: number, pid = -1): OffCpuInterval<S> | undefined {
    if (this.dropped.has(tid)) {
      if (!out) this.dropped.delete(tid);
      return undefined;
    }
    const pending = this.pending.get(tid);
    if (out) {
      if (pending && pending.time <= time) pending.preempted = preempted;
      else if (!pending && preempted && this.preemptedOut.size < maxThreads) this.preemptedOut.set(tid, time);
      else if (
        !pending &&
        !preempted &&
        this.options.countUnsampled &&
        tid > 0 &&
        !this.gone.has(tid) &&
        this.blockedOut.size < maxThreads
      ) {
        this.blockedOut.set(tid, time);
        if (this.pidOf.size < maxThreads || this.pidOf.has(tid)) this.pidOf.set(tid, pid);
      }
      return undefined;
    }
    if (!pending) {
      const blockedSince = this.blockedOut.get(tid);
      if (blockedSince !== undefined) {
        this.blockedOut.delete(tid);
        this.countUnsampled(tid, Math.max(0, time - blockedSince));
        return undefined;
      }
      const since = this.preemptedOut.get(tid);
      if (since === undefined) this.counts.inWithoutOut++;
      else {
        this.preemptedOut.delete(tid);
        this.counts.preemptedUnsampled++;
        if (this.runnableNs.size < maxThreads || this.runnableNs.has(tid))
          this.runnableNs.set(tid, (this.runnableNs.get(tid) ?? 0) + Math.max(0, time - since));
      }
      return undefined;
    }
    this.pending.delete(tid);
    return interval(tid, pending, Math.max(0, time - pending.time), false);
  }

  /** A thread's EXIT record: its last switch out, which follows, blocks nothing. */
  exited(tid: number): void {
    this.blockedOut.delete(tid);
    if (this.gone.size < maxThreads) this.gone.add(tid);
  }

  /** A FORK record: `tid` is a new thread's (perhaps the id of one that exited). */
  forked(tid: number): void {
    this.gone.delete(tid);
  }

  /**
   * The threads still off the CPU at `endNs` (the recording's last event), charged up to it; none stay pending. Those
   * blocked with no sample are measured up to it too (unsampledOpen).
   */
  finish(endNs: number): OffCpuInterval<S>[] {
    const open = [...this.pending].map(([tid, p]) => interval(tid, p, Math.max(0, endNs - p.time), true));
    for (const [tid, since] of this.blockedOut)
      if (this.countUnsampled(tid, Math.max(0, endNs - since))) this.counts.unsampledOpen++;
    this.pending.clear();
    this.preemptedOut.clear();
    this.blockedOut.clear();
    this.gone.clear();
    this.dropped.clear();
    return open;
  }

  /** A stretch blocked with no sample, unless under the minimum: true when counted. */
  private countUnsampled(tid: number, ns: number): boolean {
    if (ns < (this.options.minUnsampledNs ?? 0) || ns < 500) return false;
    this.counts.unsampled++;
    if (this.unsampledNs.size >= maxThreads && !this.unsampledNs.has(tid)) return true;
    this.unsampledNs.set(tid, (this.unsampledNs.get(tid) ?? 0) + ns);
    if (this.options.longNs !== undefined && ns >= this.options.longNs)
      this.unsampledLongNs.set(tid, (this.unsampledLongNs.get(tid) ?? 0) + ns);
    return true;
  }
}

function interval<S>(tid: number, p: Pending<S>, ns: number, open: boolean): OffCpuInterval<S> {
  return { pid: p.pid, tid, stack: p.stack, startNs: p.time, ns, preempted: p.preempted, open };
}
