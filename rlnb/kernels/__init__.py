"""Dispatch for the token-level log-prob computation (placeholder until the kernels issue lands)."""

from rlnb.logprobs import token_logprobs

__all__ = ["token_logprobs"]
