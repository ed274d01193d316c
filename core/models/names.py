"""Models given by name: ``Agent(model="openai/<model>")``."""

from __future__ import annotations

from troupe.core.models.openai_model import OpenAIModel
from troupe.core.vocabulary.model import Model


def resolve_model(model: Model | str) -> Model:
    """The model ``model`` names.

    Args:
        model: A ``Model`` (returned as it is), or a name: ``"openai/<model>"`` is an ``OpenAIModel``
            (OpenAI, or any OpenAI-compatible server through ``OPENAI_BASE_URL``).

    Returns:
        The model.

    Raises:
        ValueError: A name of no known provider.
        TypeError: Neither a ``Model`` nor a string.

    Example:
        >>> resolve_model("openai/gpt-4o-mini").id
        'openai/gpt-4o-mini'
    """
    if isinstance(model, Model):
        return model
    if isinstance(model, str):
        provider, _, name = model.partition("/")
        if provider == "openai" and name:
            return OpenAIModel(name)
        raise ValueError(f"unknown model {model!r}: use 'openai/<model>' or a Model instance")
    raise TypeError(f"model must be a Model or 'openai/<model>' string, got {type(model).__name__}")


__all__ = ["resolve_model"]
