"""Run an rlnb recipe with TRL's GRPOTrainer (one GPU, many GPUs with accelerate, DeepSpeed).

    accelerate launch --num_processes 8 scripts/launch_trl.py --recipe dapo --task gsm8k \
        --model Qwen/Qwen2.5-0.5B-Instruct --chat-template --num-generations 16 --lr 1e-6 --steps 500

CPU smoke run on the embedded default (seconds):

    python scripts/launch_trl.py --recipe grpo --steps 2 --prompts-per-step 2 --num-generations 4 \
        --no-gradient-checkpointing

Every flag: ``python scripts/launch_trl.py --help`` (recipe fields take the same flags as ``rlnb train``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from rlnb.export.launch import main  # noqa: E402

if __name__ == "__main__":
    main()
