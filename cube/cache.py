"""Compatibility shim: this module moved to `cube.llm.cache` (the LLM layer subpackage).

`import cube.cache` yields that very module object (not a copy), so attribute reads, private
names and monkeypatches behave exactly as before the move. New code imports `cube.llm.cache`.
"""

import sys

import cube.llm.cache as _moved

sys.modules[__name__] = _moved
