// Composition root: builds the pieces, wires their events, and owns nothing else.
import type { PythonExtension } from '@vscode/python-extension';
import { ServerManager, describe } from './client';
import { registerCommands } from './commands';
import {
  SECTION,
  affectsServer,
  contributedSettings,
  needsRestart,
  serverSection,
} from './configuration';
import { probe } from './installcheck';
import { createLanguageClient } from './languageclient';
import { middleware } from './middleware';
import { reportFailure } from './failures';
import { reportServerProblem } from './problems';
import { chooseInterpreter, PYTHON_EXTENSION_ID, type PythonEnvironments } from './python';
import { ReportView, SERVER_REPORT, type ReportAnswer } from './report';
import { RUN_SHOWN, RunTracker } from './runstate';
import { StatusBar } from './statusbar';
import { UNTRUSTED_MESSAGE } from './trust';
import { UrlOpener } from './urls';
import * as api from './vscodeapi';

interface ExtensionContextLike {
  subscriptions: api.Disposable[];
  extension: { packageJSON: unknown };
}

let manager: ServerManager | undefined;

export async function activate(context: ExtensionContextLike): Promise<void> {
  const log = api.createLogChannel('trnlens');
  context.subscriptions.push(log);
  const settings = contributedSettings(context.extension.packageJSON);
  const environments = await pythonEnvironments(log);

  const runs = new RunTracker();
  const statusbar = new StatusBar(api.createStatusItem('trnlens.status', 'trnlens', 100), {
    target: api.getSetting<string>(SECTION, 'target') || 'local',
    server: 'starting',
    trusted: api.isWorkspaceTrusted(),
    alsoPending: 0,
  });
  context.subscriptions.push(statusbar);
  runs.onDidChange(() => statusbar.update(runs.current()));
  // The Output channel tells every run's outcome, whatever started it (lens, palette, another
  // client of the same server): what a user looks for after a toast went away.
  runs.onDidEnd((run) => {
    const line = `${run.qualname}: ${run.state}${run.message ? ` (${run.message})` : ''}`;
    if (run.state === 'failed') {
      log.warn(line);
    } else {
      log.info(line);
    }
  });

  const opener = new UrlOpener({
    asExternalUri: api.asExternalUri,
    openExternal: api.openExternal,
  });

  // The report panel asks the server for the page; `server` exists by the time anyone clicks.
  const reports = new ReportView({
    execute: (argument) => server.executeCommand<ReportAnswer>(SERVER_REPORT, argument),
    log,
  });

  const server: ServerManager = new ServerManager({
    interpreter: () =>
      chooseInterpreter({
        trusted: api.isWorkspaceTrusted(),
        environments,
        setting: api.getSetting<string>(SECTION, 'interpreter'),
        workspaceFolder: api.workspaceFolderPaths()[0],
        resource: api.firstWorkspaceFolder(),
      }),
    probe: (python) => probe(python),
    createClient: (spec) =>
      createLanguageClient(spec, {
        log,
        cwd: api.workspaceFolderPaths()[0],
        trusted: api.isWorkspaceTrusted,
        // an Undo brought back a run that measured the text: the status bar follows it
        notifications: { [RUN_SHOWN]: (params) => runs.shown(params) },
        middleware: middleware({
          isTrusted: api.isWorkspaceTrusted,
          section: (scopeUri) =>
            serverSection(
              settings,
              (key, scope) => api.inspectSetting(SECTION, key, scope),
              api.isWorkspaceTrusted(),
              scopeUri,
            ),
          runs,
          openExternal: (url) => opener.showDocument(url),
          refuseUntrusted: () => void api.showWarningMessage(UNTRUSTED_MESSAGE),
          showReport: (argument) => reports.show(argument),
          reportFailure: (command, error) => reportFailure(log, command, error),
        }),
      }),
    isTrusted: api.isWorkspaceTrusted,
    logLevel: () => api.getSetting<string>(SECTION, 'serverLogLevel') || 'WARNING',
    log,
    onState: (state, problem) => statusbar.update({ server: state, serverProblem: problem }),
    reportProblem: (python, found, message) =>
      void reportServerProblem(python, found, message, {
        pythonExtensionPresent: environments !== undefined,
        restart: () => server.restart(),
        log,
      }),
    onServerGone: () => runs.reset(),
  });
  manager = server;

  context.subscriptions.push(
    ...registerCommands({
      server,
      log,
      setTarget: (target) => statusbar.update({ target }),
      openExplorer: (request) => opener.explorer(request),
      showReport: (argument) => reports.show(argument),
    }),
    api.onDidChangeConfiguration((affects) => {
      if (needsRestart(affects)) {
        server.scheduleRestart('settings changed');
      } else if (affectsServer(settings, affects)) {
        if (affects(`${SECTION}.target`)) {
          statusbar.update({ target: api.getSetting<string>(SECTION, 'target') || 'local' });
        }
        void server.configurationChanged();
      }
    }),
    api.onDidGrantWorkspaceTrust(() => {
      statusbar.update({ trusted: true });
      // The server learns trust at initialisation, and the interpreter may now come from the
      // Python extension: a new server.
      server.scheduleRestart('workspace trusted');
    }),
    { dispose: () => void server.stop() },
  );
  if (environments !== undefined) {
    context.subscriptions.push(
      environments.onDidChangeActiveEnvironmentPath(() =>
        server.scheduleRestart('Python interpreter changed'),
      ),
    );
  }
  // Activation returns at once; the server starts in the background and says how it went.
  void server.start();
}

export async function deactivate(): Promise<void> {
  await manager?.stop();
  manager = undefined;
}

async function pythonEnvironments(log: api.Log): Promise<PythonEnvironments | undefined> {
  try {
    const python = await api.extensionExports<PythonExtension>(PYTHON_EXTENSION_ID);
    return python?.environments;
  } catch (error) {
    log.warn(`the Python extension's API is unavailable: ${describe(error)}`);
    return undefined;
  }
}
