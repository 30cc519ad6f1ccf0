"""Root conftest: notebooks collected by nbval run in smoke mode unless RLNB_SMOKE is set explicitly."""

import os

os.environ.setdefault("RLNB_SMOKE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
