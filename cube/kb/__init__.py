"""The knowledge base and the questions asked of it (above llm/, beside judges/).

Public face (`__all__`), imported as modules (`from cube.kb import corpus`): `corpus` (loading a
user's table or the demo, building `corpus.parquet`), `document` (one item rendered as one
document, and parsed back), `mapping` (raw export -> items), `demo` and `example` (SYNTHETIC
generators, not real data), `text` (Chinese segmentation, jieba), `questions` (the question set:
LLM role-play, templates or a file), `refusal_questions` and `refusal_llm` (questions the knowledge
base cannot answer). `naming` and `screen` are helpers of these.
"""

__all__ = [
    "corpus",
    "demo",
    "document",
    "example",
    "mapping",
    "questions",
    "refusal_llm",
    "refusal_questions",
    "text",
]
