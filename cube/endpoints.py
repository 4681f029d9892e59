"""Compatibility shim: this module moved to `cube.llm.endpoints` (the LLM layer subpackage).

`import cube.endpoints` yields that very module object (not a copy), so attribute reads, private
names and monkeypatches behave exactly as before the move. New code imports `cube.llm.endpoints`.
"""

import sys

import cube.llm.endpoints as _moved

sys.modules[__name__] = _moved
