// The palette, keybinding and menu commands (plain `trnlens.` IDs). Each one finds what the user
// means (the function at the cursor, a picked one, the active file) and forwards it to a server
// command (`trnlens.server.*`); the server does the work and reports back through lenses,
// hints, diagnostics, progress and messages.
import type { ServerManager } from './client';
import { reportFailure } from './failures';
import { profilableAt, profilables, type Profilable, type WireCodeLens } from './functions';
import { UntrustedError } from './trust';
import type { ExplorerOpened } from './urls';
import * as api from './vscodeapi';

export const COMMANDS = {
  profileFunction: 'trnlens.profileFunction',
  profile: 'trnlens.profile',
  compare: 'trnlens.compare',
  selectTarget: 'trnlens.selectTarget',
  openExplorer: 'trnlens.openExplorer',
  showReport: 'trnlens.showReport',
  clearResults: 'trnlens.clearResults',
  restartServer: 'trnlens.restartServer',
  showLog: 'trnlens.showLog',
} as const;

export const SERVER = {
  profile: 'trnlens.server.profile',
  compare: 'trnlens.server.compare',
  selectTarget: 'trnlens.server.selectTarget',
  openExplorer: 'trnlens.server.openExplorer',
  clearResults: 'trnlens.server.clearResults',
} as const;

export interface CommandDeps {
  server: Pick<ServerManager, 'executeCommand' | 'request' | 'supports' | 'restart'>;
  log: api.Log;
  /** The status bar's target, after the server switched it. */
  setTarget(target: string): void;
  /** Runs the server's openExplorer request and opens what it names (see urls.UrlOpener). */
  openExplorer(request: () => Promise<unknown>): Promise<ExplorerOpened | undefined>;
  /** Builds and shows the run report of {uri?, qualname?} (see report.ReportView). */
  showReport(argument: object): Promise<unknown>;
}

/** What `trnlens.server.profile` answers. */
export interface ProfileStarted {
  token: string;
  state: string;
  position: number;
  target: string;
  alreadyPending: boolean;
}

export function registerCommands(deps: CommandDeps): api.Disposable[] {
  const handlers: Record<string, () => Promise<void>> = {
    [COMMANDS.profileFunction]: () => profileFunction(deps),
    [COMMANDS.profile]: () => profilePicked(deps),
    [COMMANDS.compare]: () => compare(deps),
    [COMMANDS.selectTarget]: () => selectTarget(deps),
    [COMMANDS.openExplorer]: () => openExplorer(deps),
    [COMMANDS.showReport]: () => showReport(deps),
    [COMMANDS.clearResults]: () => clearResults(deps),
    [COMMANDS.restartServer]: () => deps.server.restart(),
    [COMMANDS.showLog]: async () => deps.log.show(),
  };
  return Object.entries(handlers).map(([id, handler]) =>
    api.registerCommand(id, () => reportingErrors(deps, id, handler)),
  );
}

async function reportingErrors(deps: CommandDeps, id: string, handler: () => Promise<void>) {
  try {
    await handler();
  } catch (error) {
    if (error instanceof UntrustedError) {
      deps.log.warn(`${id}: ${error.message}`);
      void api.showWarningMessage(error.message);
    } else {
      // The server's refusals come back as the command's error answer, never also as a message:
      // this is the one notification.
      reportFailure(deps.log, id, error);
    }
  }
}

// -- profile
export async function profileFunction(deps: CommandDeps): Promise<void> {
  const editor = pythonEditor();
  if (editor === undefined) {
    return;
  }
  const candidates = await profilablesIn(deps, editor.uri);
  if (candidates === undefined) {
    return;
  }
  const chosen =
    profilableAt(candidates, editor.lines, editor.line) ??
    (await pick(candidates, 'The cursor is in no profilable function: profile which one?'));
  if (chosen !== undefined) {
    await profile(deps, chosen);
  }
}

export async function profilePicked(deps: CommandDeps): Promise<void> {
  const editor = pythonEditor();
  if (editor === undefined) {
    return;
  }
  const candidates = await profilablesIn(deps, editor.uri);
  const chosen = candidates && (await pick(candidates, 'Profile which function?'));
  if (chosen !== undefined) {
    await profile(deps, chosen);
  }
}

async function profile(deps: CommandDeps, chosen: Profilable): Promise<void> {
  const started = await deps.server.executeCommand<ProfileStarted>(SERVER.profile, chosen.arguments);
  deps.log.info(`profile ${chosen.qualname}: ${started.state} on ${started.target}`);
  if (started.alreadyPending) {
    void api.showInformationMessage(
      `trnlens: ${chosen.qualname} is already ${started.state} on ${started.target}.`,
    );
  }
}

// -- compare and explorer: the function at the cursor, else a picked one
export async function compare(deps: CommandDeps): Promise<void> {
  const chosen = await functionForCommand(deps, 'Compare the variants of which function?');
  if (chosen !== undefined) {
    // Answered when the comparison is over; the server shows its summary and updates the lens.
    await deps.server.executeCommand(SERVER.compare, chosen.arguments);
  }
}

