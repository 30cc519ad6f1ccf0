"""A run over time: its state (``state.RunState``, the one owner of what a run is besides its weights),
checkpoints, the controllers that move beta and the entropy coefficient, held-out evaluation, the run loop
(``driver``) and who drives a trainer (``owner``, the one registry). The lab that plays a run lives in
``rlnb.lab``."""
