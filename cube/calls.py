"""Compatibility shim: this module moved to `cube.llm.calls` (the LLM layer subpackage).

`import cube.calls` yields that very module object (not a copy), so attribute reads, private
names and monkeypatches behave exactly as before the move. New code imports `cube.llm.calls`.
"""

import sys

import cube.llm.calls as _moved

sys.modules[__name__] = _moved
