"""The scenario file: JSON Lines of events, read into a :class:`~contextwindow.replay.scenario.Scenario`.

One JSON object a line, ``type`` saying which event (see ``docs/scenarios.md``)::

    {"type": "meta", "name": "demo", "model": "claude-sonnet-4-5", "window": 24000}
    {"type": "system", "text": "You are a coding agent."}
    {"type": "tools", "tools": [{"name": "read_file", "description": "…", "input_schema": {…}}]}
    {"type": "user", "content": "Why does the test fail?"}
    {"type": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {…}}]}
    {"type": "tool_result", "tool_use_id": "t1", "content": "…"}
    {"type": "inject", "content": [{"type": "image", "generate": "photo", "width": 1024, "height": 768}]}
    {"type": "assistant", "content": "The fixture is stale."}

Media come inline (``data``, base64), by ``path`` (relative to the scenario file), by ``url``, or
generated (``generate``: ``screenshot``/``photo`` of ``width``×``height``, ``pdf`` of ``pages``,
``tone`` of ``seconds``), deterministic from ``seed``.

Each line is validated by a pydantic ``TypeAdapter`` over the event models, then turned into the
canonical values of :mod:`contextwindow.content` by the :class:`~contextwindow.replay.scenario.ScenarioBuilder`,
which checks the script. Every mistake is a :class:`~contextwindow.replay.scenario.ScenarioError` naming the
line and field: ``scenario.jsonl:12: content[1].width: must be between 1 and 8192 pixels``.

:func:`dump_scenario` writes any scenario back in this format, media inline, so an imported transcript
or the demo can be saved, edited and replayed.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from ..attachments import decode_base64
from ..content import (
    AttachmentRef,
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    Message,
    Text,
    Thinking,
    ToolResult,
    ToolSpec,
    ToolUse,
)
from ..errors import InvalidInput
from ._json_text import json_at, read_text
from .scenario import AssistantStep, InjectStep, Scenario, ScenarioBuilder, ScenarioError, ToolResultStep
from .synthetic_media import MAX_SIDE_PX, pdf, photo, screenshot, wav

__all__ = ["dump_scenario", "dumps_scenario", "load_scenario", "loads_scenario"]


def _side(value: int) -> int:
    if not 1 <= value <= MAX_SIDE_PX:
        raise ValueError(f"must be between 1 and {MAX_SIDE_PX} pixels")
    return value


def _pages(value: int) -> int:
    if not 1 <= value <= 2000:
        raise ValueError("must be between 1 and 2000 pages")
    return value


def _seconds(value: float) -> float:
    if not 0 < value <= 600:
        raise ValueError("must be a number of seconds in (0, 600]")
    return value


def _media_type(value: str) -> str:
    if "/" not in value:
        raise ValueError(f"not a media type: {value!r} (e.g. image/png)")
    return value.lower()


Side = Annotated[int, Field(strict=True), AfterValidator(_side)]
MediaType = Annotated[str, AfterValidator(_media_type)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Media(_Model):
    data: str | None = None
    """Base64 bytes."""
    path: str | None = None
    """A file, relative to the scenario file."""
    url: str | None = None
    media_type: MediaType | None = None
    seed: int = 0

    def _sources(self) -> list[str]:
        return [k for k in ("data", "path", "url", "generate") if getattr(self, k, None) is not None]

    @model_validator(mode="after")
    def _one_source(self) -> _Media:
        sources = self._sources()
        if len(sources) != 1:
            raise ValueError(
                f"give exactly one of data, path, url or generate (got {', '.join(sources) or 'none'})"
            )
        if self.data is not None and self.media_type is None:
            raise ValueError("inline data needs a media_type")
        return self


class _ImageSpec(_Media):
    type: Literal["image"]
    generate: Literal["screenshot", "photo"] | None = None
    width: Side | None = None
    height: Side | None = None
    format: Literal["png", "jpeg"] | None = None
    caption: str = ""
    detail: Literal["auto", "low", "high", "original"] | None = None

    @model_validator(mode="after")
    def _generated_size(self) -> _ImageSpec:
        if self.generate is not None and (self.width is None or self.height is None):
            raise ValueError("a generated image needs width and height")
        if self.generate is None and (self.width is not None or self.height is not None):
            raise ValueError("width and height are only for generated images (others are measured)")
        return self


class _DocumentSpec(_Media):
    type: Literal["document"]
    generate: Literal["pdf"] | None = None
    pages: Annotated[int, AfterValidator(_pages)] = 1
    title: str | None = None
    filename: str | None = None


class _AudioSpec(_Media):
    type: Literal["audio"]
    generate: Literal["tone"] | None = None
    seconds: Annotated[float, Field(strict=False), AfterValidator(_seconds)] = 1.0

    @model_validator(mode="after")
    def _no_url(self) -> _AudioSpec:
        if self.url is not None:
            raise ValueError("audio cannot be given by URL")
        return self


class _TextSpec(_Model):
    type: Literal["text"]
    text: str


class _ToolUseSpec(_Model):
    type: Literal["tool_use"]
    id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    input: dict[str, Any] = Field(default_factory=dict)


class _ThinkingSpec(_Model):
    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


_InBlock = Annotated[_TextSpec | _ImageSpec | _DocumentSpec | _AudioSpec, Field(discriminator="type")]
_OutBlock = Annotated[_TextSpec | _ToolUseSpec | _ThinkingSpec, Field(discriminator="type")]


class _ToolDef(_Model):
    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class _Meta(_Model):
    type: Literal["meta"]
    name: str = "scenario"
    description: str = ""
    model: str | None = None
    window: Annotated[int, Field(gt=0)] | None = None


class _System(_Model):
    type: Literal["system"]
    text: str


class _Tools(_Model):
    type: Literal["tools"]
    tools: list[_ToolDef]


class _User(_Model):
    type: Literal["user"]
    content: str | list[_InBlock]


class _Assistant(_Model):
    type: Literal["assistant"]
    content: str | list[_OutBlock]


class _ToolResult(_Model):
    type: Literal["tool_result"]
    tool_use_id: Annotated[str, Field(min_length=1)]
    content: str | list[_InBlock] = ""
    is_error: bool = False


class _Inject(_Model):
    type: Literal["inject"]
    round: Annotated[int, Field(ge=1)] | None = None
    content: str | list[_InBlock]


_Event = Annotated[
    _Meta | _System | _Tools | _User | _Assistant | _ToolResult | _Inject, Field(discriminator="type")
]


@cache
def _event_adapter() -> TypeAdapter[Any]:
    """Built on first use, not at import."""
    return TypeAdapter(_Event)


_TAGS = frozenset(
    {"meta", "system", "tools", "user", "assistant", "tool_result", "inject", "text", "image", "document"}
    | {"audio", "tool_use", "thinking"}
)


def _field_path(loc: tuple[int | str, ...]) -> str:
    """pydantic's location as a field path, union tags and markers dropped: ``content[1].width``."""
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif (
            ((i == 0 or isinstance(loc[i - 1], int)) and part in _TAGS)
            or "[" in part
            or part in ("str", "int", "float", "bool")
        ):
            continue
        else:
            out += f".{part}" if out else part
    return out


