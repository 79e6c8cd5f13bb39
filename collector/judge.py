"""The semantic judge at the edge: an OpenAI-compatible chat endpoint that reads closed runs,
on a thread of its own with a bounded backlog, so the deterministic pipeline never waits.
Its findings go back through the pipeline's queue like any other batch."""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable

from mast_otel.processors.judge import JudgeConfig, Transcript, parse_verdict, prompt
from mast_otel.processors.model import Finding

log = logging.getLogger(__name__)


class JudgeError(RuntimeError):
    pass


class OpenAICompatibleJudge:
    """Asks `{endpoint}/chat/completions` (vLLM, Ollama, llama.cpp server, OpenAI, ...)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.url = config.endpoint.rstrip("/") + "/chat/completions"
        self._api_key = os.environ.get(config.api_key_env, "")

    def judge(self, transcript: Transcript) -> list[Finding]:
        body = json.dumps(
            {
                "model": self.config.model,
                "temperature": 0,
                "messages": prompt(transcript, self.config),
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                answer = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise JudgeError(f"judge endpoint {self.url} failed: {exc}") from exc
        try:
            text = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise JudgeError(f"judge endpoint {self.url} answered without a message") from exc
        return parse_verdict(str(text), transcript, self.config)


class JudgeStage:
    """Judges closed runs one at a time; drops (and counts) runs past `max_pending_runs`."""

    def __init__(
        self,
        judge: OpenAICompatibleJudge,
        config: JudgeConfig,
        deliver: Callable[[list[Finding]], None],
    ) -> None:
        self.judge = judge
        self.deliver = deliver
        self._queue: queue.Queue[Transcript | None] = queue.Queue(config.max_pending_runs)
        self._thread = threading.Thread(target=self._run, name="mast-judge", daemon=True)
        self.stats = {"judged": 0, "dropped": 0, "errors": 0, "findings": 0}

    def start(self) -> None:
        self._thread.start()

    def offer(self, transcript: Transcript) -> None:
        try:
            self._queue.put_nowait(transcript)
        except queue.Full:
            self.stats["dropped"] += 1

    def stop(self) -> None:
        """Finish the run being judged; runs still waiting are dropped (and counted)."""
        while True:
            try:
                if self._queue.get_nowait() is not None:
                    self.stats["dropped"] += 1
            except queue.Empty:
                break
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            transcript = self._queue.get()
            if transcript is None:
                return
            try:
                findings = self.judge.judge(transcript)
            except JudgeError as exc:
                self.stats["errors"] += 1
                log.warning("%s", exc)
                continue
            self.stats["judged"] += 1
            self.stats["findings"] += len(findings)
            if findings:
                self.deliver(findings)
