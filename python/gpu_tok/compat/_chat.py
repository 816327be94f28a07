"""Chat templates: rendering conversations with a model's Jinja template as
transformers 5 does (`apply_chat_template`): the same sandboxed environment
(`trim_blocks`, `lstrip_blocks`, loop controls), the same globals
(`raise_exception`, `strftime_now`, `tojson` without HTML escaping) and the
same handling of `continue_final_message`. Needs jinja2 (the `chat` extra).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .._state import HoldsState

if TYPE_CHECKING:
    from ..batch import BatchEncoding

_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def select(templates: str | dict[str, str] | None, name: str | None, tools: Any) -> str:
    """transformers' `get_chat_template`: a template by name, or the default one."""
    if isinstance(templates, dict):
        if name is not None:
            return templates.get(name, name)  # a name, or a template given in full
        if tools is not None and "tool_use" in templates:
            return templates["tool_use"]
        if "default" in templates:
            return templates["default"]
        raise ValueError(f"this tokenizer has several chat templates and none is the default: pass "
                         f"chat_template= one of {sorted(templates)}")
    if name is not None:
        return name
    if templates is None:
        raise ValueError("this tokenizer has no chat template (tokenizer_config.json's chat_template or "
                         "chat_template.jinja): set tok.chat_template or pass chat_template=...")
    return templates


@lru_cache(maxsize=16)
def _compile(template: str) -> Any:
    try:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as err:
        raise ImportError('apply_chat_template needs jinja2: pip install "jinja2>=3.1.6" (the chat extra)') from err

    class Generation(jinja2.ext.Extension):
        """`{% generation %}...{% endgeneration %}`: rendered as its body (the
        assistant-token mask it marks is not supported)."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return str(caller())

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template)


def _messages(chat: Any) -> list[dict[str, Any]]:
    """A conversation as a list of plain dicts without None values (as transformers)."""
    if isinstance(chat, (str, bytes)) or not isinstance(chat, Sequence):
        raise TypeError(f"a conversation is a list of messages (dicts), not {type(chat).__name__}")
    out = []
    for message in chat:
        if not isinstance(message, Mapping):
            raise TypeError(f"chat messages must be dicts, not {type(message).__name__}")
        message = {k: v for k, v in message.items() if v is not None}
        reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
        if reasoning is not None:  # templates read one of these names: give them all
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def render(template: str, conversation: Any, *, tools: Any, documents: Any, add_generation_prompt: bool,
           continue_final_message: bool | str, variables: dict[str, Any]) -> tuple[list[str], bool]:
    """The rendered text of each conversation, and whether a batch was given."""
    if isinstance(conversation, (list, tuple)) and not conversation:
        raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    batched = isinstance(conversation, (list, tuple)) and isinstance(conversation[0], (list, tuple))
    if continue_final_message and add_generation_prompt:
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")
    if tools is not None and not all(isinstance(t, Mapping) for t in tools):
        raise TypeError("tools must be JSON schemas (dicts); gpu_tok does not convert functions")
    if documents is not None and not all(isinstance(d, Mapping) for d in documents):
        raise TypeError("Documents should be a list of dicts with 'title' and 'text' keys!")
    compiled = _compile(template)
    rendered = []
    for chat in conversation if batched else [conversation]:
        messages = _messages(chat)
        final = None
        if continue_final_message:
            field = continue_final_message if isinstance(continue_final_message, str) else "content"
            if not messages or messages[-1].get(field) is None:
                raise ValueError(f'continue_final_message is set but the final message has no "{field}"')
            final = messages[-1][field]
            if not isinstance(final, str):
                raise ValueError("continue_final_message needs the final message's text as a str")
            fields = [f for f in _REASONING_FIELDS if messages[-1].get(f) == final] \
                if field in _REASONING_FIELDS else [field]
            messages[-1] = {**messages[-1], **{f: messages[-1][f] + _CONTINUE_TAG for f in fields}}
        text = compiled.render(messages=messages, tools=tools, documents=documents,
                               add_generation_prompt=add_generation_prompt, **variables)
        if final is not None:
            if final.strip() not in text or _CONTINUE_TAG.strip() not in text:
                raise ValueError("continue_final_message is set but the final message does not appear in the "
                                 "rendered chat: the template changes it")
            at = text.rindex(_CONTINUE_TAG.strip())
            text = text[:at] if text[at:at + len(_CONTINUE_TAG)] == _CONTINUE_TAG else text[:at].rstrip()
        rendered.append(text)
    return rendered, batched


class ChatTemplates(HoldsState):
    """transformers' `get_chat_template` / `apply_chat_template`, mixed into
    `Tokenizer` (which holds `_state` and the call)."""

    __slots__ = ()

    if TYPE_CHECKING:
        def __call__(self, text: Any = None, *args: Any, **kwargs: Any) -> BatchEncoding: ...

    def get_chat_template(self, chat_template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str:
        """The template `apply_chat_template` would use (a name picks one of several)."""
        return select(self._state.model.chat_template, chat_template, tools)

    def apply_chat_template(
        self,
        conversation: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]],
        tools: list[dict[str, Any]] | None = None,
        documents: list[dict[str, str]] | None = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool | str = False,
        tokenize: bool = True,
        padding: bool | str = False,
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        return_dict: bool = True,
        return_assistant_tokens_mask: bool = False,
        tokenizer_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """transformers' `apply_chat_template`: renders the conversation(s) with the
        Jinja template (jinja2: the `chat` extra); with `tokenize`,
        encodes it without adding special tokens (the template writes them) and
        returns a BatchEncoding (`return_dict`) or the ids."""
        if return_assistant_tokens_mask:
            raise NotImplementedError("return_assistant_tokens_mask is not supported by gpu_tok yet")
        if kwargs.pop("sanitize_control_tokens", False):
            raise NotImplementedError("sanitize_control_tokens is not supported by gpu_tok yet")
        model = self._state.model  # one read: the template and its special tokens of one moment
        template = select(model.chat_template, chat_template, tools)
        rendered, batched = render(template, conversation, tools=tools, documents=documents,
                                   add_generation_prompt=add_generation_prompt,
                                   continue_final_message=continue_final_message,
                                   variables={**model.special_tokens_map(), **kwargs})
        if not tokenize:
            return rendered if batched else rendered[0]
        out = self(rendered if batched else rendered[0], padding=padding, truncation=truncation,
                   max_length=max_length, add_special_tokens=False, return_tensors=return_tensors,
                   **(tokenizer_kwargs or {}))
        return out if return_dict else out["input_ids"]