def _validation_error(err: pydantic.ValidationError, where: str) -> ScenarioError:
    # In a union every branch reports; the deepest location is the one the writer meant.
    first = max(err.errors(include_url=False), key=lambda e: len(e["loc"]))
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "union_tag_invalid":
        message = (
            f"unknown type {first['input'].get('type')!r}" if isinstance(first["input"], dict) else message
        )
    return ScenarioError(message, where=where, field=_field_path(tuple(first["loc"])))


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file; every mistake is a ``ScenarioError`` naming its line and field."""
    path = Path(path)
    return loads_scenario(read_text(path), name=str(path), base_dir=path.parent)


def loads_scenario(text: str, *, name: str = "scenario.jsonl", base_dir: Path | None = None) -> Scenario:
    """Read scenario text; ``name`` prefixes error locations and ``base_dir`` anchors relative paths."""
    builder = ScenarioBuilder(name=Path(name).stem)
    base = base_dir or Path.cwd()
    started = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        raw = json_at(line, where=where)
        if not isinstance(raw, dict):
            raise ScenarioError("each line must be a JSON object with a type", where=where)
        try:
            event = _event_adapter().validate_python(raw)
        except pydantic.ValidationError as err:
            raise _validation_error(err, where) from None
        was_started, started = started, True
        if isinstance(event, _Meta):
            if was_started:
                raise ScenarioError("meta must be the first event", where=where, field="type")
            builder.name, builder.description = event.name, event.description
            builder.model, builder.window = event.model, event.window
        elif isinstance(event, _System):
            builder.system(event.text, where=where)
        elif isinstance(event, _Tools):
            specs = [
                ToolSpec(name=t.name, description=t.description, input_schema=t.input_schema)
                for t in event.tools
            ]
            builder.tools(specs, where=where)
        elif isinstance(event, _User):
            builder.user(
                Message(role="user", content=_blocks(event.content, builder, base, where)), where=where
            )
        elif isinstance(event, _Assistant):
            builder.assistant(
                Message(role="assistant", content=_blocks(event.content, builder, base, where)), where=where
            )
        elif isinstance(event, _ToolResult):
            content = (
                event.content
                if isinstance(event.content, str)
                else _blocks(event.content, builder, base, where)
            )
            result = ToolResult(tool_use_id=event.tool_use_id, content=content, is_error=event.is_error)  # type: ignore[arg-type]
            builder.tool_result(result, where=where)
        else:
            message = Message(role="user", content=_blocks(event.content, builder, base, where))
            builder.inject(message, round=event.round, where=where)
    return builder.build(where=f"{name}: end")


def _blocks(content: str | list[Any], builder: ScenarioBuilder, base: Path, where: str) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (Text(text=content),)
    return tuple(_block(spec, builder, base, where, f"content[{i}]") for i, spec in enumerate(content))


def _block(spec: Any, builder: ScenarioBuilder, base: Path, where: str, field: str) -> Block:
    if isinstance(spec, _TextSpec):
        return Text(text=spec.text)
    if isinstance(spec, _ToolUseSpec):
        return ToolUse(id=spec.id, name=spec.name, input=spec.input)
    if isinstance(spec, _ThinkingSpec):
        return Thinking(thinking=spec.thinking, signature=spec.signature)
    if spec.url is not None:
        if isinstance(spec, _ImageSpec):
            return Image(url=spec.url, detail=spec.detail)
        return Document(url=spec.url, title=spec.title, filename=spec.filename)
    if spec.data is not None:
        try:
            data = decode_base64(spec.data, path="data")
        except InvalidInput as err:
            raise ScenarioError(err.reason, where=where, field=f"{field}.data") from None
        ref = builder.add_bytes(data, spec.media_type, where=where, field=field)
    elif spec.path is not None:
        file = Path(spec.path) if Path(spec.path).is_absolute() else base / spec.path
        if not file.is_file():
            raise ScenarioError(
                f"no such file: {spec.path} (looked in {file.parent})", where=where, field=f"{field}.path"
            )
        media_type = spec.media_type or mimetypes.guess_type(file.name)[0]
        if media_type is None:
            raise ScenarioError(
                f"cannot tell the media type of {spec.path}; give media_type", where=where, field=field
            )
        ref = builder.add_file(file, media_type, where=where, field=field)
    else:
        ref = _generate(spec, builder, where, field)
    if isinstance(spec, _ImageSpec):
        return Image(ref=ref, detail=spec.detail)
    if isinstance(spec, _DocumentSpec):
        return Document(ref=ref, title=spec.title, filename=spec.filename)
    return Audio(ref=ref)


def _generate(spec: Any, builder: ScenarioBuilder, where: str, field: str) -> AttachmentRef:
    seed = spec.seed
    if isinstance(spec, _ImageSpec):
        fmt = spec.format or ("png" if spec.generate == "screenshot" else "jpeg")
        make = screenshot if spec.generate == "screenshot" else photo
        width, height, caption = spec.width, spec.height, spec.caption
        assert width is not None and height is not None  # the model validator requires both
        return builder.add_generated(
            lambda: make(width, height, seed=seed, caption=caption, fmt=fmt),
            f"image/{fmt}",
            where=where,
            field=field,
        )
    if isinstance(spec, _DocumentSpec):
        pages, title = spec.pages, spec.title or "Document"
        return builder.add_generated(
            lambda: pdf(pages, seed=seed, title=title),
            "application/pdf",
            where=where,
            field=field,
        )
    seconds = spec.seconds
    return builder.add_generated(lambda: wav(seconds, seed=seed), "audio/wav", where=where, field=field)


# ---------------------------------------------------------------------------------------------------
# Writing


def dumps_scenario(scenario: Scenario) -> str:
    """A scenario as scenario-file text; media inline (base64), so the text stands alone."""
    return "".join(json.dumps(event, ensure_ascii=False) + "\n" for event in _events(scenario))


def dump_scenario(scenario: Scenario, path: str | Path) -> None:
    """Write :func:`dumps_scenario` to ``path``."""
    Path(path).write_text(dumps_scenario(scenario), encoding="utf-8")


def _events(scenario: Scenario) -> Iterable[dict[str, Any]]:
    meta: dict[str, Any] = {"type": "meta", "name": scenario.name}
    if scenario.description:
        meta["description"] = scenario.description
    if scenario.model:
        meta["model"] = scenario.model
    if scenario.window:
        meta["window"] = scenario.window
    yield meta
    for text in scenario.system:
        yield {"type": "system", "text": text.text}
    if scenario.tools:
        yield {
            "type": "tools",
            "tools": [
                {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
                for t in scenario.tools
            ],
        }
    for turn in scenario.turns:
        yield {"type": "user", "content": _dump_blocks(turn.user.content, scenario)}
        for step in turn.steps:
            if isinstance(step, AssistantStep):
                yield {"type": "assistant", "content": _dump_blocks(step.message.content, scenario)}
            elif isinstance(step, ToolResultStep):
                result = step.result
                content: Any = (
                    result.content
                    if isinstance(result.content, str)
                    else _dump_blocks(result.content, scenario)
                )
                event: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": result.tool_use_id,
                    "content": content,
                }
                if result.is_error:
                    event["is_error"] = True
                yield event
            elif isinstance(step, InjectStep):
                yield {
                    "type": "inject",
                    "round": step.round,
                    "content": _dump_blocks(step.message.content, scenario),
                }


def _dump_blocks(blocks: Iterable[Block], scenario: Scenario) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, Text):
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolUse):
            out.append({"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)})
        elif isinstance(block, Thinking):
            item: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
            if block.signature is not None:
                item["signature"] = block.signature
            out.append(item)
        elif isinstance(block, Image | Document | Audio | GeneratedImage):
            out.append(_dump_media(block, scenario))
        else:  # video, redacted thinking and nested tool results have no scenario form: kept as text
            out.append({"type": "text", "text": f"[{block.type}]"})
    return out


def _dump_media(block: Image | Document | Audio | GeneratedImage, scenario: Scenario) -> dict[str, Any]:
    kind = "image" if block.type == "generated_image" else block.type
    item: dict[str, Any] = {"type": kind}
    if block.ref is None:
        item["url"] = getattr(block, "url", None)
    else:
        item["data"] = base64.b64encode(scenario.load_attachment(block.ref)).decode("ascii")
        item["media_type"] = block.ref.media_type
    if isinstance(block, Image) and block.detail is not None:
        item["detail"] = block.detail
    if isinstance(block, Document):
        for key in ("title", "filename"):
            if getattr(block, key) is not None:
                item[key] = getattr(block, key)
    return item
