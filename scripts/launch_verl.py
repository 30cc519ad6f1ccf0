"""Run an rlnb recipe with verl 0.9.1's PPO trainer (Ray, FSDP, vLLM; many GPUs, many nodes).

    python scripts/launch_verl.py --recipe dapo --task gsm8k --model Qwen/Qwen2.5-0.5B-Instruct \
        --chat-template --n-gpus 8 --num-generations 16 --lr 1e-6 --steps 500

Print the exact ``python -m verl.trainer.main_ppo ...`` command and what verl cannot express, without running:

    python scripts/launch_verl.py --recipe dapo --dry-run

Every flag: ``python scripts/launch_verl.py --help`` (recipe fields take the same flags as ``rlnb train``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from rlnb.export.verl_launch import main  # noqa: E402

if __name__ == "__main__":
    result = main()
    sys.exit(result if isinstance(result, int) else 0)
