"""A task whose prompts are wrapped in the tokenizer's chat template (instruct models)."""

from __future__ import annotations

from rlnb.tasks.base import WRAPPERS, Task


class ChatTemplateTask(Task):
    """``task`` with every prompt wrapped in the tokenizer's chat template; rewards are the task's own.

    The template's text starts with BOS on some models (Llama): we drop it there because the tokenizer
    adds BOS again when the Sampler encodes the prompt.
    """

    def __init__(self, task: Task, tokenizer, *, system_prompt: str | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("chat_template: this tokenizer has no chat template (the embedded default has "
                             "none); pass chat_template=False")
        self.inner, self.tokenizer, self.system_prompt = task, tokenizer, system_prompt
        self.name, self.description, self.format_weight = task.name, task.description, task.format_weight

    def format(self, prompt: str) -> str:
        """The text the model sees for ``prompt``."""
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": prompt})
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        bos = self.tokenizer.bos_token
        if bos and text.startswith(bos) and self.tokenizer("").input_ids[:1] == [self.tokenizer.bos_token_id]:
            text = text[len(bos):]
        return text

    def dataset(self, n: int, seed: int = 0):
        return self.inner.dataset(n, seed).map(lambda row: {"prompt": self.format(row["prompt"])})

    def reward(self, completion, answer):
        return self.inner.reward(completion, answer)

    def extract(self, completion):
        return self.inner.extract(completion)

    def verify(self, extracted, answer):
        return self.inner.verify(extracted, answer)

    def reward_funcs(self):
        return self.inner.reward_funcs()

    def spec(self) -> dict:  # rebuilt at load with the checkpoint's tokenizer (rlnb.tasks.from_spec)
        return {"name": self.name, "wrap": "chat_template", "task": self.inner.spec(),
                "params": {"system_prompt": self.system_prompt}}

    def state(self):
        return self.inner.state()

    def set_state(self, state) -> None:
        self.inner.set_state(state)


def _wrap(inner, *, tokenizer=None, **params) -> ChatTemplateTask:
    return ChatTemplateTask(inner, tokenizer, **params)


WRAPPERS["chat_template"] = _wrap
