"""The run record: `results.json` as one typed, versioned model (`RunRecord`), the only channel
through which a stage hands its figures to the stages, pages and commands after it.

A stage returns its sub-record (a `Part` of `cube.run.record_parts`, re-exported here:
`CorpusRecord`, `QuestionsRecord`, ... one class per writer, in the order the stages run) and the
run stores it (`Run.write_record`, `write_part`); a reader gets attributes
(`Run.read_record().scores.judge_pilot`), never a key by string. The field order is the file
format: `results.json` holds `version` first, then each sub-record's fields, flat, in the order of
`RunRecord`'s parts and of each part's fields (the file's keys are the fields' names: the readers
of the JSON, the tests and the docs read the same keys as before the record was typed). A part's
fields that a run did not write are absent from the file (a stage that did not run wrote nothing),
so a reader sees None (or the empty default).

Field descriptions are the documentation: docs/reference/results.md is generated from them
(`results_reference`, written by `cube docs-reference`).

Versions: `RECORD_VERSION` is the layout written. A file without `version` (written before the
record was typed) is read as version 0: the same keys, and the sequential driver's old `replayed`
flag (its outcome taken by stage 03) is mapped to `ScoresRecord.driver_taken`. Any other version
is refused with a `RecordError` naming the file and its version. A key no part owns (a user's
notebook's own figure, a later cube's) is named in a warning and kept as it is: written back
after the parts, read by no stage, so a run folder is never made unwritable by one key.

The payloads that are tables of a diagnostic (`categories`, `simulation`, ...) are typed `Json`:
JSON as their producers build it (documented here by their description, their columns by the
producers' docstrings); the figures a reader branches on are typed.
"""

from __future__ import annotations

import json
import os
import secrets
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from cube.config.jsonfile import folder_lock
from cube.config.runpaths import RunPaths
from cube.run.record_parts import (
    AnswerScreen,
    AnswersRecord,
    AuditSample,
    ComparisonsRecord,
    CorpusRecord,
    DecisionRecord,
    DiagnosticsRecord,
    DriverRecord,
    DriverTaken,
    FailureReason,
    HumanRecord,
    PaperRecord,
    Part,
    Payload,
    PlanRecord,
    QuestionScreen,
    QuestionsRecord,
    RefusalRecord,
    ScoresRecord,
    SequentialRecord,
    SimulationRecord,
    SystemFailures,
)

__all__ = [
    "READABLE_VERSIONS",
    "RECORD_VERSION",
    "AnswerScreen",
    "AnswersRecord",
    "AuditSample",
    "ComparisonsRecord",
    "CorpusRecord",
    "DecisionRecord",
    "DiagnosticsRecord",
    "DriverRecord",
    "DriverTaken",
    "FailureReason",
    "HumanRecord",
    "PaperRecord",
    "Part",
    "Payload",
    "PlanRecord",
    "QuestionScreen",
    "QuestionsRecord",
    "RecordError",
    "RefusalRecord",
    "RunRecord",
    "ScoresRecord",
    "SequentialRecord",
    "SimulationRecord",
    "SystemFailures",
    "forget",
    "key_owners",
    "keys_of",
    "part_name",
    "read_record",
    "results_reference",
    "write_part",
    "write_results_reference",
]

RECORD_VERSION = 1
READABLE_VERSIONS = (0, RECORD_VERSION)  # 0: a results.json written before it had a version


class RecordError(ValueError):
    """A results.json that cannot be read as a `RunRecord` (its version, or its keys)."""


