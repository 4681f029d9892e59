"""Compatibility shim: this module moved to `cube.llm.batch_cli` (the LLM layer subpackage).

`import cube.batch_cli` yields that very module object (not a copy), so attribute reads, private
names and monkeypatches behave exactly as before the move. New code imports `cube.llm.batch_cli`.
"""

import sys

import cube.llm.batch_cli as _moved

sys.modules[__name__] = _moved