/** {uri, qualname} of the function at the cursor, {uri} elsewhere in a Python file, else {}. */
async function functionOrFileAtCursor(deps: CommandDeps): Promise<object> {
  const editor = api.activeEditor();
  if (editor?.languageId !== 'python') {
    return {};
  }
  const candidates = (await profilablesIn(deps, editor.uri, false)) ?? [];
  const here = profilableAt(candidates, editor.lines, editor.line);
  return here ? { uri: here.arguments.uri, qualname: here.qualname } : { uri: editor.uri };
}

export async function openExplorer(deps: CommandDeps): Promise<void> {
  const argument = await functionOrFileAtCursor(deps);
  const opened = await deps.openExplorer(() =>
    deps.server.executeCommand(SERVER.openExplorer, argument),
  );
  if (opened === undefined) {
    void api.showInformationMessage('trnlens: the server named no Neuron Explorer page to open.');
    return;
  }
  for (const problem of opened.problems) {
    void api.showWarningMessage(problem);
  }
}

/** The report of the function at the cursor (its latest run), else of the project's latest run. */
export async function showReport(deps: CommandDeps): Promise<void> {
  await deps.showReport(await functionOrFileAtCursor(deps));
}

async function functionForCommand(
  deps: CommandDeps,
  placeHolder: string,
): Promise<Profilable | undefined> {
  const editor = pythonEditor();
  if (editor === undefined) {
    return undefined;
  }
  const candidates = await profilablesIn(deps, editor.uri);
  if (candidates === undefined) {
    return undefined;
  }
  return profilableAt(candidates, editor.lines, editor.line) ?? pick(candidates, placeHolder);
}

// -- target, results
export async function selectTarget(deps: CommandDeps): Promise<void> {
  // The server knows every target (settings, pyproject.toml, trust); VS Code asks with a Quick
  // Pick, as the Python extension's interpreter picker does (`ask: false`: the server only lists).
  const listed = await deps.server.executeCommand<{ target: string; targets: string[] }>(
    SERVER.selectTarget,
    { ask: false },
  );
  const chosen = await api.showQuickPick(
    listed.targets.map((name) => ({
      label: name,
      description: name === listed.target ? 'current' : '',
      name,
    })),
    `Profile on which target? (now: ${listed.target})`,
  );
  if (chosen === undefined || chosen.name === listed.target) {
    return;
  }
  const answer = await deps.server.executeCommand<{ target: string; targets: string[] }>(
    SERVER.selectTarget,
    { target: chosen.name },
  );
  deps.setTarget(answer.target);
  deps.log.info(`target: ${answer.target}`);
}

export async function clearResults(deps: CommandDeps): Promise<void> {
  // Always asked: with the focus on no Python editor (a report or a notebook beside the code)
  // it cleared every file's runs, library hints included, without a word.
  const editor = api.activeEditor();
  const scopes = [{ label: 'All files', description: 'every run in the open projects', all: true }];
  if (editor?.languageId === 'python') {
    scopes.unshift({ label: 'This file', description: api.fsPath(editor.uri), all: false });
  }
  const scope = await api.showQuickPick(scopes, 'Clear which trnlens results?');
  if (scope === undefined || editor === undefined && !scope.all) {
    return;
  }
  const argument = scope.all || editor === undefined ? {} : { uri: editor.uri };
  const answer = await deps.server.executeCommand<{ cleared: number }>(
    SERVER.clearResults,
    argument,
  );
  const runs = answer.cleared === 1 ? 'run' : 'runs';
  void api.showInformationMessage(`trnlens: cleared ${answer.cleared} stored ${runs}.`);
}

// -- helpers
function pythonEditor(): api.EditorPosition | undefined {
  const editor = api.activeEditor();
  if (editor?.languageId !== 'python') {
    void api.showInformationMessage('trnlens: open a Python file to profile its functions.');
    return undefined;
  }
  return editor;
}

async function profilablesIn(
  deps: CommandDeps,
  uri: string,
  sayWhenNone = true,
): Promise<Profilable[] | undefined> {
  const listed = await deps.server.request<WireCodeLens[] | null>('textDocument/codeLens', {
    textDocument: { uri },
  });
  // A lens with figures comes without its command until resolved (the server formats titles
  // only for lenses an editor shows): resolve those here, through the server, as an editor would.
  const lenses = await Promise.all(
    (listed ?? []).map((lens) =>
      lens.command === undefined && lens.data !== undefined
        ? deps.server.request<WireCodeLens>('codeLens/resolve', lens)
        : Promise.resolve(lens),
    ),
  );
  const found = profilables(lenses);
  if (found.length === 0) {
    if (sayWhenNone) {
      void api.showInformationMessage(
        'trnlens: nothing to profile here (trnlens profiles functions, methods and nn.Module ' +
          'classes in files that import torch).',
      );
    }
    return undefined;
  }
  return found;
}

async function pick(candidates: Profilable[], placeHolder: string) {
  const chosen = await api.showQuickPick(
    candidates.map((candidate) => ({
      label: candidate.qualname,
      description: `line ${candidate.line + 1}`,
      detail: candidate.pending ? candidate.title.replace(/ · click to cancel$/, '') : candidate.title,
      candidate,
    })),
    placeHolder,
  );
  return chosen?.candidate;
}
