"""What a request may say about the data a launch trains on: a dataset path and a tokenizer.

Checked once here (bounded, printable, no shell metacharacter can break out: the launch builders
shell-quote every value). Without them a launch is a smoke test on mock data and says so.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LaunchInputs", "TokenizerInputs"]

_PATH = r"^[^\x00-\x1f\x7f]+$"
"""Any printable characters (paths may hold spaces); control characters (newlines included) are refused."""

_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


class TokenizerInputs(BaseModel):
    model_config = _STRICT

    type: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_]+$",
        description="Megatron-LM --tokenizer-type (e.g. HuggingFaceTokenizer, the default when a model is given).",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        pattern=_PATH,
        description="The tokenizer: a Hugging Face name or a local path (Megatron-LM --tokenizer-model,"
        " TorchTitan model.hf_assets_path).",
    )


class LaunchInputs(BaseModel):
    model_config = _STRICT

    data_path: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        pattern=_PATH,
        description="The training data (Megatron-LM --data-path prefix, TorchTitan training.dataset_path).",
    )
    tokenizer: TokenizerInputs | None = None

    @property
    def tokenizer_model(self) -> str | None:
        return self.tokenizer.model if self.tokenizer is not None else None

    @property
    def tokenizer_type(self) -> str | None:
        return self.tokenizer.type if self.tokenizer is not None else None