class RunRecord(BaseModel):
    """`results.json` (see the module docstring): the parts in the order they are written."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(RECORD_VERSION, description="The layout of this file.")
    plan: PlanRecord = PlanRecord()
    paper: PaperRecord = PaperRecord()
    corpus: CorpusRecord = CorpusRecord()
    questions: QuestionsRecord = QuestionsRecord()
    sequential: DriverRecord = DriverRecord()
    answers: AnswersRecord = AnswersRecord()
    refusal: RefusalRecord = RefusalRecord()
    scores: ScoresRecord = ScoresRecord()
    decision: DecisionRecord = DecisionRecord()
    human: HumanRecord = HumanRecord()
    comparisons: ComparisonsRecord = ComparisonsRecord()
    diagnostics: DiagnosticsRecord = DiagnosticsRecord()
    simulation: SimulationRecord = SimulationRecord()
    # keys no part owns (a user's notebook's own figure, a later cube's): written back unread
    _unknown: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def parts(cls) -> dict[str, type[Part]]:
        """Part name -> its class, in the file's order."""
        return {name: f.annotation for name, f in cls.model_fields.items() if name != "version"}  # type: ignore[misc]

    @classmethod
    def from_json(cls, raw: Any, source: str = "results.json") -> RunRecord:
        """The record of a results.json's content; a `RecordError` names `source`, its version
        and every unknown or malformed key at once."""
        version = _readable_version(raw, source)
        flat = {k: v for k, v in raw.items() if k != "version"}
        if version == 0:
            flat = _from_version_0(flat)
        where = f"{source} (version {version})"
        owner = key_owners()
        unknown = _unknown_keys(flat, owner, where)
        grouped: dict[str, dict[str, Any]] = {}
        for key, value in flat.items():
            if key in owner:
                grouped.setdefault(owner[key], {})[key] = value
        parts, problems = {}, []
        for name, values in grouped.items():
            try:
                parts[name] = cls.parts()[name](**values)
            except ValidationError as e:  # every part's problems, each naming its key
                problems += [f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()]
        if problems:
            raise RecordError(f"{where}: " + "; ".join(problems))
        record = cls(**parts)
        record._unknown = unknown
        return record

    def as_json(self) -> dict[str, Any]:
        """The file's content: `version`, then every part's fields in order (absent when unset)."""
        out: dict[str, Any] = {"version": self.version}
        for name in self.parts():
            out.update(getattr(self, name).as_json())
        out.update({k: v for k, v in self._unknown.items() if k not in out})
        return out

    def with_part(self, part: Part) -> RunRecord:
        """This record with `part`'s set fields written over those of its kind."""
        name = part_name(type(part))
        merged = {**getattr(self, name).as_json(), **part.as_json()}
        current = type(part)(**merged)
        return self.model_copy(update={name: current, "version": RECORD_VERSION})


def _readable_version(raw: Any, source: str) -> int:
    """The version of a results.json's content (0: no version), refused with a `RecordError`
    naming it when this cube cannot read it."""
    if not isinstance(raw, dict):
        raise RecordError(f"{source}: expected a JSON object, got {type(raw).__name__}")
    version = raw.get("version", 0)
    if version not in READABLE_VERSIONS:
        raise RecordError(
            f"{source} is results.json version {version!r}; this cube reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (0: no version): run the stages again "
            "with this cube, or read it with the cube that wrote it"
        )
    return version


def _unknown_keys(flat: dict[str, Any], owner: dict[str, str], where: str) -> dict[str, Any]:
    """The keys no part owns (a user's notebook's own figure, a later cube's), named in a
    warning: the record keeps them as they are, so they are not lost, and no stage reads them."""
    unknown = {k: v for k, v in flat.items() if k not in owner}
    if unknown:
        warnings.warn(
            f"{where}: key(s) {', '.join(sorted(unknown))} are not part of the run record "
            "(docs/reference/results.md); kept as they are, read by no stage",
            stacklevel=3,
        )
    return unknown


def _from_version_0(flat: dict[str, Any]) -> dict[str, Any]:
    """An unversioned file's keys as version 1's: the driver's `replayed` flag (stage 03 took
    its outcome) moves into stage 03's own record."""
    seq = flat.get("sequential")
    if isinstance(seq, dict) and "replayed" in seq:
        flat = {**flat, "sequential": {k: v for k, v in seq.items() if k != "replayed"}}
        if seq["replayed"]:
            flat["driver_taken"] = {
                "drive_id": None,
                "failed_calls": len(seq.get("failed_calls") or {}),
                "pilots": sorted(seq.get("judge_pilot") or {}),
            }
    return flat


def part_name(kind: type[Part]) -> str:
    """The name of a part class in `RunRecord`."""
    for name, cls in RunRecord.parts().items():
        if cls is kind:
            return name
    raise TypeError(f"{kind.__name__} is not a part of RunRecord")


