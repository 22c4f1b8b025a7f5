# Sourced by the bench scripts (from the repository root).

# The random token file for vocab 4096 (4M uint16 tokens, seed 0), written if missing; prints its path.
bench_tokens() {
  local tokens=data/generated/bench/random-v4096-4M.u16
  if [ ! -s "$tokens" ]; then
    mkdir -p "$(dirname "$tokens")"
    /usr/bin/python3 -c "import numpy as np; np.random.default_rng(0).integers(0, 4096, size=4_000_000, dtype=np.uint16).tofile('$tokens')"
  fi
  echo "$tokens"
}

# This CPU kind as a folder name, <model name>-family<F>-model<M>: the model name alone does not
# tell kinds apart (two EPYC generations both read "AMD EPYC" in some VMs).
cpu_kind() {
  local name
  name=$(lscpu | sed -n 's/^Model name: *//p' | tr -c 'A-Za-z0-9\n' '-' | sed 's/--*/-/g; s/-$//')
  echo "$name-family$(lscpu | sed -n 's/^CPU family: *//p')-model$(lscpu | sed -n 's/^Model: *//p')"
}
