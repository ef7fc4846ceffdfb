// Workspace trust: in an untrusted workspace trnlens analyses but never runs the code.
//
// The server drops the repository's own targets when told the workspace is untrusted, but a
// profile on `local` still imports and calls the repository's code. So the extension holds the
// line itself: lenses that would run code are not shown, and the commands that run code are
// refused before they reach the server, whoever asks (a lens, the palette, another extension).

/** Server commands that import and call the user's code. */
export const RUNS_CODE = new Set([
  'trnlens.server.profile',
  'trnlens.server.compare',
  'trnlens.server.measureFix',
]);

export const UNTRUSTED_MESSAGE =
  'trnlens does not run code in an untrusted workspace: trust the workspace to profile it ' +
  '(analysis keeps working).';

export class UntrustedError extends Error {
  constructor() {
    super(UNTRUSTED_MESSAGE);
    this.name = 'UntrustedError';
  }
}

export function runsCode(command: string): boolean {
  return RUNS_CODE.has(command);
}

/** Keeps the lenses that do not run code (all of them in a trusted workspace). */
export function visibleLenses<T extends { command?: { command: string }; data?: unknown }>(
  lenses: T[] | null | undefined,
  trusted: boolean,
): T[] | null | undefined {
  if (trusted || lenses == null) {
    return lenses;
  }
  return lenses.filter((lens) =>
    lens.command === undefined ? !resolvesToProfile(lens.data) : !runsCode(lens.command.command),
  );
}

/** A lens the server sends without its command (it has figures: `codeLens/resolve` makes it a
 * `▶ Profile` lens, the server's `data.kind` "profile"). */
function resolvesToProfile(data: unknown): boolean {
  return (data as { kind?: unknown } | undefined)?.kind === 'profile';
}
