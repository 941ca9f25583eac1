"""precision: auto: the policy chosen from what a rank sees (fake CPU flags and GPU capabilities), and why."""

from __future__ import annotations

import pytest

from hpc_train.config import TrainConfig, load_config
from hpc_train.training.precision import Hardware, Precision, choose, common, cpu_flags, vector_units

pytestmark = pytest.mark.quick

SAPPHIRE_RAPIDS = frozenset("fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile".split())
COOPER_LAKE = frozenset("avx2 avx512f avx512_bf16".split())
SKYLAKE = frozenset("avx2 avx512f avx512_vnni".split())
EPYC_ZEN3 = frozenset("avx2 fma".split())


@pytest.mark.parametrize("flags, policy, why", [
    (SAPPHIRE_RAPIDS, "mixed_bfloat16", "auto: the CPU has AMX"),
    (COOPER_LAKE, "mixed_bfloat16", "auto: the CPU has AVX512-BF16"),
    (SKYLAKE, "float32", "auto: the CPU has no bf16 units (AMX, AVX512-BF16)"),
    (EPYC_ZEN3, "float32", "auto: the CPU has no bf16 units (AMX, AVX512-BF16)"),
    (frozenset(), "float32", "auto: the CPU has no bf16 units (AMX, AVX512-BF16)"),
])
def test_on_a_cpu_its_bf16_units_decide(flags: frozenset[str], policy: str, why: str) -> None:
    assert choose("auto", Hardware(flags)) == Precision(policy, why)


def test_without_onednn_the_cpus_bf16_units_are_unused_so_float32() -> None:
    # Measured here: bf16 without oneDNN trained at a quarter of float32's images/s (BENCHMARKS.md).
    assert choose("auto", Hardware(SAPPHIRE_RAPIDS, onednn=False)) == Precision(
        "float32", "auto: the CPU has AMX, but TF_ENABLE_ONEDNN_OPTS=0 leaves it unused")
    assert choose("auto", Hardware(EPYC_ZEN3, ((8, 0),), onednn=False)).policy == "mixed_bfloat16"  # a GPU's own


@pytest.mark.parametrize("capabilities, policy, why", [
    (((9, 0),), "mixed_bfloat16", "the GPU is Ampere or newer, compute capability 9.0"),  # H100
    (((8, 0), (8, 0)), "mixed_bfloat16", "the GPU is Ampere or newer, compute capability 8.0"),  # A100s
    (((7, 5),), "mixed_float16", "the GPU is Volta or Turing, compute capability 7.5; float16 with loss scaling"),
    (((7, 0),), "mixed_float16", "the GPU is Volta or Turing, compute capability 7.0; float16 with loss scaling"),
    (((6, 0),), "float32", "the GPU has no fast 16-bit format, compute capability 6.0"),  # P100
    (((8, 6), (7, 0)), "mixed_float16", "the GPU is Volta or Turing, compute capability 7.0; float16 with loss "
                                        "scaling"),
])
def test_with_gpus_the_weakest_gpu_decides_whatever_the_cpu(capabilities: tuple[tuple[int, int], ...],
                                                            policy: str, why: str) -> None:
    # The CPU has AMX, but the GPUs compute.
    assert choose("auto", Hardware(SAPPHIRE_RAPIDS, capabilities)) == Precision(policy, f"auto: {why}")


@pytest.mark.parametrize("requested", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_an_explicit_precision_always_wins(requested: str) -> None:
    for hardware in (Hardware(SAPPHIRE_RAPIDS), Hardware(EPYC_ZEN3, ((6, 1),)), Hardware(frozenset(), ((9, 0),))):
        assert choose(requested, hardware) == Precision(requested, "as configured")


def test_auto_is_the_default_and_float32_can_still_be_asked_for() -> None:
    assert TrainConfig().precision == "auto"
    assert load_config(None, ["precision=float32"]).precision == "float32"


def test_the_line_says_what_and_why() -> None:
    assert choose("auto", Hardware(SAPPHIRE_RAPIDS)).describe() == "precision mixed_bfloat16 (auto: the CPU has AMX)"


def test_replicas_that_agree_keep_their_choice_and_those_that_differ_run_the_weakest() -> None:
    own = Precision("mixed_bfloat16", "auto: the CPU has AMX")
    assert common(own, {"mixed_bfloat16": 4, "float32": 0, "mixed_float16": 0}) == own
    mixed = common(own, {"mixed_bfloat16": 3, "float32": 1, "mixed_float16": 0})
    assert mixed == Precision("float32", "auto: the replicas' hardware differs (float32 on 1, mixed_bfloat16 on 3): "
                                         "the weakest, which all run")
    assert common(own, {"mixed_bfloat16": 2, "mixed_float16": 2}).policy == "mixed_float16"


def test_cpu_flags_are_read_from_cpuinfo_text() -> None:
    text = "processor\t: 0\nmodel name\t: Intel Xeon\nflags\t\t: fpu avx2 amx_bf16 amx_tile\n\nprocessor\t: 1\n"
    assert cpu_flags(text) == frozenset({"fpu", "avx2", "amx_bf16", "amx_tile"})
    assert cpu_flags("processor : 0\n") == frozenset()
    assert cpu_flags("Features\t: fp asimd bf16\n") == frozenset({"fp", "asimd", "bf16"})  # an Arm CPU's line


@pytest.mark.parametrize("flags, words", [
    (SAPPHIRE_RAPIDS, "AVX-512, AMX, bf16"), (COOPER_LAKE, "AVX-512, bf16"), (SKYLAKE, "AVX-512"),
    (EPYC_ZEN3, "AVX2"), (frozenset(), "no AVX2"),
])
def test_the_machine_line_names_the_vector_and_matrix_units(flags: frozenset[str], words: str) -> None:
    assert vector_units(flags) == words


def test_auto_under_parameter_servers_keeps_the_chiefs_cpu_rule_unless_the_job_has_gpus_it_cannot_see() -> None:
    from hpc_train.training.precision import Precision, for_parameter_servers

    amx = Precision("mixed_bfloat16", "auto: the CPU has AMX")
    assert for_parameter_servers(amx, {"SLURM_JOB_ID": "7"}) == amx  # a CPU job: the chief's choice holds
    assert for_parameter_servers(amx, {"SLURM_GPUS_ON_NODE": "0"}) == amx
    for gpus in ({"SLURM_GPUS_ON_NODE": "2"}, {"SLURM_GPUS_PER_NODE_HET_GROUP_1": "a100:2"}):
        chosen = for_parameter_servers(amx, gpus)
        assert chosen.policy == "float32" and "set precision=mixed_bfloat16 for Ampere" in chosen.why
