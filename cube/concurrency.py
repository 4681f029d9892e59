"""Compatibility shim: this module moved to `cube.llm.concurrency` (the LLM layer subpackage).

`import cube.concurrency` yields that very module object (not a copy), so attribute reads, private
names and monkeypatches behave exactly as before the move. New code imports `cube.llm.concurrency`.
"""

import sys

import cube.llm.concurrency as _moved

sys.modules[__name__] = _moved
