# weights/training_gpus.sh — sourced by the leave-one-GPU-out scripts (evaluate.sh, uncertainty.sh, ensemble_study.sh,
# logo.sh, ensemble_e2e.sh): the training GPUs their folds go over, one list for all of them. Never a GPU of
# weights/HELD_OUT (the scripts that take a list on their command line refuse one through held_out.sh).
#   training_fp32_gpus   the five NeuSight GPUs (../shared/data/neusight), ';'-separated, as their data spell them
#   training_tc_gpus     the six AIConfigurator training GPUs (tensor-core GEMMs, fused attention), the same way
training_fp32_gpus="NVIDIA A100-PCIE-40GB;Tesla V100-PCIE-32GB;Tesla T4;Tesla P100-PCIE-16GB;Tesla P4"
training_tc_gpus="NVIDIA L40S;NVIDIA RTX PRO 6000 Blackwell Server Edition;NVIDIA B200;NVIDIA B300 SXM6 AC;NVIDIA GB200;NVIDIA GB300"
