// Which Python starts the server: the interpreter selected in the Python extension when it is
// installed, else the `trnlens.interpreter` setting, else `python3` (the order of issue 6).
//
// In an untrusted workspace the Python extension's choice is skipped: it is often the
// repository's own `.venv/bin/python`, and starting that would run the repository's code before
// the user trusted it. (VS Code already drops workspace values of `trnlens.interpreter` there,
// since package.json lists it under `restrictedConfigurations`.)
import type { PythonExtension } from '@vscode/python-extension';

export const PYTHON_EXTENSION_ID = 'ms-python.python';
export const DEFAULT_PYTHON = 'python3';

export type InterpreterSource = 'python-extension' | 'setting' | 'default';

export interface Interpreter {
  command: string;
  source: InterpreterSource;
}

/** The part of the Python extension's API used here (stubbed in tests). */
export type PythonEnvironments = Pick<
  PythonExtension['environments'],
  'getActiveEnvironmentPath' | 'resolveEnvironment' | 'onDidChangeActiveEnvironmentPath'
>;

export type PythonResource = Parameters<PythonEnvironments['getActiveEnvironmentPath']>[0];

export interface InterpreterInputs {
  trusted: boolean;
  /** undefined when the Python extension is not installed. */
  environments: PythonEnvironments | undefined;
  /** The setting's value as VS Code resolved it (trust already applied), maybe empty. */
  setting: string | undefined;
  /** The first workspace folder, for `${workspaceFolder}` in the setting. */
  workspaceFolder: string | undefined;
  /** The folder the interpreter is for (the Python extension chooses per folder); one server
   * serves every folder, so the composition root passes the first one. */
  resource: PythonResource;
}

export async function chooseInterpreter(inputs: InterpreterInputs): Promise<Interpreter> {
  if (inputs.trusted && inputs.environments !== undefined) {
    const fromExtension = await activeInterpreter(inputs.environments, inputs.resource);
    if (fromExtension !== undefined) {
      return { command: fromExtension, source: 'python-extension' };
    }
  }
  const setting = expand(inputs.setting?.trim() ?? '', inputs.workspaceFolder);
  if (setting !== '') {
    return { command: setting, source: 'setting' };
  }
  return { command: DEFAULT_PYTHON, source: 'default' };
}

async function activeInterpreter(
  environments: PythonEnvironments,
  resource: PythonResource,
): Promise<string | undefined> {
  const active = environments.getActiveEnvironmentPath(resource);
  if (!active?.path) {
    return undefined;
  }
  // `path` is an executable for most environments but a folder for some (conda); the resolved
  // environment names the executable itself.
  const resolved = await environments.resolveEnvironment(active);
  return resolved?.executable.uri?.fsPath ?? active.path;
}

/** `${workspaceFolder}` and a leading `~` in the setting, as users write them in settings.json. */
export function expand(value: string, workspaceFolder: string | undefined): string {
  let expanded = value;
  if (workspaceFolder !== undefined) {
    expanded = expanded.split('${workspaceFolder}').join(workspaceFolder);
  }
  const home = process.env.HOME ?? process.env.USERPROFILE;
  if (home !== undefined && (expanded === '~' || expanded.startsWith('~/'))) {
    expanded = home + expanded.slice(1);
  }
  return expanded;
}
