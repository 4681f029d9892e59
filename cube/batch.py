"""Compatibility shim: this module moved to `cube.llm.batch` (the LLM layer subpackage).

`import cube.batch` yields that very module object (not a copy), so attribute reads, private
names and monkeypatches behave exactly as before the move. New code imports `cube.llm.batch`.
"""

import sys

import cube.llm.batch as _moved

sys.modules[__name__] = _moved
