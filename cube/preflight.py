"""Compatibility shim: this module moved to `cube.llm.preflight` (the LLM layer subpackage).

`import cube.preflight` yields that very module object (not a copy), so attribute reads, private
names and monkeypatches behave exactly as before the move. New code imports `cube.llm.preflight`.
"""

import sys

import cube.llm.preflight as _moved

sys.modules[__name__] = _moved
