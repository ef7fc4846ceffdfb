// The functions of a file that can be profiled, as the server's own code lenses name them.
//
// The server already decides what is profilable (functions, methods and nn.Module classes in
// files that import torch) and puts each one's `trnlens.server.profile` arguments on its lens;
// reading them back keeps that knowledge in the server.

export const PROFILE = 'trnlens.server.profile';
export const CANCEL = 'trnlens.server.cancel';
/** The run report lens's (and hover link's) command: see report.ts. */
export const REPORT = 'trnlens.server.report';

/** A code lens as it comes over the wire (`textDocument/codeLens`). */
export interface WireCodeLens {
  range: { start: { line: number; character: number } };
  command?: { title: string; command: string; arguments?: unknown[] };
  /** Set on a lens that comes without its command: `codeLens/resolve` fills it in. */
  data?: unknown;
}

export interface ProfileArguments {
  uri: string;
  qualname: string;
  target?: string;
}

export interface Profilable {
  qualname: string;
  /** What the server's lens says now (figures, `stale`, `queued (#2)`). */
  title: string;
  /** The lens's position: the `def`/`class` line and its column, zero-based. */
  line: number;
  column: number;
  /** The arguments for `trnlens.server.profile`, exactly as the lens carries them. */
  arguments: ProfileArguments;
  /** True while the server has a job for it (its lens then cancels). */
  pending: boolean;
}

export function profilables(lenses: readonly WireCodeLens[] | null | undefined): Profilable[] {
  const found: Profilable[] = [];
  for (const lens of lenses ?? []) {
    const command = lens.command;
    if (command === undefined || (command.command !== PROFILE && command.command !== CANCEL)) {
      continue;
    }
    const argument = command.arguments?.[0];
    if (!isProfileArguments(argument)) {
      continue;
    }
    found.push({
      qualname: argument.qualname,
      title: command.title,
      line: lens.range.start.line,
      column: lens.range.start.character,
      arguments: { ...argument },
      pending: command.command === CANCEL,
    });
  }
  return found.sort((a, b) => a.line - b.line);
}

function isProfileArguments(value: unknown): value is ProfileArguments {
  const candidate = value as Partial<ProfileArguments> | undefined;
  return typeof candidate?.uri === 'string' && typeof candidate.qualname === 'string';
}

/**
 * The innermost profilable whose body holds the cursor. A body runs from its `def` line to the
 * line before the next statement indented at or left of the `def` (lines that close a bracket,
 * like the `):` of a wrapped signature, continue it); decorator lines just above the `def` count
 * as part of it. Lines inside a multi-line string that start at column 0 end a body early: then
 * the command falls back to the picker, which is never wrong.
 */
export function profilableAt(
  candidates: readonly Profilable[],
  lines: readonly string[],
  cursorLine: number,
): Profilable | undefined {
  let best: Profilable | undefined;
  for (const candidate of candidates) {
    if (!holds(candidate, lines, cursorLine)) {
      continue;
    }
    if (best === undefined || candidate.line > best.line) {
      best = candidate;
    }
  }
  return best;
}

function holds(candidate: Profilable, lines: readonly string[], cursorLine: number): boolean {
  if (cursorLine < candidate.line) {
    // Decorators: every line from the cursor down to the def is a decorator at the def's column.
    for (let line = cursorLine; line < candidate.line; line++) {
      const text = lines[line] ?? '';
      if (indentOf(text) !== candidate.column || !text.trimStart().startsWith('@')) {
        return false;
      }
    }
    return true;
  }
  for (let line = candidate.line + 1; line <= cursorLine; line++) {
    const text = lines[line] ?? '';
    const stripped = text.trim();
    if (stripped === '' || stripped.startsWith('#') || /^[)\]}]/.test(stripped)) {
      continue;
    }
    if (indentOf(text) <= candidate.column) {
      return false;
    }
  }
  return true;
}

function indentOf(text: string): number {
  return text.length - text.trimStart().length;
}
