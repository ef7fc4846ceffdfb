// Before starting the server: does the chosen interpreter exist, is it new enough, and does it
// have trnlens? Asking first turns "Server crashed 5 times" into a message that says what to run.
import { execFile } from 'node:child_process';

export const MIN_PYTHON: readonly [number, number] = [3, 10];
export const PACKAGE = 'trnlens';

export type Probe =
  | { kind: 'ok'; version: string }
  | { kind: 'missing'; version: string; managed?: boolean }
  | { kind: 'old-python'; version: string }
  | { kind: 'no-python'; detail: string };

/** Runs `python -c code` and returns stdout, or throws with what went wrong. */
export type RunPython = (python: string, code: string) => Promise<string>;

// find_spec locates the package without importing it, so the probe stays fast and has no side
// effects; a broken install still shows up when the server starts, in the log.
// The third figure: the interpreter is "externally managed" (PEP 668, e.g. Debian's
// /usr/bin/python3), where `pip install` is refused and a virtual environment is the way.
const PROBE_CODE =
  'import sys, os, sysconfig, importlib.util as u; ' +
  `m = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) and sys.prefix == sys.base_prefix; ` +
  `print("%d.%d %d %d" % (sys.version_info[0], sys.version_info[1], u.find_spec("${PACKAGE}") is not None, m))`;

export async function probe(python: string, run: RunPython = runPython): Promise<Probe> {
  let output: string;
  try {
    output = await run(python, PROBE_CODE);
  } catch (error) {
    return { kind: 'no-python', detail: error instanceof Error ? error.message : String(error) };
  }
  const match = /^(\d+)\.(\d+) ([01])(?: ([01]))?\s*$/.exec(output.trim());
  if (match === null) {
    return { kind: 'no-python', detail: `unexpected answer from ${python}: ${output.trim()}` };
  }
  const [major, minor] = [Number(match[1]), Number(match[2])];
  const version = `${major}.${minor}`;
  if (major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
    return { kind: 'old-python', version };
  }
  if (match[3] === '1') {
    return { kind: 'ok', version };
  }
  return match[4] === '1' ? { kind: 'missing', version, managed: true } : { kind: 'missing', version };
}

/** The exact command that installs trnlens into this interpreter, quoted for a POSIX shell
 * or PowerShell (paths with spaces are common on Windows). */
export function pipCommand(python: string, platform: NodeJS.Platform = process.platform): string {
  return `${quote(python, platform)} -m pip install ${PACKAGE}`;
}

/** For an externally managed Python (pip refuses): a virtual environment in the workspace with
 * trnlens in it, which trnlens.interpreter or the Python extension then selects. */
export function venvCommand(python: string, platform: NodeJS.Platform = process.platform): string {
  const venvPython = platform === 'win32' ? '.venv\\Scripts\\python.exe' : '.venv/bin/python';
  return `${quote(python, platform)} -m venv .venv && ${venvPython} -m pip install ${PACKAGE}`;
}

/** The command that gets trnlens for this interpreter: pip, or a venv where pip is refused. */
export function installCommand(python: string, found: Probe, platform: NodeJS.Platform = process.platform): string {
  return found.kind === 'missing' && found.managed ? venvCommand(python, platform) : pipCommand(python, platform);
}

function quote(path: string, platform: NodeJS.Platform): string {
  if (/^[\w@%+=:,./\\-]+$/.test(path)) {
    return path;
  }
  if (platform === 'win32') {
    return `& "${path}"`;
  }
  return `'${path.replace(/'/g, `'"'"'`)}'`;
}

/** What to tell the user, or undefined when the server can start. */
export function problem(python: string, found: Probe): string | undefined {
  switch (found.kind) {
    case 'ok':
      return undefined;
    case 'missing':
      if (found.managed) {
        return `trnlens is not installed in ${python} (Python ${found.version}), a system Python that pip does not install into. Make a virtual environment with it: ${venvCommand(python)}, then choose .venv/bin/python (trnlens.interpreter or the Python extension).`;
      }
      return `trnlens is not installed in ${python} (Python ${found.version}). Install it with: ${pipCommand(python)}`;
    case 'old-python':
      return `trnlens needs Python ${MIN_PYTHON.join('.')} or newer; ${python} is Python ${found.version}. Choose another interpreter (trnlens.interpreter or the Python extension).`;
    case 'no-python':
      return `trnlens cannot run ${python}: ${found.detail}. Set trnlens.interpreter to a Python ${MIN_PYTHON.join('.')}+ that has trnlens.`;
  }
}

function runPython(python: string, code: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(python, ['-c', code], { timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) {
        const detail = stderr.trim().split('\n').pop() || error.message;
        reject(new Error(detail));
      } else {
        resolve(stdout);
      }
    });
  });
}
