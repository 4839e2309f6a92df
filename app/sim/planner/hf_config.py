"""A Hugging Face ``config.json`` as the model shape every scene with a model uses.

``shape_of(config)`` reads the keys that decide the shape — the names each family's
``configuration_*.py`` in ``transformers`` gives them — and says what it read and what it left:

========================  ==========================================================
family (``model_type``)   keys read
========================  ==========================================================
llama, mistral, qwen2     num_hidden_layers, hidden_size, num_attention_heads,
                          num_key_value_heads (absent: = heads), intermediate_size,
                          vocab_size, head_dim (where given), max_position_embeddings,
                          tie_word_embeddings
mixtral                   the same, with num_local_experts and num_experts_per_tok;
                          its intermediate_size is each expert's
qwen2_moe                 the same as qwen2, with num_experts, num_experts_per_tok,
                          moe_intermediate_size, shared_expert_intermediate_size
deepseek_v3               the same, with n_routed_experts, num_experts_per_tok,
                          n_shared_experts, moe_intermediate_size, first_k_dense_replace
                          and MLA's q_lora_rank, kv_lora_rank, qk_nope_head_dim,
                          qk_rope_head_dim, v_head_dim; n_group and topk_group (the
                          group-limited routing: at most topk_group nodes a token)
gpt2                      n_layer, n_embd, n_head, n_inner (absent: 4·n_embd),
                          vocab_size, n_positions
========================  ==========================================================

Every other key (rope scaling, dropout rates, token ids, dtypes…) does not change the shape
and is listed as ignored. Pure: no HTTP, nothing stored; the route bounds the upload.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_BYTES = 1 << 20
"""The largest config.json accepted (a real one is a few kB)."""

LLAMA_KEYS = {"layers": "num_hidden_layers", "hidden": "hidden_size",
              "heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
              "ffn": "intermediate_size", "vocab": "vocab_size"}
GPT2_KEYS = {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head", "ffn": "n_inner",
             "vocab": "vocab_size"}
FAMILIES = ("llama", "mistral", "qwen2", "mixtral", "qwen2_moe", "deepseek_v3", "gpt2")
PRESET_OF = {"gpt2": "gpt2", "mixtral": "mixtral-8x7b", "qwen2_moe": "qwen1.5-moe-a2.7b",
             "deepseek_v3": "deepseek-v3"}
"""The preset of the same architecture a page starts from (Llama-like families: Llama 3 8B);
the shape fields then override its sizes."""
LIMITS = {"layers": 512, "hidden": 131072, "heads": 512, "kv_heads": 512, "ffn": 524288,
          "vocab": 1048576, "experts": 1024, "top_k": 64, "shared_experts": 64,
          "expert_ffn": 524288}


class ConfigError(ValueError):
    """A config that cannot be read: ``key`` names the field at fault."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class ModelShapeAnswer:
    model_type: str
    shape: dict
    read: tuple[str, ...]
    ignored: tuple[str, ...]
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"model_type": self.model_type, "shape": self.shape, "read": list(self.read),
                "ignored": list(self.ignored), **self.extra}


def _int(config: dict, key: str, read: list[str], name: str, default=None) -> int:
    if key not in config or config[key] is None:
        if default is None:
            raise ConfigError(key, f"{key} is missing: it gives the model's {name}")
        return default
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(key, f"{key} must be a positive integer (the {name}), got "
                               f"{type(value).__name__}")
    if value > LIMITS.get(name, 1 << 40):
        raise ConfigError(key, f"{key} ({value:,}) is more than the largest {name} a scene "
                               f"takes ({LIMITS[name]:,})")
    read.append(key)
    return value


