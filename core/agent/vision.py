"""How an agent sees images: the session's model when it takes them, else the ``[models] vision``
model, which answers questions about images (``inspect_image``) and describes the images a user
sends, so that a text-only model reads a description where the image was."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from core.events import Event, Notice
from core.messages import ImagePart, TextPart, UserMessage
from core.models.base import ErrorKind, Model, ModelError, ModelRequest, ResponseDone
from core.models.vision import DESCRIBE, vision_request
from core.tools.errors import ToolError

__all__ = ["Ask", "NOT_DESCRIBED", "Sight", "UNSEEN", "undescribed"]

# Streams one request from a model, charged to the session; the final response (None: none came).
Ask = Callable[[ModelRequest, Model], Awaitable[ResponseDone | None]]
# Where an image was, for a model that cannot see it and no vision model to describe it.
UNSEEN = "[An image was attached here, but you cannot see it: this model does not take images and no vision model is configured.]"
# Where an image was, when its description was cancelled or failed before it was stored.
NOT_DESCRIBED = "[An image was attached here, but it was not described: the turn ended before the vision model answered.]"
_CONTEXT_CHARS = 2000


def _every_model(_label: str) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Sight:
    """Which models take images (by name, "provider:model"), and the vision model for those that do not."""

    sees: Callable[[str], bool] = field(default=_every_model)
    vision: Model | None = None
    # Why ``[models] vision`` is set but cannot be used (None: unset, or usable).
    problem: str | None = None
    max_tokens: int = 2048

    def model_for(self, main: Model) -> Model | None:
        """The model that looks at images for a session whose model is ``main``; None when none can."""
        return main if self.sees(main.name) else self.vision

    def unavailable(self, main: Model) -> str:
        """Why no model can see images for ``main``, and what to do."""
        return self.problem or (
            f"{main.name} does not take images and no vision model is configured; "
            'set [models] vision = "provider:model" in config.toml to a model that does.'
        )

    async def look(self, ask: Ask, main: Model, images: list[ImagePart], question: str) -> str:
        """The answer to ``question`` about ``images``; ToolError when no model can see them or the request fails."""
        model = self.model_for(main)
        if model is None:
            raise ToolError(f"Cannot look at images: {self.unavailable(main)}")
        try:
            return await self._answer(ask, model, images, question)
        except ModelError as exc:
            raise ToolError(exc.user_message()) from None

    async def described(self, ask: Ask, main: Model, prompt: UserMessage, emit: Callable[[Event], Awaitable[None]]) -> UserMessage:
        """The user's message as ``main`` can take it. For a model that does not take images, each
        image becomes "[Image: description]" from the vision model, or a note that it cannot be seen
        (and the user is told); the message is stored that way, so no image is described twice."""
        images = [p for p in prompt.parts if isinstance(p, ImagePart)]
        if not images or self.sees(main.name):
            return prompt
        if self.vision is None:
            count = "An image was" if len(images) == 1 else f"{len(images)} images were"
            await emit(Notice(f"{count} not shown to the model: {self.unavailable(main)}", "warning"))
            return _replaced(prompt, [UNSEEN] * len(images))
        vision = self.vision
        question = DESCRIBE
        if said := prompt.text.strip():
            question += (
                f"\n\nThe user sent it with this message (context only; describe the image, do not answer it):\n{said[:_CONTEXT_CHARS]}"
            )
        answers = await asyncio.gather(*(self._answer(ask, vision, [image], question) for image in images), return_exceptions=True)
        texts: list[str] = []
        for answer in answers:
            if isinstance(answer, str):
                texts.append(f"[Image: {answer}]")
                continue
            if not isinstance(answer, ModelError):
                raise answer  # cancellation, or a bug: not a description that failed
            await emit(Notice(f"An image could not be described, so the model does not see it. {answer.user_message()}", "warning"))
            texts.append("[An image was attached here, but it could not be described (the vision model failed).]")
        done = sum(1 for a in answers if isinstance(a, str))
        if done:
            what = "the image" if done == 1 else f"{done} images"
            await emit(Notice(f"{vision.name} described {what} for {main.name}, which does not take images.", "info"))
        return _replaced(prompt, texts)

    async def _answer(self, ask: Ask, model: Model, images: list[ImagePart], question: str) -> str:
        done = await ask(vision_request(images, question, max_tokens=self.max_tokens), model)
        text = done.message.text.strip() if done is not None else ""
        if not text:
            raise ModelError(ErrorKind.BAD_RESPONSE, "the model answered with no text", model=model.name)
        return text


def undescribed(prompt: UserMessage) -> UserMessage:
    """The user's message as stored when describing its images did not finish (cancelled, or
    failed): the words kept, each image a note that it was not described."""
    count = sum(1 for p in prompt.parts if isinstance(p, ImagePart))
    return _replaced(prompt, [NOT_DESCRIBED] * count) if count else prompt


def _replaced(prompt: UserMessage, texts: list[str]) -> UserMessage:
    """``prompt`` with its images, in order, replaced by ``texts``."""
    left = iter(texts)
    parts: list[TextPart | ImagePart] = []
    last = len(prompt.parts) - 1
    for index, part in enumerate(prompt.parts):
        if isinstance(part, ImagePart):  # set apart from the words around it: a request joins text parts as they are
            part = TextPart(text=("\n\n" if index else "") + next(left) + ("\n\n" if index < last else ""))
        parts.append(part)
    return UserMessage(parts=parts)
