"""The XLA compiler options of arc_jax's jitted certification programs.

``jax.jit(fn, compiler_options=COMPILER_OPTIONS)``: per program, so nothing global (XLA_FLAGS,
the user's other programs) changes.
"""

COMPILER_OPTIONS = {"xla_cpu_prefer_vector_width": 512}
"""LLVM vectorises the elementwise fusions 512 bits wide where the CPU has AVX-512 (XLA's default
prefers 256): the interval DP's step is mostly elementwise work on both ends of every box
(benchmarks/README.md has the measurement). Soundness does not depend on it: the rules' error
bounds hold for any evaluation order and FMA contraction (arc_jax.interval), and the measured
margins of SST-2 test under the three default spaces came out unchanged or tighter. A CPU without AVX-512 has no wider vectors to use, and the option is one of
XLA's CPU debug options, which other backends' compilers do not read. Not given to the training
steps: beside the same code without it their wall-clock rate was 0.92x on a loaded machine
(1.09x per CPU-second), a gain not shown."""
