"""Run settings: what is being estimated."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from memdesigner.engine.checkpoint_units import check_units
from memdesigner.engine.finetune_settings import check_finetune_settings
from memdesigner.model.registry import MAX_NUMBER_BITS
from memdesigner.units import DTYPE_ALIASES

MODES = ("inference", "train", "generate")  # generate: prefill + decode steps (engine/generate.py)
KV_CACHES = ("dynamic", "static")
KV_DTYPES = ("auto", "fp32", "fp16", "bf16")
OPTIMIZERS = ("none", "sgd", "momentum", "adam", "adamw", "adamw8bit", "paged_adamw8bit", "adafactor")
OPTIMIZER_ALIASES = {"sgd_momentum": "momentum", "": "none", None: "none"}
DTYPES = ("fp32", "fp16", "bf16")
MAX_SEQ_LEN = 1 << 24  # 16.8 M tokens: beyond any model's context; a bigger value is a typo
BACKENDS = ("cuda", "cpu", "mps")
STRATEGIES = ("none", "ddp", "zero1", "zero2", "zero3")  # data-parallel training (memdesigner.engine.distributed)
OFFLOADS = ("none", "params")  # FSDP2 CPUOffloadPolicy (memdesigner.engine.fsdp)


@dataclass(frozen=True)
class Settings:
    mode: str = "inference"
    batch: int = 1
    optimizer: str = "adam"
    dtype: str = "fp32"  # model and input dtype (as model.to(dtype))
    amp: bool = False  # autocast: fp32 weights, low-precision compute (fp16 on CUDA, bf16 on CPU)
    checkpointing: bool = False  # activation checkpointing in sqrt(n) segments
    backend: str = "cuda"
    foreach: bool | None = None  # optimizer multi-tensor path; None: the backend's default
    gpus: int = 1  # data-parallel world size (per-rank batch is `batch`)
    strategy: str = "none"  # none | ddp | zero1 (DDP + ZeroRedundancyOptimizer) | zero2 | zero3 (FSDP2)
    offload: str = "none"  # none | params: FSDP2 CPUOffloadPolicy (shards, gradients, optimizer step on the host)
    tensor_parallel: int = 1  # tensor-parallel size T (engine/tensor_parallel.py); world = gpus x T x P
    sequence_parallel: bool = False  # SequenceParallel on the norms (needs tensor_parallel > 1)
    pipeline_parallel: int = 1  # pipeline stages P, 1F1B (engine/pipeline_parallel.py)
    micro_batches: int = 1  # micro-batches per step under pipeline parallel (each of `batch` samples)
    new_tokens: int = 16  # generate: tokens generated after the prompt (the design's sequence length)
    kv_cache: str = "dynamic"  # generate: dynamic (torch.cat per step) | static (preallocated)
    kv_dtype: str = "auto"  # generate: cache storage dtype; auto = the model's
    seq_len: int = 0  # token models: the sequence length (engine/sequence_length.py); 0: the design's own
    # fine-tuning (memdesigner.engine.finetune): frozen layers, LoRA / QLoRA, gradient accumulation
    freeze: tuple = ()  # node-name prefixes whose parameters are frozen
    lora_r: int = 0  # LoRA rank; 0: no adapters
    lora_alpha: float | None = None  # None: peft's default (8)
    lora_dropout: float = 0.0
    lora_targets: tuple = ()  # module-name suffixes (q_proj, v_proj); empty: peft's "all-linear"
    base_bits: int = 0  # QLoRA: 4 (bitsandbytes NF4, double quantisation) or 8 (LLM.int8); 0: as dtype
    grad_accum: int = 1  # micro-steps per optimizer step (gradients persist between them)
    checkpoint_layers: bool = False  # HF gradient_checkpointing_enable(): every repeated layer, non-reentrant
    master_weights: bool = False  # bf16/fp16 weights and gradients, fp32 master copy + fp32 optimizer state
    checkpoint_units: tuple = ()  # selective checkpointing: only these layers (engine/checkpoint_plan.py)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode: {self.mode!r} is not one of {', '.join(MODES)}")
        _positive("batch", self.batch)
        opt = OPTIMIZER_ALIASES.get(self.optimizer, self.optimizer)
        if opt not in OPTIMIZERS:
            raise ValueError(f"optimizer: {self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
        object.__setattr__(self, "optimizer", opt)
        dt = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(self.dtype, self.dtype)
        if dt not in DTYPES:
            raise ValueError(f"dtype: {self.dtype!r} is not one of {', '.join(DTYPES)}")
        object.__setattr__(self, "dtype", dt)
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: {self.backend!r} is not one of {', '.join(BACKENDS)}")
        _positive("gpus", self.gpus)
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy: {self.strategy!r} is not one of {', '.join(STRATEGIES)}")
        if self.gpus > 1 and self.strategy == "none":
            raise ValueError(f"strategy: gpus {self.gpus} needs a data-parallel strategy (ddp, zero1, zero2 or zero3)")
        if self.offload not in OFFLOADS:
            hint = (" (FSDP2 has no optimizer-only offload: CPUOffloadPolicy moves the parameter shards, "
                    "gradients and optimizer step together; use params)" if self.offload == "optimizer" else "")
            raise ValueError(f"offload: {self.offload!r} is not one of {', '.join(OFFLOADS)}{hint}")
        if self.offload != "none" and self.strategy not in ("zero2", "zero3"):
            raise ValueError("offload: params needs strategy zero2 or zero3 (FSDP2 CPUOffloadPolicy)")
        for name in ("tensor_parallel", "pipeline_parallel", "micro_batches"):
            _positive(name, getattr(self, name))
        if 1 < self.pipeline_parallel > self.micro_batches:
            raise ValueError(f"micro_batches: {self.micro_batches} is fewer than the {self.pipeline_parallel} pipeline "
                             "stages (Schedule1F1B needs at least one micro-batch per stage)")
        if self.mode == "generate" and (self.tensor_parallel > 1 or self.pipeline_parallel > 1):
            raise ValueError("tensor_parallel / pipeline_parallel: not modelled for generate (a train or "
                             "inference step only)")
        if self.sequence_parallel and self.tensor_parallel < 2:
            raise ValueError("sequence_parallel: needs tensor_parallel 2 or more")
        _positive("new_tokens", self.new_tokens)
        if not isinstance(self.seq_len, int) or isinstance(self.seq_len, bool) or not 0 <= self.seq_len <= MAX_SEQ_LEN:
            raise ValueError(f"seq_len: {self.seq_len!r} must be a whole number of tokens from 1 to {MAX_SEQ_LEN:,} "
                             "(0: the design's own)")
        if self.kv_cache not in KV_CACHES:
            raise ValueError(f"kv_cache: {self.kv_cache!r} is not one of {', '.join(KV_CACHES)}")
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype: {self.kv_dtype!r} is not one of {', '.join(KV_DTYPES)}")
        check_finetune_settings(self)
        check_units(self)
        if self.amp and dt != "fp32":
            raise ValueError("amp: mixed precision keeps fp32 weights; use dtype fp32 with amp")

    @property
    def training(self) -> bool:
        return self.mode == "train"

    @property
    def torch_dtype(self) -> str:
        return DTYPE_ALIASES[self.dtype]

    @property
    def amp_dtype(self) -> str | None:
        if not self.amp:
            return None
        return "bfloat16" if self.backend == "cpu" else "float16"

    @property
    def use_foreach(self) -> bool:
        if self.foreach is not None:
            return self.foreach
        return self.backend == "cuda"

    @property
    def data_parallel(self) -> str:
        """The strategy that shapes this step: none for inference (each rank runs the model alone)."""
        return self.strategy if self.training else "none"

    def with_(self, **kw) -> Settings:
        return replace(self, **kw)

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}  # as JSON has it


def _positive(name: str, v) -> None:
    """A count setting: a positive int below 10^1000. Absurd sizes are estimated (with a warning),
    but a byte total must stay a number Python prints: a 4,300-digit --batch made the table's own
    formatting raise."""
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name}: {v!r} must be a positive integer")
    if v.bit_length() > MAX_NUMBER_BITS:
        raise ValueError(f"{name}: a number of about {int(v.bit_length() * 0.30103):,} digits is above the maximum "
                         "10^1000")
