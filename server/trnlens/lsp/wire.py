"""The server's cattrs converter: pygls's, plus lenses that are already in their JSON form.

Code lenses are rebuilt only when their document changes (see ``lenses.LensCache``) and kept as
plain JSON-shaped dicts, so an unchanged lens is not built and unstructured again on every
``textDocument/codeLens``: on a 2,000-line file that was most of the request's time. pygls
unstructures a response through the hook registered for its declared element type, so the hook
for ``CodeLens`` passes such dicts through and unstructures real ``CodeLens`` objects as before.
"""

from __future__ import annotations

from typing import Any

from cattrs import Converter
from lsprotocol import types
from pygls.protocol import default_converter


def converter() -> Converter:
    made = default_converter()
    lens = made.get_unstructure_hook(types.CodeLens)

    def unstructure_lens(value: Any) -> Any:
        return value if isinstance(value, dict) else lens(value)

    made.register_unstructure_hook(types.CodeLens, unstructure_lens)
    return made