def key_owners() -> dict[str, str]:
    """Top-level key of results.json -> the part holding it."""
    return {key: name for name, cls in RunRecord.parts().items() for key in cls.model_fields}


def keys_of(*parts: type[Part]) -> tuple[str, ...]:
    """The results.json keys of these parts (what forgetting them removes)."""
    return tuple(key for cls in parts for key in cls.model_fields)


def read_record(path: Path) -> RunRecord:
    """The record of a results.json (empty when the file does not exist yet)."""
    if not path.exists():
        return RunRecord()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RecordError(f"{path}: not JSON ({e})") from None
    return RunRecord.from_json(raw, str(path))


def _write(paths: RunPaths, record: RunRecord) -> RunRecord:
    """Write through a temp file replaced at once: a stage reading the record while another
    kernel's stage writes it (`cube.run.lanes`) never reads half a file."""
    tmp = paths.results.with_name(f"{paths.results.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_text(
            json.dumps(record.as_json(), indent=2, ensure_ascii=False, default=float),
            encoding="utf-8",
        )
        os.replace(tmp, paths.results)
    finally:
        tmp.unlink(missing_ok=True)
    return record


def write_part(paths: RunPaths, *parts: Part) -> RunRecord:
    """Store sub-records in the run's results.json (each over the fields of its kind it sets),
    under the run folder's lock: stages executing side by side each keep the other's part."""
    paths.root.mkdir(parents=True, exist_ok=True)
    with folder_lock(paths.root):
        record = read_record(paths.results)
        for part in parts:
            record = record.with_part(part)
        return _write(paths, record)


def forget(paths: RunPaths, keys: tuple[str, ...]) -> bool:
    """Remove these keys from the run's results.json; whether any was there."""
    if not paths.results.exists():
        return False
    with folder_lock(paths.root):
        flat = read_record(paths.results).as_json()
        if not any(k in flat for k in keys):
            return False
        kept = {k: v for k, v in flat.items() if k not in keys}
        _write(paths, RunRecord.from_json(kept, str(paths.results)))
    return True


# ----------------------------------------------------------------------- the reference page
_INTRO = """# results.json

The headline figures of a run, one typed record: `cube.run.record.RunRecord` (a pydantic model;
this page is generated from its field descriptions by `cube docs-reference`). A stage returns its
sub-record and the run stores it; the pages and commands read its fields. The file is flat: its
keys are the fields below, `version` first, then each sub-record's fields in this order (the field
order is the file format). A key a run did not write (its stage did not run) is absent. An older
file without `version` is read as version 0 (the same keys); any other version is refused, naming
the file and its version.
"""


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) or str(annotation)
    for noise in ("typing.", "cube.run.record_parts.", "cube.diagnose.decision_record."):
        text = text.replace(noise, "")
    text = text.replace("JsonValue", "Json").replace("NoneType", "None")
    return text.replace("|", "\\|")  # a cell of a Markdown table


def _rows(model: type[BaseModel]) -> list[str]:
    rows = ["| Key | Type | Meaning |", "| --- | --- | --- |"]
    for name, f in model.model_fields.items():
        text = (f.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{name}` | `{_type_name(f.annotation)}` | {text} |")
    return rows


def results_reference() -> str:
    """docs/reference/results.md: every sub-record and its keys, from the field descriptions."""
    out = [_INTRO, f"Version written: {RECORD_VERSION}.", ""]
    out += [
        "| Key | Type | Meaning |",
        "| --- | --- | --- |",
        "| `version` | `int` | The layout of this file. |",
        "",
    ]
    for cls in RunRecord.parts().values():
        out += [f"## {cls.TITLE}", "", f"Written by {cls.WRITER}.", "", *_rows(cls), ""]
    out += ["## `sequential`: the driver's record", "", *_rows(SequentialRecord), ""]
    for payload in (QuestionScreen, SystemFailures, FailureReason, AuditSample, AnswerScreen):
        out += [f"## `{payload.__name__}`", "", payload.__doc__ or "", "", *_rows(payload), ""]
    out += ["## `driver_taken`", "", *_rows(DriverTaken), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def write_results_reference(folder: Path | str) -> Path:
    """Write `folder`/results.md (`results_reference`); its path."""
    path = Path(folder) / "results.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(results_reference(), encoding="utf-8")
    return path
