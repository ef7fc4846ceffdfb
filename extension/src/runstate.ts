// The state of profile runs, read from the server's work-done progress.
//
// Every progress value of a trnlens run carries its state for machines under `trnlens`
// (server/trnlens/lsp/progress.py, docs/lsp.md): begin `{state: 'queued' | 'starting', kind:
// 'profile' | 'compare', qualname}`, reports `{state: <agent phase>, variant, variants, step,
// steps}`, end `{state: 'ended', outcome: 'succeeded' | 'raised' | 'failed' | 'cancelled'}`.
// The state is read from there, never from the English `message` (kept for the tooltip); a
// value without it is not a trnlens run (or comes from a server older than this extension).

export const PHASES = [
  'starting',
  'importing',
  'building-inputs',
  'compiling',
  'warm-up',
  'measuring',
  'timing',
  'exporting',
] as const;

export type RunPhase = 'queued' | (typeof PHASES)[number];
export type RunOutcome = 'done' | 'failed' | 'cancelled';
/** How the server says a run ended (agent/protocol.py OUTCOMES). */
export const OUTCOMES = ['succeeded', 'raised', 'failed', 'cancelled'] as const;
export type ServerOutcome = (typeof OUTCOMES)[number];

/** The `trnlens` property of a run's progress value. */
export interface RunStateValue {
  state: string;
  kind?: 'profile' | 'compare';
  qualname?: string;
  variant?: number;
  variants?: number;
  step?: number | null;
  steps?: number | null;
  outcome?: ServerOutcome;
}

export interface RunState {
  token: string;
  qualname: string;
  /** A phase while the run goes, an outcome once it ended. */
  state: RunPhase | RunOutcome;
  /** How it ended, as the server said: a `raised` run is `failed` in `state`. */
  outcome?: ServerOutcome;
  /** The variant measuring (0-based) of how many, and the pass's step of steps where known. */
  variant: number;
  variants: number;
  step?: number;
  steps?: number;
  /** The server's last message, for the tooltip. */
  message: string;
  ended: boolean;
}

export type ProgressValue =
  | { kind: 'begin'; title: string; message?: string; trnlens?: RunStateValue }
  | { kind: 'report'; message?: string; trnlens?: RunStateValue }
  | { kind: 'end'; message?: string; trnlens?: RunStateValue };

/** The server's notification that a document shows another run of a function again (an Undo
 * restored the text an earlier run measured): `{uri, qualname, runId, failed}`. */
export const RUN_SHOWN = 'trnlens/runShown';

export class RunTracker {
  private readonly runs = new Map<string, RunState>();
  private lastEnded: RunState | undefined;
  private readonly listeners: Array<() => void> = [];
  private readonly ends: Array<(run: RunState) => void> = [];

  onDidChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Called once per run that ended (done, failed or cancelled), before onDidChange. */
  onDidEnd(listener: (run: RunState) => void): void {
    this.ends.push(listener);
  }

  /** Feeds one `$/progress` value. Progress that is not a profile run is ignored. */
  handle(token: string | number, value: ProgressValue): void {
    const key = String(token);
    const state = value.trnlens;
    if (value.kind === 'begin') {
      if (state === undefined || typeof state.qualname !== 'string') {
        return;
      }
      this.runs.set(key, {
        token: key,
        qualname: state.qualname,
        state: state.state === 'queued' ? 'queued' : 'starting',
        variant: 0,
        variants: 1,
        message: value.message ?? '',
        ended: false,
      });
    } else {
      const run = this.runs.get(key);
      if (run === undefined) {
        return;
      }
      run.message = value.message || run.message;
      if (value.kind === 'report') {
        if (state !== undefined && isPhase(state.state)) {
          run.state = state.state;
          run.variant = state.variant ?? run.variant;
          run.variants = state.variants ?? run.variants;
          run.step = state.step ?? undefined;
          run.steps = state.steps ?? undefined;
        }
      } else {
        run.outcome = isOutcome(state?.outcome) ? state.outcome : undefined;
        run.state = outcomeState(run.outcome);
        run.ended = true;
        this.runs.delete(key);
        this.lastEnded = run;
        this.ends.forEach((listener) => listener(run));
      }
    }
    this.listeners.forEach((listener) => listener());
  }

  /** What the status bar shows: the run that is measuring (else a queued one), else the last
   * run that ended; with the number of other runs still pending. */
  current(): { run: RunState | undefined; alsoPending: number } {
    const pending = [...this.runs.values()];
    const running = pending.filter((run) => run.state !== 'queued');
    const shown = running[running.length - 1] ?? pending[pending.length - 1] ?? this.lastEnded;
    const alsoPending = shown !== undefined && !shown.ended ? pending.length - 1 : pending.length;
    return { run: shown, alsoPending };
  }

  /** The editor shows another run of a function again (`trnlens/runShown`): when the status
   * bar's last ended run is that function's failure and the run shown now did not fail, it no
   * longer says "failed" (the figures on screen are a good run's). */
  shown(params: unknown): void {
    const { qualname, failed } = (params ?? {}) as { qualname?: unknown; failed?: unknown };
    const last = this.lastEnded;
    if (last === undefined || last.qualname !== qualname || last.state !== 'failed' || failed !== false) {
      return;
    }
    this.lastEnded = { ...last, state: 'done', outcome: 'succeeded', message: 'an earlier run, shown again after the edit' };
    this.listeners.forEach((listener) => listener());
  }

  /** Forgets pending runs: their server is gone (restart or crash). */
  reset(): void {
    this.runs.clear();
    this.listeners.forEach((listener) => listener());
  }
}

function isPhase(state: string): state is (typeof PHASES)[number] {
  return (PHASES as readonly string[]).includes(state);
}

function isOutcome(outcome: unknown): outcome is ServerOutcome {
  return typeof outcome === 'string' && (OUTCOMES as readonly string[]).includes(outcome);
}

/** An ended run's state: an end without a known outcome counts as failed, not as done. */
function outcomeState(outcome: ServerOutcome | undefined): RunOutcome {
  if (outcome === 'succeeded') {
    return 'done';
  }
  return outcome === 'cancelled' ? 'cancelled' : 'failed';
}
