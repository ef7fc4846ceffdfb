// Telling the user that the chosen interpreter cannot run the server, with a way out: the exact
// pip command (run in a terminal or copied), or choosing another interpreter.
import { installCommand, type Probe } from './installcheck';
import * as api from './vscodeapi';

export const ACTIONS = {
  install: 'Install in Terminal',
  copy: 'Copy Command',
  choose: 'Choose Interpreter',
  restart: 'Restart Server',
  log: 'Show Log',
} as const;

export interface ProblemDeps {
  pythonExtensionPresent: boolean;
  restart(): Promise<void>;
  log: api.Log;
}

export async function reportServerProblem(
  python: string,
  found: Probe,
  message: string,
  deps: ProblemDeps,
): Promise<void> {
  const actions: string[] =
    found.kind === 'missing'
      ? [ACTIONS.install, ACTIONS.copy, ACTIONS.choose]
      : [ACTIONS.choose, ACTIONS.log];
  const choice = await api.showErrorMessage(message, ...actions);
  switch (choice) {
    case ACTIONS.install: {
      api.runInTerminal('trnlens: install', installCommand(python, found));
      const after = await api.showInformationMessage(
        found.kind === 'missing' && found.managed
          ? 'When pip has finished, choose .venv/bin/python as the interpreter (trnlens restarts).'
          : 'When pip has finished, restart the trnlens server.',
        ACTIONS.restart,
      );
      if (after === ACTIONS.restart) {
        await deps.restart();
      }
      break;
    }
    case ACTIONS.copy:
      await api.writeClipboard(installCommand(python, found));
      break;
    case ACTIONS.choose:
      // The Python extension's picker when it is there (the server follows its choice), else
      // the setting this extension reads instead.
      if (deps.pythonExtensionPresent) {
        await api.executeCommand('python.setInterpreter');
      } else {
        await api.executeCommand('workbench.action.openSettings', 'trnlens.interpreter');
      }
      break;
    case ACTIONS.log:
      deps.log.show();
      break;
  }
}