def shape_of(config: object) -> ModelShapeAnswer:
    """The shape fields of a parsed config.json (a dict), or :class:`ConfigError`."""
    if not isinstance(config, dict):
        raise ConfigError("config", "a config.json is a JSON object ({ … }), got "
                                    f"{type(config).__name__}")
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise ConfigError("model_type", "model_type is missing: it names the architecture "
                                        f"({', '.join(FAMILIES)})")
    if model_type not in FAMILIES:
        shown = model_type if len(model_type) <= 40 else model_type[:40] + "…"
        raise ConfigError("model_type", f"model_type {shown!r} is not one this reader knows: "
                                        f"{', '.join(FAMILIES)}")
    read = ["model_type"]
    if model_type == "gpt2":
        shape = _shape(config, GPT2_KEYS, read, gpt=True)
        extra = {"family": "gpt", "max_positions": _int(config, "n_positions", read,
                                                           "positions", 1024)}
    else:
        shape = _shape(config, LLAMA_KEYS, read)
        extra = {"family": "moe" if model_type in PRESET_OF else "llama"}
        if "max_position_embeddings" in config:
            extra["max_positions"] = _int(config, "max_position_embeddings", read, "positions")
        if "head_dim" in config and config["head_dim"] is not None:
            extra["head_dim"] = _int(config, "head_dim", read, "head_dim")
        _moe(model_type, config, shape, read, extra)
    if "tie_word_embeddings" in config:
        read.append("tie_word_embeddings")
        extra["tied_embeddings"] = bool(config["tie_word_embeddings"])
    _check(shape)
    extra.setdefault("head_dim", shape["hidden"] // shape["heads"])
    extra["preset"] = PRESET_OF.get(model_type, "llama3-8b")
    extra["param_count"] = param_count(shape, extra)
    if "experts" in shape:            # what a dense page's shape fields cannot count
        extra["moe_param_count"] = extra["param_count"]
    ignored = tuple(k for k in config if k not in read)
    return ModelShapeAnswer(model_type, shape, tuple(read), ignored, extra)


def _shape(config: dict, keys: dict, read: list[str], gpt: bool = False) -> dict:
    shape = {}
    for name in ("layers", "hidden", "heads"):
        shape[name] = _int(config, keys[name], read, name)
    if gpt:
        shape["kv_heads"] = shape["heads"]
        shape["ffn"] = _int(config, keys["ffn"], read, "ffn", 4 * shape["hidden"])
    else:
        shape["kv_heads"] = _int(config, keys["kv_heads"], read, "kv_heads", shape["heads"])
        shape["ffn"] = _int(config, keys["ffn"], read, "ffn")
    shape["vocab"] = _int(config, keys["vocab"], read, "vocab")
    return shape


def _moe(model_type: str, config: dict, shape: dict, read: list[str], extra: dict) -> None:
    if model_type == "mixtral":
        shape["experts"] = _int(config, "num_local_experts", read, "experts")
        shape["top_k"] = _int(config, "num_experts_per_tok", read, "top_k")
        shape["shared_experts"] = 0
        shape["expert_ffn"] = shape["ffn"]
    elif model_type == "qwen2_moe":
        shape["experts"] = _int(config, "num_experts", read, "experts")
        shape["top_k"] = _int(config, "num_experts_per_tok", read, "top_k")
        shape["expert_ffn"] = _int(config, "moe_intermediate_size", read, "expert_ffn")
        shared = _int(config, "shared_expert_intermediate_size", read, "expert_ffn", 0) \
            if config.get("shared_expert_intermediate_size") else 0
        shape["shared_experts"] = 1 if shared else 0
        if shared:
            extra["shared_expert_ffn"] = shared
    elif model_type == "deepseek_v3":
        shape["experts"] = _int(config, "n_routed_experts", read, "experts")
        shape["top_k"] = _int(config, "num_experts_per_tok", read, "top_k")
        shape["expert_ffn"] = _int(config, "moe_intermediate_size", read, "expert_ffn")
        shape["shared_experts"] = (_int(config, "n_shared_experts", read, "shared_experts")
                                   if config.get("n_shared_experts") else 0)
        extra["dense_layers"] = (_int(config, "first_k_dense_replace", read, "layers")
                                 if config.get("first_k_dense_replace") else 0)
        mla = {}
        for key in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                    "v_head_dim"):
            if config.get(key):
                mla[key] = _int(config, key, read, key)
        if mla:
            extra["mla"] = mla
        if config.get("topk_group") and config.get("n_group"):
            # group-limited routing: experts in n_group groups (one a node in training),
            # a token to at most topk_group of them — DeepSeek-V3's node limit M
            extra["node_limit"] = _int(config, "topk_group", read, "top_k")
            extra["expert_groups"] = _int(config, "n_group", read, "experts")
    if "top_k" in shape and "experts" in shape and shape["top_k"] > shape["experts"]:
        raise ConfigError("num_experts_per_tok", f"num_experts_per_tok ({shape['top_k']}) "
                                                 f"must be at most the experts "
                                                 f"({shape['experts']})")


def _check(shape: dict) -> None:
    h, a, kv = shape["hidden"], shape["heads"], shape["kv_heads"]
    if a % kv:
        raise ConfigError("num_key_value_heads", f"key-value heads ({kv}) must divide the "
                                                 f"attention heads ({a})")


def param_count(shape: dict, extra: dict) -> int:
    """Parameters of the shape (embeddings, attention, MLP or experts, norms), for a page's
    ``param_count`` field: GPT-2 with biases, LayerNorms and tied embeddings; the others with
    RMSNorms, SwiGLU and untied embeddings unless the config ties them."""
    L, h, a, kv, f, V = (shape[k] for k in ("layers", "hidden", "heads", "kv_heads", "ffn",
                                             "vocab"))
    d = extra.get("head_dim") or h // a
    if extra.get("family") == "gpt":
        layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
        return L * layer + V * h + extra.get("max_positions", 1024) * h + 2 * h
    mla = extra.get("mla")
    if mla:
        q_rank, kv_rank = mla.get("q_lora_rank", 0), mla["kv_lora_rank"]
        qk = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
        attention = (h * q_rank + q_rank + q_rank * a * qk
                     + h * (kv_rank + mla["qk_rope_head_dim"]) + kv_rank
                     + kv_rank * a * (mla["qk_nope_head_dim"] + mla["v_head_dim"])
                     + a * mla["v_head_dim"] * h)
    else:
        attention = h * a * d + 2 * h * kv * d + a * d * h
    if "experts" in shape:
        dense = extra.get("dense_layers", 0)
        shared_ffn = extra.get("shared_expert_ffn", shape["expert_ffn"])
        moe = (shape["experts"] * 3 * h * shape["expert_ffn"] + h * shape["experts"]
               + shape["shared_experts"] * 3 * h * shared_ffn)
        mlp_total = dense * 3 * h * f + (L - dense) * moe
    else:
        mlp_total = L * 3 * h * f
    embeddings = V * h * (1 if extra.get("tied_embeddings") else 2)
    return L * (attention + 2 * h) + mlp_total + embeddings + h
