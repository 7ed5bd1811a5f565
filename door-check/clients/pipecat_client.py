"""Pipecat's ``OpenAILLMService`` in a pipeline of its own: a context frame in, the LLM's text frames collected at the
end of the pipeline; a barge-in is what Pipecat does when the person starts talking — an interruption broadcast
from the pipeline (the LLM service cancels the generation under way, closing its stream)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from common import DOOR, GRANT, MODEL, main, now
from loguru import logger
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.llm import OpenAILLMService

logger.remove()
logger.add(sys.stderr, level="WARNING")


class Collector(FrameProcessor):
    """The end of the pipeline: the answer's words, when the first came, and how the turn ended."""

    def __init__(self) -> None:
        super().__init__()
        self.barge = False
        self.text = ""
        self.first: float | None = None
        self.closed_at: float | None = None
        self.error: str | None = None
        self.done = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMTextFrame) and not self.done.is_set():
            self.first = self.first or now()
            self.text += frame.text
            if self.barge:
                await self.broadcast_interruption()
                self.closed_at = now()
                self.done.set()
        elif isinstance(frame, LLMFullResponseEndFrame):
            self.done.set()
        elif isinstance(frame, ErrorFrame):
            self.error = frame.error
            self.done.set()
        await self.push_frame(frame, direction)


async def turn(words: str, barge: bool) -> dict[str, Any]:
    service = OpenAILLMService(api_key=GRANT, base_url=DOOR, model=MODEL)
    collector = Collector()
    collector.barge = barge
    worker = PipelineWorker(Pipeline([service, collector]), params=PipelineParams(), cancel_on_idle_timeout=False)
    runner = PipelineRunner(handle_sigint=False)

    @worker.event_handler("on_pipeline_error")
    async def failed(_worker: PipelineWorker, frame: ErrorFrame) -> None:
        collector.error = frame.error
        collector.done.set()

    running = asyncio.create_task(runner.run(worker))
    try:
        sent = now()
        await worker.queue_frame(LLMContextFrame(LLMContext(messages=[{"role": "user", "content": words}])))
        await asyncio.wait_for(collector.done.wait(), 60)
        if collector.error is not None:
            raise RuntimeError(collector.error)
        out: dict[str, Any] = {"text": collector.text,
                               "first_ms": None if collector.first is None else (collector.first - sent) * 1000,
                               "sent_at": sent}
        if collector.closed_at is not None:
            out["closed_at"] = collector.closed_at
        return out
    finally:
        await worker.cancel()
        await running


asyncio.run(main(turn))
