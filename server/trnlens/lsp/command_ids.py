"""The language server's command ids, defined once (``workspace/executeCommand`` names).

The handlers, the lenses and code actions that carry these commands, and the extension's
TypeScript all use these strings; tests/lsp/test_command_ids.py checks that the extension names
no command the server does not register. A leaf module (imports nothing), so that any feature
module can name a command without importing the module that handles it.
"""

PROFILE = "trnlens.server.profile"
CANCEL = "trnlens.server.cancel"
SELECT_TARGET = "trnlens.server.selectTarget"
CLEAR_RESULTS = "trnlens.server.clearResults"
COMPARE = "trnlens.server.compare"
MEASURE_FIX = "trnlens.server.measureFix"
OPEN_EXPLORER = "trnlens.server.openExplorer"
REPORT = "trnlens.server.report"
HISTORY = "trnlens.server.history"

ALL = (
    PROFILE, CANCEL, SELECT_TARGET, CLEAR_RESULTS, COMPARE, MEASURE_FIX, OPEN_EXPLORER, REPORT,
    HISTORY,
)  # fmt: skip
