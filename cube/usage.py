"""Compatibility shim: this module moved to `cube.llm.usage` (the LLM layer subpackage).

`import cube.usage` yields that very module object (not a copy), so attribute reads, private
names and monkeypatches behave exactly as before the move. New code imports `cube.llm.usage`.
"""

import sys

import cube.llm.usage as _moved

sys.modules[__name__] = _moved
