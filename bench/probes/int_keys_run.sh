set -u
export PYTHONUNBUFFERED=1
bash bench/gpu_env.sh; cat $OUT/gpu.log
timeout 500 python3 bench/probes/int_keys.py --out $OUT 2>&1 | grep -v Warning | tail -40
